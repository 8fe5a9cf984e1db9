package breaker

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker/internal/jsondoc"
)

// Defaults of [Policy], as [DefaultPolicy] returns them; docs/policy.md
// gives the reason for each.
const (
	defaultWindow           = 5 * time.Second
	defaultBuckets          = 10
	defaultMinRequests      = 20
	defaultErrorRatio       = 0.5
	defaultOpenFor          = 30 * time.Second
	defaultMaxOpenFor       = 120 * time.Second
	defaultJitter           = 0.2
	defaultProbes           = 3
	defaultWarmup           = 60 * time.Second
	defaultAdaptiveQuantile = 0.99
	defaultAdaptiveFactor   = 2.0
)

// AdaptiveInterval is how often, on the breaker's clock, the adaptive
// timeout is recomputed.
const AdaptiveInterval = 30 * time.Second

// Limits of a policy's fields: a policy outside them is refused, not
// clamped. They bound its cost (buckets, probes) and keep every sum of
// times far from overflowing (maxDuration, for every duration).
const (
	maxBuckets        = 1000
	maxProbes         = 100
	maxDuration       = 24 * time.Hour
	maxAdaptiveFactor = 10
)

// Policy is the set of numbers that decides when a breaker opens and how it
// recovers: a plain, comparable value. Start from [DefaultPolicy] and
// change what you need. An invalid Policy is refused as a whole wherever
// it is accepted, never corrected ([Policy.Validate]).
//
// As JSON it uses snake_case names and duration strings ("5s"). Decoding
// is strict (unknown, repeated or mistyped fields are errors naming the
// field) and changes only the fields the document names, so decoding onto
// DefaultPolicy() takes a partial document.
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
	// (ErrorCount, SlowCall or ConsecutiveFailures) is set or Throttle is
	// enabled. Default 0.5.
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
	// ConsecutiveFailures, when positive, also trips the breaker after
	// this many failures in a row, however few calls the window holds:
	// the rule for methods with too little traffic to fill the window.
	// Default 0 (off).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// CallTimeout, when positive, is a deadline added to each call's
	// context; a call that takes longer is a timeout even if it returned
	// nil. Under AdaptiveTimeout it is where the adaptive deadline starts.
	// It is not how long the breaker stays open (OpenFor). Default 0.
	CallTimeout time.Duration `json:"call_timeout"`
	// AdaptiveTimeout makes the per-call deadline follow the calls'
	// latency when it is Enabled. Default off.
	AdaptiveTimeout AdaptiveTimeout `json:"adaptive_timeout"`
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
	// out of the window (see [Breaker.MarkCold] and [WithInstanceStart]).
	// Default 1m.
	Warmup time.Duration `json:"warmup"`
	// StrictProbes makes a probe that fails (an error that is not a
	// timeout, or a panic) fail the half-open episode. By default such a
	// probe passes, since the downstream answered; a panicking probe frees
	// its slot without a verdict; only a timeout fails it.
	StrictProbes bool `json:"strict_probes"`
	// Throttle refuses a share of the closed breaker's calls while too
	// few of them succeed, when it is Enabled. Default off.
	Throttle Throttle `json:"throttle"`
}

// AdaptiveTimeout is the adaptive per-call deadline of a [Policy]: every
// [AdaptiveInterval] it becomes Quantile of the window's latency times
// Factor plus Base, within [Min, Max], once the window holds MinRequests
// completed calls; until then it is Policy.CallTimeout, or Max if that is
// 0. Calls cut by the deadline count as lasting at least what they ran,
// so hung calls never raise it (docs/latency.md). The fields apply only
// when Enabled; otherwise they need only be in range.
type AdaptiveTimeout struct {
	// Enabled turns the adaptive timeout on. Default false.
	Enabled bool `json:"enabled"`
	// Quantile is the quantile of the window's latencies the adaptive
	// timeout follows. In (0, 1) when Enabled. Default 0.99.
	Quantile float64 `json:"quantile"`
	// Factor multiplies that quantile. In [1, 10] when Enabled; 1.5 to 3
	// leaves the deadline room to follow a rise (docs/latency.md).
	// Default 2.
	Factor float64 `json:"factor"`
	// Base is added to the adaptive timeout, such as the network round
	// trip the latencies do not show. Default 0.
	Base time.Duration `json:"base"`
	// Min is the least the adaptive timeout may be (2 × the network round
	// trip is a good floor). Default 0.
	Min time.Duration `json:"min"`
	// Max is the most the adaptive timeout may be, and its value until it
	// has adapted when Policy.CallTimeout is 0. Required, at least Min,
	// when Enabled. Default 0.
	Max time.Duration `json:"max"`
}

// Defaults and limits of [Throttle]; docs/policy.md gives the reasons.
const (
	defaultThrottleK           = 2.0
	defaultThrottleMinRequests = 20
	maxThrottleK               = 10
	maxThrottleMinRequests     = 1_000_000
)

// Throttle is client-side adaptive throttling (the "Handling Overload"
// chapter of Google's SRE book). While the breaker is closed, each call is
// refused with probability
//
//	max(0, (requests - K·accepts) / (requests + 1))
//
// over the window, where requests is the calls the client wanted to send
// (the counted calls and the calls the throttle refused) and accepts the
// counted calls that succeeded; nothing is refused while requests is
// below MinRequests. A refused call gets an *[OpenError] with State
// Closed and Reason [ReasonThrottled]. It is not an outcome of the
// downstream: it never enters the error ratio or Policy.MinRequests.
// While its refusals thin the window, the ratio rule trips only when the
// failure ratio is above ErrorRatio with confidence (docs/behaviour.md §4
// Throttling); the other rules are unchanged. With K 2 nothing is refused
// while at least half the calls succeed.
//
// Nothing is refused while the window holds fewer than 3·Policy.MinRequests
// counted calls, so the trip rules keep their sample. Unless ErrorRatio
// is 0 or above 1 - 1/K, the ratio rule trips the breaker before anything
// is throttled (docs/policy.md). A shadow breaker only counts what it
// would refuse; a breaker forced closed never throttles. The draw comes
// from [WithRand]. The fields apply only when Enabled; otherwise they
// need only be in range.
type Throttle struct {
	// Enabled turns throttling on. Default false.
	Enabled bool `json:"enabled"`
	// K is how many requests the client sends per success before it
	// refuses any. In [1, 10] when Enabled. Default 2.
	K float64 `json:"k"`
	// MinRequests is the protection floor: nothing is throttled while
	// the window holds fewer requests than this. In [1, 1000000] when
	// Enabled. Default 20.
	MinRequests int `json:"min_requests"`
}

// DefaultPolicy returns the policy with every field at its default.
func DefaultPolicy() Policy { return defaultPolicy }

// FieldError is one problem with one field of a policy document or value.
type FieldError struct {
	// Field is the JSON name of the field, prefixed by its path in the
	// document when the policy was nested (`overrides["orders.Create"].window`),
	// or "(document)" for a problem with the document as a whole. A name or
	// key that is not a plain word is quoted, and cut short if it is long.
	Field string `json:"field"`
	// Problem says what is wrong, in words.
	Problem string `json:"problem"`
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
	return policyError(v.List)
}

// validator gathers the problems of a policy value or document.
type validator = jsondoc.Problems

// policyError is the *PolicyError of problems, or nil if there are none.
func policyError(problems []jsondoc.Problem) error {
	if len(problems) == 0 {
		return nil
	}
	e := &PolicyError{Problems: make([]FieldError, len(problems))}
	for i, p := range problems {
		e.Problems[i] = FieldError(p)
	}
	return e
}

// check records a problem for each invalid field of p, its name prefixed
// with prefix.
func (p Policy) check(v *validator, prefix string) { p.checkSet(v, prefix, nil) }

// checkDocument is check for p decoded from data, a policy document that
// sets some of p's fields: a rule between two fields that the document
// breaks by setting one of them is reported at the one it set (see
// pairRule), so that the problem names the field the user edited.
func (p Policy) checkDocument(v *validator, prefix string, data []byte) {
	var set map[string]bool
	p.checkSet(v, prefix, func() map[string]bool {
		if set == nil { // read only for a broken pair rule
			set = documentFields(data)
		}
		return set
	})
}

// checkSet is check, where fields, if not nil, returns the names of the
// fields a document sets.
func (p Policy) checkSet(v *validator, prefix string, fields func() map[string]bool) {
	for _, f := range policyFields {
		if f.check == nil {
			continue
		}
		problem := f.check(&p)
		if problem == "" {
			continue
		}
		field := f.name
		if r := f.pair; r != nil && fields != nil && !fields()[f.name] && fields()[r.other] {
			if there := r.problem(&p); there != "" {
				field, problem = r.other, there
			} else if o, _ := policyFieldNamed(r.other); o.check != nil && o.check(&p) != "" {
				continue // the other field's own problem says it all
			}
		}
		v.List = append(v.List, jsondoc.Problem{Field: prefix + field, Problem: problem})
	}
}

// documentFields returns the names of the fields a policy document sets,
// a nested object's as its path ("throttle.k"), or an empty set if data
// is not a JSON object.
func documentFields(data []byte) map[string]bool {
	set := map[string]bool{}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return set
	}
	for name, raw := range top {
		set[name] = true
		var nested map[string]json.RawMessage
		if json.Unmarshal(raw, &nested) == nil {
			for sub := range nested {
				set[name+"."+sub] = true
			}
		}
	}
	return set
}
