package breaker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of [Policy]. They are the values a production team arrived at by
// replaying a fault (40% errors plus 20% slow calls in front of one service)
// against a three-tier call chain; the README explains each one.
const (
	// DefaultWindow is the statistics window. Five seconds reacts within
	// one client timeout while holding enough calls to judge a ratio.
	DefaultWindow = 5 * time.Second
	// DefaultBuckets splits the window into 500 ms slots, so a call leaves
	// the window at most 500 ms later than its exact age says.
	DefaultBuckets = 10
	// DefaultMinRequests is the sample size below which the window's
	// rules do not trip (a run of ConsecutiveFailures still does): a
	// 5 QPS reconciliation job never fills a 5 s window, and the breaker
	// should rather miss a fault there than open on three errors.
	DefaultMinRequests = 20
	// DefaultErrorRatio sits between the load test's 40% (the downstream
	// coped) and 60% (worker pools full within 10 s).
	DefaultErrorRatio = 0.5
	// DefaultOpenFor is the first cooldown.
	DefaultOpenFor = 30 * time.Second
	// DefaultMaxOpenFor caps the doubling cooldown (30 s, 60 s, 120 s).
	DefaultMaxOpenFor = 120 * time.Second
	// DefaultJitter spreads cooldowns by ±20% so the instances of a fleet
	// do not probe a recovering downstream in the same instant.
	DefaultJitter = 0.2
	// DefaultProbes is the fixed number of half-open probes; all must pass.
	DefaultProbes = 3
	// DefaultWarmup is how long a cold target's outcomes are not counted.
	DefaultWarmup = 60 * time.Second
)

// Limits that keep a policy's cost bounded. They are far beyond any value
// the defaults suggest; a policy outside them is refused, not clamped.
const (
	// MaxBuckets bounds the window's memory (24 bytes a bucket) and the
	// cost of summing it on every failure.
	MaxBuckets = 1000
	// MaxProbes bounds the half-open admission count. A half-open state
	// that admits more real calls than this is no longer probing.
	MaxProbes = 100
	// MaxDuration bounds every duration of a policy (window, cooldowns,
	// timeouts, warmup): a breaker open for more than a day is an outage
	// to be handled by people, and the bound keeps every sum of times far
	// from overflowing.
	MaxDuration = 24 * time.Hour
)

// Policy is the set of numbers that decides when a breaker opens and how it
// recovers. It is a plain value: copy it, compare it, store it as JSON.
// [DefaultPolicy] returns the recommended values; start from it and change
// what you need. A Policy is checked by [Policy.Validate] wherever it is
// accepted, and an invalid one is refused as a whole, never corrected.
//
// The JSON form uses snake_case names and duration strings ("5s", "1m30s").
// Decoding is strict: an unknown field, a field named twice, a value of
// the wrong type and an invalid result are errors that name the field, and
// an error quotes at most a short prefix of a bad value. Decoding onto a
// Policy that already holds values (such as DefaultPolicy()) changes only
// the fields the document names, so a document may be partial.
type Policy struct {
	// Window is the length of the sliding statistics window. Default 5s.
	Window time.Duration `json:"window"`
	// Buckets is the number of slots the window is divided into; Window
	// divided by Buckets must be a whole number of milliseconds.
	// Default 10 (500 ms each).
	Buckets int `json:"buckets"`
	// MinRequests is the number of counted calls the window must hold
	// before the window's trip rules (ErrorRatio, ErrorCount, SlowRatio)
	// are evaluated; ConsecutiveFailures does not wait for it. Default 20.
	MinRequests int `json:"min_requests"`
	// ErrorRatio trips the breaker when failures (timeouts included)
	// divided by counted calls reaches it. In (0, 1], or 0 to turn the
	// ratio rule off, which is allowed only when another trip rule
	// (ErrorCount, SlowCall or ConsecutiveFailures) is set. Default 0.5.
	ErrorRatio float64 `json:"error_ratio"`
	// ErrorCount, when positive, also trips the breaker when the window
	// holds at least this many failures. Default 0 (off).
	ErrorCount int `json:"error_count"`
	// SlowCall, when positive, marks a counted call that took longer than
	// this as slow. Default 0 (off).
	SlowCall time.Duration `json:"slow_call"`
	// SlowRatio trips the breaker when slow calls divided by counted calls
	// reaches it. Required, in (0, 1], when SlowCall is set; must be 0
	// otherwise. Default 0.
	SlowRatio float64 `json:"slow_ratio"`
	// ConsecutiveFailures, when positive, also trips the breaker after this
	// many failures in a row with no success between them, however few
	// calls the window holds (MinRequests does not apply to it): it is the
	// rule for methods with too little traffic to fill the window.
	// Default 0 (off).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// Timeout, when positive, is a deadline added to each call's context;
	// a call that takes longer is a timeout even if it returned nil.
	// Default 0 (no deadline is added).
	Timeout time.Duration `json:"timeout"`
	// OpenFor is the first cooldown: how long the breaker stays open before
	// it lets probes through. Default 30s.
	OpenFor time.Duration `json:"open_for"`
	// MaxOpenFor caps the cooldown, which doubles on every reopen before the
	// breaker has been stable, and is also how long the breaker must stay
	// closed to count as stable again. At least OpenFor. Default 2m.
	MaxOpenFor time.Duration `json:"max_open_for"`
	// Jitter scales each cooldown by a factor drawn uniformly from
	// [1-Jitter, 1+Jitter]. In [0, 1). Default 0.2.
	Jitter float64 `json:"jitter"`
	// Probes is the number of real calls admitted in the half-open state.
	// All of them must pass for the breaker to close. In [1, 100].
	// Default 3.
	Probes int `json:"probes"`
	// Warmup is how long the outcomes of calls to a cold target are left
	// out of the window (see [Breaker.Rewarm] and [WithInstanceStart]).
	// Default 1m.
	Warmup time.Duration `json:"warmup"`
	// StrictProbes makes a probe that ends in a failure (an error that is
	// not a timeout) fail the half-open episode. By default such a probe
	// passes: the downstream answered, so the path to it works; only a
	// timeout proves it has not recovered. A probe whose function panics
	// counts as a failure: by default it frees its slot without a verdict
	// (it says nothing of the downstream's answers); with StrictProbes it
	// fails the episode, like any other failure.
	StrictProbes bool `json:"strict_probes"`
}

// DefaultPolicy returns the policy with every field at its default.
func DefaultPolicy() Policy { return defaultPolicy }

// defaultPolicy is made from policyFields once. A default of the wrong
// type, or a field of a type the encoder and decoder do not handle, is a
// mistake in the list; it panics here, when the package is initialised,
// so that no program or test runs with it.
var defaultPolicy = func() Policy {
	var p Policy
	for _, f := range policyFields {
		switch dst := f.at(&p).(type) {
		case *time.Duration:
			*dst = defaultOf[time.Duration](f)
		case *int:
			*dst = defaultOf[int](f)
		case *float64:
			*dst = defaultOf[float64](f)
		case *bool:
			*dst = defaultOf[bool](f)
		default:
			panic(fmt.Sprintf("breaker: policy field %s is of type %T, which policyField does not handle", f.name, dst))
		}
	}
	return p
}()

func defaultOf[T any](f policyField) T {
	d, ok := f.def.(T)
	if !ok {
		panic(fmt.Sprintf("breaker: the default of policy field %s is of type %T, want %T", f.name, f.def, d))
	}
	return d
}

// policyField describes one field of [Policy]. policyFields, the list of
// them, is what the encoder, the decoder, the validator and DefaultPolicy
// iterate over, so that a new field is written in two places (the struct,
// where it is documented, and the list) instead of six; a test checks by
// reflection that the two agree.
type policyField struct {
	// name is the field's JSON name, which problems use too.
	name string
	// at returns a pointer to the field in p: a *time.Duration, *int,
	// *float64 or *bool, which decides how the field is encoded and
	// decoded (a duration as a string such as "5s").
	at func(p *Policy) any
	// def is the field's default, of the field's type.
	def any
	// check says what is wrong with the field's value in p, or returns "".
	// It may read other fields (max_open_for must be at least open_for),
	// but it reports only on its own. nil means every value is valid.
	check func(p *Policy) string
}

// policyFields lists the fields of Policy in the struct's order, which is
// the order of the encoded form and of the problems Validate reports.
var policyFields = []policyField{{
	name: "window", def: DefaultWindow,
	at:    func(p *Policy) any { return &p.Window },
	check: func(p *Policy) string { return positiveDuration(p.Window) },
}, {
	name: "buckets", def: DefaultBuckets,
	at: func(p *Policy) any { return &p.Buckets },
	check: func(p *Policy) string {
		switch {
		case p.Buckets < 1 || p.Buckets > MaxBuckets:
			return fmt.Sprintf("must be in [1, %d], got %d", MaxBuckets, p.Buckets)
		case p.Window > 0 && p.Window%(time.Duration(p.Buckets)*time.Millisecond) != 0:
			return fmt.Sprintf("must divide window (%v) into whole milliseconds, got %d", p.Window, p.Buckets)
		}
		return ""
	},
}, {
	name: "min_requests", def: DefaultMinRequests,
	at:    func(p *Policy) any { return &p.MinRequests },
	check: func(p *Policy) string { return notNegative(p.MinRequests, "") },
}, {
	name: "error_ratio", def: DefaultErrorRatio,
	at: func(p *Policy) any { return &p.ErrorRatio },
	check: func(p *Policy) string {
		switch {
		case p.ErrorRatio != 0 || math.IsNaN(p.ErrorRatio):
			return ratio(p.ErrorRatio)
		case p.ErrorCount <= 0 && p.SlowCall <= 0 && p.ConsecutiveFailures <= 0:
			return "is 0 (off) and no other trip rule is set; set error_ratio in (0, 1], or error_count, slow_call or consecutive_failures"
		}
		return ""
	},
}, {
	name: "error_count", def: 0,
	at:    func(p *Policy) any { return &p.ErrorCount },
	check: func(p *Policy) string { return notNegative(p.ErrorCount, "turns the rule off") },
}, {
	name: "slow_call", def: time.Duration(0),
	at:    func(p *Policy) any { return &p.SlowCall },
	check: func(p *Policy) string { return optionalDuration(p.SlowCall, "turns the rule off") },
}, {
	name: "slow_ratio", def: 0.0,
	at: func(p *Policy) any { return &p.SlowRatio },
	check: func(p *Policy) string {
		switch {
		case p.SlowCall < 0 || p.SlowCall > MaxDuration:
			return "" // slow_call's own problem says it all
		case p.SlowCall > 0:
			return ratio(p.SlowRatio)
		case p.SlowRatio != 0:
			return fmt.Sprintf("is set to %v but slow_call is 0; set slow_call to use the slow-call rule", p.SlowRatio)
		}
		return ""
	},
}, {
	name: "consecutive_failures", def: 0,
	at:    func(p *Policy) any { return &p.ConsecutiveFailures },
	check: func(p *Policy) string { return notNegative(p.ConsecutiveFailures, "turns the rule off") },
}, {
	name: "timeout", def: time.Duration(0),
	at:    func(p *Policy) any { return &p.Timeout },
	check: func(p *Policy) string { return optionalDuration(p.Timeout, "adds no deadline") },
}, {
	name: "open_for", def: DefaultOpenFor,
	at:    func(p *Policy) any { return &p.OpenFor },
	check: func(p *Policy) string { return positiveDuration(p.OpenFor) },
}, {
	name: "max_open_for", def: DefaultMaxOpenFor,
	at: func(p *Policy) any { return &p.MaxOpenFor },
	check: func(p *Policy) string {
		switch {
		case p.MaxOpenFor < p.OpenFor || p.MaxOpenFor <= 0:
			return fmt.Sprintf("must be at least open_for (%v), got %v", p.OpenFor, p.MaxOpenFor)
		case p.MaxOpenFor > MaxDuration:
			return atMostMaxDuration(p.MaxOpenFor)
		}
		return ""
	},
}, {
	name: "jitter", def: DefaultJitter,
	at: func(p *Policy) any { return &p.Jitter },
	check: func(p *Policy) string {
		if math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter >= 1 {
			return fmt.Sprintf("must be in [0, 1), got %v", p.Jitter)
		}
		return ""
	},
}, {
	name: "probes", def: DefaultProbes,
	at: func(p *Policy) any { return &p.Probes },
	check: func(p *Policy) string {
		if p.Probes < 1 || p.Probes > MaxProbes {
			return fmt.Sprintf("must be in [1, %d], got %d", MaxProbes, p.Probes)
		}
		return ""
	},
}, {
	name: "warmup", def: DefaultWarmup,
	at:    func(p *Policy) any { return &p.Warmup },
	check: func(p *Policy) string { return optionalDuration(p.Warmup, "turns warmup off") },
}, {
	name: "strict_probes", def: false,
	at: func(p *Policy) any { return &p.StrictProbes },
}}

// positiveDuration is the problem of a duration that must be in
// (0, MaxDuration].
func positiveDuration(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be positive, got %v", d)
	}
	return atMostMaxDuration(d)
}

// optionalDuration is the problem of a duration that must be in
// [0, MaxDuration], where zero says what 0 does.
func optionalDuration(d time.Duration, zero string) string {
	if d < 0 {
		return fmt.Sprintf("must not be negative (0 %s), got %v", zero, d)
	}
	return atMostMaxDuration(d)
}

func atMostMaxDuration(d time.Duration) string {
	if d > MaxDuration {
		return fmt.Sprintf("must be at most %v, got %v", MaxDuration, d)
	}
	return ""
}

// notNegative is the problem of a count that must not be negative, where
// zero, if not empty, says what 0 does.
func notNegative(n int, zero string) string {
	switch {
	case n >= 0:
		return ""
	case zero == "":
		return fmt.Sprintf("must not be negative, got %d", n)
	}
	return fmt.Sprintf("must not be negative (0 %s), got %d", zero, n)
}

// ratio is the problem of a ratio that must be in (0, 1].
func ratio(r float64) string {
	if math.IsNaN(r) || r <= 0 || r > 1 {
		return fmt.Sprintf("must be in (0, 1], got %v", r)
	}
	return ""
}

// FieldError is one problem with one field of a policy document or value.
type FieldError struct {
	// Field is the JSON name of the field, prefixed by its path in the
	// document when the policy was nested (`overrides["orders.Create"].window`),
	// or "(document)" for a problem with the document as a whole. A name or
	// key that is not a plain word is quoted, and cut short if it is long.
	Field string
	// Problem says what is wrong, in words.
	Problem string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Problem }

// PolicyError reports every problem found in a policy. Nothing of a policy
// that produced a PolicyError has been applied.
type PolicyError struct {
	Problems []FieldError
}

// maxListed is how many problems the message of a PolicyError lists. A
// policy value has at most one problem a field, but a document can have
// any number (a thousand unknown fields), and a message that grows with
// the document has no place in a log line.
const maxListed = 20

func (e *PolicyError) Error() string {
	var sb strings.Builder
	sb.WriteString("breaker: invalid policy: ")
	for i, p := range e.Problems {
		if i == maxListed {
			sb.WriteString("; and " + strconv.Itoa(len(e.Problems)-i) + " more problems")
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p.Error())
	}
	return sb.String()
}

// Validate reports every invalid field of p by its JSON name, or nil.
// The returned error is a *[PolicyError].
func (p Policy) Validate() error {
	var v validator
	p.check(&v, "")
	return v.err()
}

type validator struct{ problems []FieldError }

func (v *validator) add(field, format string, args ...any) {
	v.problems = append(v.problems, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &PolicyError{Problems: v.problems}
}

// check records a problem for each invalid field of p, its name prefixed
// with prefix.
func (p Policy) check(v *validator, prefix string) {
	for _, f := range policyFields {
		if f.check == nil {
			continue
		}
		if problem := f.check(&p); problem != "" {
			v.problems = append(v.problems, FieldError{Field: prefix + f.name, Problem: problem})
		}
	}
}

// MarshalJSON writes every field, in the order of the struct, durations
// as strings such as "5s", so that the document says exactly what the
// breaker does.
func (p Policy) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 320), '{')
	for i, f := range policyFields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.name...) // a plain word: nothing to escape
		b = append(b, '"', ':')
		v := f.at(&p)
		if d, ok := v.(*time.Duration); ok {
			v = d.String()
		}
		// encoding/json writes each value as it would as a struct member
		// (floats included), and refuses NaN and ±Inf the same way.
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(b, enc...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes a policy document strictly onto p and validates
// the result: fields the document does not name keep their values, and
// unknown fields, fields named twice, values of the wrong type and an
// invalid result are errors (a *[PolicyError]) naming each field. On error
// p is unchanged. [ParsePolicy] is the same decoding onto [DefaultPolicy].
func (p *Policy) UnmarshalJSON(data []byte) error {
	q := *p
	if problems := decodePolicyInto(&q, data, ""); len(problems) > 0 {
		return &PolicyError{Problems: problems}
	}
	*p = q
	return nil
}

// ParsePolicy decodes a JSON policy document onto [DefaultPolicy] and
// validates the result. A field the document leaves out keeps its default.
// The error, if any, is a *[PolicyError] naming every bad field.
func ParsePolicy(data []byte) (Policy, error) {
	p := DefaultPolicy()
	if err := p.UnmarshalJSON(data); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// decodePolicyInto is the building block for documents that nest policies
// (a group's per-key overrides): it decodes data onto p, prefixing every
// field name in the problems it reports with prefix, and validates the
// result. It returns the problems instead of an error so that a caller can
// gather every problem of a whole document before refusing it; p is changed
// only when there are none.
func decodePolicyInto(p *Policy, data []byte, prefix string) []FieldError {
	var v validator
	q := *p
	q.decode(&v, data, prefix)
	if len(v.problems) == 0 {
		q.check(&v, prefix)
	}
	if len(v.problems) == 0 {
		*p = q
	}
	return v.problems
}

// decode overlays the fields named in data onto p, recording a problem for
// each unknown field, each field named twice, and each value that does not
// fit its field.
func (p *Policy) decode(v *validator, data []byte, prefix string) {
	where := strings.TrimSuffix(prefix, ".")
	if where == "" {
		where = "(document)"
	}
	fields := members(v, data, where, "a JSON object of policy fields",
		func(name string) string { return prefix + fieldName(name) })
	for _, name := range sortedKeys(fields) { // report problems in a stable order
		raw := fields[name]
		field := prefix + fieldName(name)
		f, ok := policyFieldNamed(name)
		if !ok {
			v.add(field, "unknown field")
			continue
		}
		switch dst := f.at(p).(type) { // defaultPolicy has made sure there is no other
		case *time.Duration:
			decodeDuration(v, field, raw, dst)
		case *int:
			decodeInt(v, field, raw, dst)
		case *float64:
			decodeFloat(v, field, raw, dst)
		case *bool:
			decodeBool(v, field, raw, dst)
		}
	}
}

// policyFieldNamed returns the field of Policy whose JSON name is name.
func policyFieldNamed(name string) (policyField, bool) {
	for _, f := range policyFields {
		if f.name == name {
			return f, true
		}
	}
	return policyField{}, false
}

// members reads data as one JSON object and returns its members by name,
// or nil if data is not one JSON object. where names the object in
// problems, want says what it should be, and path names a member.
//
// It reads the object token by token rather than with json.Unmarshal into
// a map, because Unmarshal keeps the last of two members with the same
// name: a document that sets a field twice would say two things and be
// read as the second. Here a name that appears twice is a problem at its
// path, and the name is left out of the result so that neither value is
// decoded. Only the object's own members are read this way; each value is
// taken whole (encoding/json bounds its nesting depth) for the caller to
// decode, with members again if it is an object in its turn. Data after
// the object is a problem too.
func members(v *validator, data []byte, where, want string, path func(name string) string) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a huge number is "not an object", not a float overflow
	syntax := func(err error) map[string]json.RawMessage {
		v.add(where, "want %s: %s", want, syntaxProblem(err, dec.InputOffset()))
		return nil
	}
	tok, err := dec.Token()
	if err == io.EOF {
		v.add(where, "want %s, got an empty document", want)
		return nil
	}
	if err != nil {
		return syntax(err)
	}
	if tok != json.Delim('{') {
		v.add(where, "want %s, got %s", want, short(data))
		return nil
	}
	m := make(map[string]json.RawMessage)
	var dup map[string]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		name, ok := tok.(string)
		if !ok { // Token only returns strings in a key's place; be sure
			return syntax(fmt.Errorf("want a member name, got %v", tok))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntax(err)
		}
		if _, seen := m[name]; !seen {
			m[name] = raw
			continue
		}
		if !dup[name] {
			if dup == nil {
				dup = make(map[string]bool)
			}
			dup[name] = true
			v.add(path(name), "duplicate key")
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return syntax(err)
	}
	// JSON's whitespace only: bytes.TrimSpace would let \v or U+00A0
	// through, which no JSON parser accepts.
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		at := int64(len(data) - len(rest))
		v.add(where, "want %s and nothing after it, got more at byte %d: %s", want, at, quoteKey(string(rest)))
		return nil
	}
	for name := range dup {
		delete(m, name)
	}
	return m
}

// syntaxProblem describes a JSON syntax error without quoting the input.
func syntaxProblem(err error, offset int64) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return "unexpected end of the document at byte " + strconv.FormatInt(offset, 10)
	}
	return err.Error()
}

func decodeDuration(v *validator, field string, raw json.RawMessage, dst *time.Duration) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || isNull(raw) {
		v.add(field, `want a duration string such as "5s" or "1m30s", got %s`, short(raw))
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.add(field, `want a duration string such as "5s" or "1m30s", got %s`, short(raw))
		return
	}
	*dst = d
}

func decodeInt(v *validator, field string, raw json.RawMessage, dst *int) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// A json.Number also accepts a quoted number; a policy field does not.
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' || dec.Decode(&n) != nil || isNull(raw) {
		v.add(field, "want an integer, got %s", short(raw))
		return
	}
	i, err := n.Int64()
	if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
		v.add(field, "want an integer, got %s", short(raw))
		return
	}
	*dst = int(i)
}

func decodeFloat(v *validator, field string, raw json.RawMessage, dst *float64) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || isNull(raw) {
		v.add(field, "want a number, got %s", short(raw))
		return
	}
	*dst = f
}

func decodeBool(v *validator, field string, raw json.RawMessage, dst *bool) {
	if err := json.Unmarshal(raw, dst); err != nil || isNull(raw) {
		v.add(field, "want true or false, got %s", short(raw))
	}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// maxQuote is how many bytes of a bad value, or of a key, a problem
// quotes. An error ends up in a log line or an HTTP answer, so it must stay
// short whatever the document holds (a 10 MB duration string, say).
const maxQuote = 64

// short quotes a raw JSON value for a problem: whole if it is short, else
// its first maxQuote bytes and its length.
func short(raw []byte) string {
	s := bytes.TrimSpace(raw)
	if len(s) <= maxQuote {
		return string(s)
	}
	return string(s[:cut(s)]) + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// cut returns where to cut s to keep at most maxQuote bytes without
// splitting a UTF-8 sequence.
func cut[S string | []byte](s S) int {
	n := maxQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// quoteKey quotes a key of a document (a field name, an override key) for
// a path: as a Go string literal, cut to maxQuote bytes with its length if
// it is longer.
func quoteKey(key string) string {
	if len(key) <= maxQuote {
		return strconv.Quote(key)
	}
	return strconv.Quote(key[:cut(key)]) + "…(" + strconv.Itoa(len(key)) + " bytes)"
}

// fieldName is a member name as it appears in a path: as it is when it is
// a plain name (letters, digits, '_', '-', '.') short enough to quote, and
// quoted otherwise, so that a name holding a newline or 10 MB of text
// cannot forge or flood an error message.
func fieldName(name string) string {
	if len(name) == 0 || len(name) > maxQuote {
		return quoteKey(name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return quoteKey(name)
		}
	}
	return name
}

// rules is a validated policy compiled to the integer nanoseconds and
// counts the hot path compares against. It is immutable once built and
// shared by every breaker created with the same policy.
type rules struct {
	p          Policy
	width      int64 // bucket width, ns
	buckets    int64
	minReq     uint64
	errCount   uint64
	slowCall   int64
	consec     uint64
	timeout    int64
	openFor    int64
	maxOpenFor int64
	warmup     int64
	probes     uint64
	// timed is true when a call's start time is needed: a deadline or a
	// slow-call threshold. Otherwise the closed path reads the clock once.
	timed bool
}

// compiled interns the rules of the policies breakers are created with:
// breakers with equal policies (most of a service's, which use the
// defaults) share one immutable *rules instead of 200 bytes each. At most
// maxCompiled policies are kept, so a program that makes up policies
// without end cannot grow it without end.
var compiled struct {
	sync.Mutex
	m map[Policy]*rules
}

const maxCompiled = 64

// compileShared is compile through the intern table.
func compileShared(p Policy) (*rules, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if r, ok := compiled.m[p]; ok {
		return r, nil
	}
	r, err := compile(p)
	if err != nil {
		return nil, err
	}
	if compiled.m == nil {
		compiled.m = make(map[Policy]*rules)
	}
	if len(compiled.m) < maxCompiled { // an invalid policy never gets here
		compiled.m[p] = r
	}
	return r, nil
}

func compile(p Policy) (*rules, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &rules{
		p:          p,
		width:      int64(p.Window) / int64(p.Buckets),
		buckets:    int64(p.Buckets),
		minReq:     uint64(p.MinRequests),
		errCount:   uint64(p.ErrorCount),
		slowCall:   int64(p.SlowCall),
		consec:     uint64(p.ConsecutiveFailures),
		timeout:    int64(p.Timeout),
		openFor:    int64(p.OpenFor),
		maxOpenFor: int64(p.MaxOpenFor),
		warmup:     int64(p.Warmup),
		probes:     uint64(p.Probes),
		timed:      p.Timeout > 0 || p.SlowCall > 0,
	}, nil
}
