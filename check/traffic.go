package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
)

// Traffic describes the calls one key of a group sees in normal
// operation. The zero value of a field means "not known": checks that
// need it are skipped, except Instances, where 0 is taken as "many".
//
// As JSON, durations are strings ("40ms") and the names are snake_case:
//
//	{"rate": 200, "p50": "8ms", "p99": "40ms", "error_ratio": 0.01,
//	 "deadline": "1s", "rtt": "2ms", "targets": 1, "instances": 12}
type Traffic struct {
	// Rate is the number of calls per second through the key's breaker
	// (for a method with Targets > 1, through all its targets together).
	Rate float64 `json:"rate"`
	// P50 and P99 are the median and the 99th percentile of the calls'
	// latency when the downstream is healthy.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// ErrorRatio is the share of calls that fail when the downstream is
	// healthy, timeouts apart (the checker adds the share of calls slower
	// than the timeout from the latency), in [0, 1).
	ErrorRatio float64 `json:"error_ratio"`
	// Deadline is the client's total deadline: how long the caller of
	// the service waits for its answer.
	Deadline time.Duration `json:"deadline"`
	// RTT is the network round trip to the downstream.
	RTT time.Duration `json:"rtt"`
	// Targets is the number of targets the key's calls spread over, each
	// with a breaker of its own ("method@10.0.0.7"), at most MaxTargets;
	// 0 or 1 means one breaker for the method.
	Targets int `json:"targets"`
	// Instances is the number of service instances that run the policy,
	// at most MaxInstances; 0 means not known, taken as many.
	Instances int `json:"instances"`
	// Workers is the caller's concurrency for these calls (its worker
	// pool), at most MaxWorkers, used by suggestions; 0 lets them size
	// it.
	Workers int `json:"workers"`
	// Fallback says the caller answers without this call when it fails
	// or is refused, used by suggestions.
	Fallback bool `json:"fallback"`
}

// Workload is the traffic of a group's keys: the traffic document the
// checker reads.
//
//	{
//	  "defaults": {"deadline": "1s", "rtt": "1ms", "instances": 12},
//	  "keys": {
//	    "inventory.GetStock": {"rate": 200, "p50": "8ms", "p99": "40ms", "error_ratio": 0.002},
//	    "pricing.GetPrice":   {"rate": 3, "p50": "20ms", "p99": "120ms"}
//	  }
//	}
//
// Each key's traffic is read onto Defaults, so a key names only what
// differs. Decoding is strict: an unknown field, a name given twice, a
// value of the wrong type or out of range is an error naming its path
// (keys["pricing.GetPrice"].p99).
type Workload struct {
	// Defaults is what a key's traffic starts from in a document, and the
	// traffic of the keys [FromSnapshot] measures before their rate and
	// error ratio are laid over it.
	Defaults Traffic `json:"defaults"`
	// Keys is the traffic of each key, Defaults already applied.
	Keys map[string]Traffic `json:"keys"`
}

// Limits of a traffic description; a value beyond them is refused.
const (
	MaxRate      = 10_000_000 // calls per second
	MaxTargets   = 100_000
	MaxInstances = 1_000_000
	MaxWorkers   = 100_000 // as many as a tier of a replay has
	// MaxKeys bounds the keys of a workload, which the checker judges
	// one by one.
	MaxKeys = 10_000
)

// TrafficError lists every problem of a traffic document or value, by path.
type TrafficError struct {
	Problems []string
}

func (e *TrafficError) Error() string {
	const listed = 20
	var sb strings.Builder
	sb.WriteString("check: invalid traffic: ")
	for i, p := range e.Problems {
		if i == listed {
			fmt.Fprintf(&sb, "; and %d more problems", len(e.Problems)-i)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p)
	}
	return sb.String()
}

type problems struct{ list []string }

func (p *problems) add(path, format string, args ...any) {
	p.list = append(p.list, path+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &TrafficError{Problems: p.list}
}

// Validate reports every out-of-range field of t, or nil.
func (t Traffic) Validate() error {
	var p problems
	t.check(&p, "")
	return p.err()
}

func (t Traffic) check(p *problems, prefix string) {
	if math.IsNaN(t.Rate) || t.Rate < 0 || t.Rate > MaxRate {
		p.add(prefix+"rate", "must be in [0, %d] calls per second, got %v", MaxRate, t.Rate)
	}
	if math.IsNaN(t.ErrorRatio) || t.ErrorRatio < 0 || t.ErrorRatio >= 1 {
		p.add(prefix+"error_ratio", "must be in [0, 1), got %v", t.ErrorRatio)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"p50", t.P50}, {"p99", t.P99}, {"deadline", t.Deadline}, {"rtt", t.RTT}} {
		if d.v < 0 || d.v > breaker.MaxDuration {
			p.add(prefix+d.name, "must be in [0, %v], got %v", breaker.MaxDuration, d.v)
		}
	}
	if t.P50 > 0 && t.P99 > 0 && t.P99 < t.P50 {
		p.add(prefix+"p99", "must be at least p50 (%v), got %v", t.P50, t.P99)
	}
	if (t.P50 > 0) != (t.P99 > 0) {
		p.add(prefix+"p99", "p50 and p99 go together: give both or neither")
	}
	if t.Targets < 0 || t.Targets > MaxTargets {
		p.add(prefix+"targets", "must be in [0, %d], got %d", MaxTargets, t.Targets)
	}
	if t.Instances < 0 || t.Instances > MaxInstances {
		p.add(prefix+"instances", "must be in [0, %d], got %d", MaxInstances, t.Instances)
	}
	if t.Workers < 0 || t.Workers > MaxWorkers {
		p.add(prefix+"workers", "must be in [0, %d], got %d", MaxWorkers, t.Workers)
	}
}

// Validate reports every problem of w by path, or nil.
func (w Workload) Validate() error {
	var p problems
	w.Defaults.check(&p, "defaults.")
	if len(w.Keys) > MaxKeys {
		p.add("keys", "at most %d keys, got %d", MaxKeys, len(w.Keys))
		return p.err()
	}
	for _, k := range sortedKeys(w.Keys) {
		if k == "" {
			p.add("keys", "empty key")
			continue
		}
		w.Keys[k].check(&p, keyPath(k))
	}
	return p.err()
}

func keyPath(k string) string {
	if len(k) > 80 {
		k = k[:80] + "…"
	}
	return "keys[" + strconv.Quote(k) + "]."
}

// ParseWorkload decodes and validates a traffic document (see
// [Workload]). The error, if any, is a *[TrafficError] naming every problem.
func ParseWorkload(data []byte) (Workload, error) {
	var p problems
	top := members(&p, data, "(document)")
	var w Workload
	if top == nil {
		return Workload{}, p.err()
	}
	// null stands for a missing member, as a Workload without keys
	// encodes to.
	if raw, ok := top.get("defaults"); ok && !isNull(raw) {
		decodeTraffic(&p, &w.Defaults, raw, "defaults.")
	}
	if raw, ok := top.get("keys"); ok && !isNull(raw) {
		var list []member
		if keys := members(&p, raw, "keys"); keys != nil {
			list = keys.list
		}
		for _, m := range list {
			if m.name == "" {
				p.add("keys", "empty key")
				continue
			}
			t := w.Defaults
			decodeTraffic(&p, &t, m.raw, keyPath(m.name))
			if w.Keys == nil {
				w.Keys = make(map[string]Traffic)
			}
			w.Keys[m.name] = t
		}
	}
	for _, m := range top.list {
		if m.name != "defaults" && m.name != "keys" {
			p.add(strconv.Quote(m.name), `unknown field; a traffic document has "defaults" and "keys"`)
		}
	}
	if err := p.err(); err != nil {
		return Workload{}, err
	}
	if err := w.Validate(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

type member struct {
	name string
	raw  json.RawMessage
}

type object struct{ list []member }

func (o *object) get(name string) (json.RawMessage, bool) {
	for _, m := range o.list {
		if m.name == name {
			return m.raw, true
		}
	}
	return nil, false
}

// members reads a JSON object's members in order, reporting a name given
// twice. It returns nil if data is not one object.
func members(p *problems, data []byte, path string) *object {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		p.add(path, "must be a JSON object")
		return nil
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.add(path, "bad JSON: %v", err)
			return nil
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			p.add(path, "bad JSON: %v", err)
			return nil
		}
		if seen[name] {
			p.add(path, "%q is given twice", name)
			continue
		}
		seen[name] = true
		o.list = append(o.list, member{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		p.add(path, "bad JSON: %v", err)
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		p.add(path, "unexpected data after the object")
		return nil
	}
	return o
}

// decodeTraffic lays the members of one traffic object onto t.
func decodeTraffic(p *problems, t *Traffic, data []byte, prefix string) {
	o := members(p, data, strings.TrimSuffix(prefix, "."))
	if o == nil {
		return
	}
	for _, m := range o.list {
		path := prefix + m.name
		var err error
		switch m.name {
		case "rate":
			err = json.Unmarshal(m.raw, &t.Rate)
		case "error_ratio":
			err = json.Unmarshal(m.raw, &t.ErrorRatio)
		case "p50":
			t.P50, err = duration(m.raw)
		case "p99":
			t.P99, err = duration(m.raw)
		case "deadline":
			t.Deadline, err = duration(m.raw)
		case "rtt":
			t.RTT, err = duration(m.raw)
		case "targets":
			err = json.Unmarshal(m.raw, &t.Targets)
		case "instances":
			err = json.Unmarshal(m.raw, &t.Instances)
		case "workers":
			err = json.Unmarshal(m.raw, &t.Workers)
		case "fallback":
			err = json.Unmarshal(m.raw, &t.Fallback)
		default:
			p.add(prefix+quoteName(m.name), "unknown field")
			continue
		}
		if err != nil {
			p.add(path, "%s", typeProblem(m.name, err))
		}
	}
}

func quoteName(s string) string {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			if len(s) > 40 {
				s = s[:40] + "…"
			}
			return strconv.Quote(s)
		}
	}
	return s
}

func typeProblem(name string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("must be %s, got a JSON %s", want(name), te.Value)
	}
	return err.Error()
}

func want(name string) string {
	switch name {
	case "rate", "error_ratio":
		return "a number"
	case "targets", "instances", "workers":
		return "a whole number"
	case "fallback":
		return "true or false"
	}
	return `a duration string such as "40ms"`
}

var errDuration = errors.New(`must be a duration string such as "40ms"`)

func duration(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, errDuration
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return 0, fmt.Errorf(`must be a duration string such as "40ms", got %q`, s)
	}
	return d, nil
}

// MarshalJSON writes t in the document's form, durations as strings.
func (t Traffic) MarshalJSON() ([]byte, error) {
	type plain struct {
		Rate       float64 `json:"rate"`
		P50        string  `json:"p50,omitempty"`
		P99        string  `json:"p99,omitempty"`
		ErrorRatio float64 `json:"error_ratio"`
		Deadline   string  `json:"deadline,omitempty"`
		RTT        string  `json:"rtt,omitempty"`
		Targets    int     `json:"targets,omitempty"`
		Instances  int     `json:"instances,omitempty"`
		Workers    int     `json:"workers,omitempty"`
		Fallback   bool    `json:"fallback,omitempty"`
	}
	str := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	return json.Marshal(plain{t.Rate, str(t.P50), str(t.P99), t.ErrorRatio, str(t.Deadline), str(t.RTT), t.Targets, t.Instances, t.Workers, t.Fallback})
}

// FromSnapshot measures a workload from a running group's snapshot (the
// JSON a service serves from ops.Snapshot, such as examples/service's
// /breakers). For each closed breaker, the rate is the calls its window
// holds divided by the window's mean length (Window minus half a bucket)
// and the error ratio is the window's failures over its calls; a breaker
// that is open or half-open has only its rate measured, from the window
// that tripped it. A snapshot has no latency, deadline or round trip: they
// come from base, from its key if it has one and from its Defaults if not,
// and so does every key base describes that the snapshot lacks. One
// window is a short sample: take the snapshot at a busy hour, or several
// and keep the highest rates.
func FromSnapshot(s ops.GroupSnapshot, base Workload) Workload {
	w := Workload{Defaults: base.Defaults, Keys: make(map[string]Traffic, len(s.Breakers)+len(base.Keys))}
	for k, t := range base.Keys {
		w.Keys[k] = t
	}
	for _, st := range s.Breakers {
		t, ok := base.Keys[st.Name]
		if !ok {
			t = base.Defaults
		}
		p := st.Policy
		span := (p.Window - bucketWidth(p)/2).Seconds()
		snap := st.Window
		if st.State != breaker.Closed {
			snap = st.Trip
		}
		if span > 0 {
			t.Rate = float64(snap.Counted) / span
		}
		if st.State == breaker.Closed {
			t.ErrorRatio = 0
			if snap.Counted > 0 {
				t.ErrorRatio = min(float64(snap.Failures)/float64(snap.Counted), 0.999)
			}
		}
		w.Keys[st.Name] = t
	}
	return w
}

// PoliciesFromSnapshot returns the policies a snapshot's breakers run as
// a group policy document: the default policy, and an override for every
// breaker whose policy differs from it.
func PoliciesFromSnapshot(s ops.GroupSnapshot) breaker.GroupPolicy {
	gp := breaker.GroupPolicy{Default: breaker.DefaultPolicy()}
	for _, st := range s.Breakers {
		if st.Policy == gp.Default || st.Policy == (breaker.Policy{}) {
			continue
		}
		if gp.Overrides == nil {
			gp.Overrides = make(map[string]breaker.Policy)
		}
		gp.Overrides[st.Name] = st.Policy
	}
	return gp
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// UnmarshalJSON decodes one key's traffic strictly onto t and validates
// it; on error t is unchanged.
func (t *Traffic) UnmarshalJSON(data []byte) error {
	var p problems
	u := *t
	decodeTraffic(&p, &u, data, "")
	if err := p.err(); err != nil {
		return err
	}
	if err := u.Validate(); err != nil {
		return err
	}
	*t = u
	return nil
}

// UnmarshalJSON is [ParseWorkload]; on error w is unchanged.
func (w *Workload) UnmarshalJSON(data []byte) error {
	u, err := ParseWorkload(data)
	if err != nil {
		return err
	}
	*w = u
	return nil
}
