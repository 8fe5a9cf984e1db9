package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/jsondoc"
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

	// Profile is the key's day, if its traffic is not steady: periods of
	// the day, each with its own rate and error ratio, the first from
	// midnight, each lasting until the next begins (the last until
	// midnight), at most MaxPeriods. With a profile, Rate and ErrorRatio
	// are the day's means, computed from it when the traffic is decoded
	// or checked. The checker judges each period and reports the worst.
	Profile []Period `json:"profile,omitempty"`
	// Bursts are error bursts on top of the error ratio; the zero value
	// is none.
	Bursts Bursts `json:"bursts"`
	// Batch is the mean number of calls that arrive together (a fan-out,
	// a batch job), at least 1; 0 means 1, calls arriving one by one.
	// Batch sizes are taken as geometric with this mean.
	Batch float64 `json:"batch"`
}

// Period is a stretch of a key's day with a rate and an error ratio of
// its own. As JSON: {"from": "06:00", "rate": 9.5, "error_ratio": 0.05}.
type Period struct {
	// From is when the period begins, as a time of day, in [0, 24h).
	From time.Duration `json:"from"`
	// Rate and ErrorRatio are as in Traffic, for this period.
	Rate       float64 `json:"rate"`
	ErrorRatio float64 `json:"error_ratio"`
}

// Bursts describes error bursts: PerDay times a day on average, at
// random, for Length each, the calls fail at ErrorRatio instead of the
// period's. As JSON: {"per_day": 6, "length": "5m", "error_ratio": 0.42}.
type Bursts struct {
	PerDay     float64       `json:"per_day"`
	Length     time.Duration `json:"length"`
	ErrorRatio float64       `json:"error_ratio"`
}

// MaxPeriods bounds a profile's periods: one a minute.
const MaxPeriods = 1440

// day is the length of a profile.
const day = 24 * time.Hour

// steady says that t has neither a profile, nor bursts, nor batches.
func (t Traffic) steady() bool {
	return len(t.Profile) == 0 && t.Bursts.PerDay == 0 && t.Batch <= 1
}

// periodSpan is a period of a day with where it ends, since the midnight
// the simulation began from; end is -1 for steady traffic.
type periodSpan struct {
	Period
	end time.Duration
}

// periodAt is the period at time at (since a midnight).
func (t Traffic) periodAt(at time.Duration) periodSpan {
	if len(t.Profile) == 0 {
		return periodSpan{Period{Rate: t.Rate, ErrorRatio: t.ErrorRatio}, -1}
	}
	midnight := at - at%day
	tod := at % day
	i := len(t.Profile) - 1
	for i > 0 && t.Profile[i].From > tod {
		i--
	}
	end := day
	if i+1 < len(t.Profile) {
		end = t.Profile[i+1].From
	}
	return periodSpan{t.Profile[i], midnight + end}
}

// periodLength is how long period i of t's profile lasts.
func (t Traffic) periodLength(i int) time.Duration {
	if i+1 < len(t.Profile) {
		return t.Profile[i+1].From - t.Profile[i].From
	}
	return day - t.Profile[i].From
}

// withMeans sets t's Rate and ErrorRatio to its profile's day means.
func (t Traffic) withMeans() Traffic {
	if len(t.Profile) == 0 {
		return t
	}
	var calls, fails float64
	for i, p := range t.Profile {
		n := p.Rate * t.periodLength(i).Seconds()
		calls += n
		fails += n * p.ErrorRatio
	}
	t.Rate = calls / day.Seconds()
	t.ErrorRatio = 0
	if calls > 0 {
		t.ErrorRatio = fails / calls
	}
	return t
}

// clock formats a time of day as 15:04 (or 15:04:05).
func clockOf(d time.Duration) string {
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

// parseClock reads a time of day, "06:00" or "06:30:15", in [0, 24h).
func parseClock(s string) (time.Duration, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	var v [3]int
	for i, p := range parts {
		if len(p) != 2 {
			return 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, false
		}
		v[i] = n
	}
	if v[0] > 23 || v[1] > 59 || v[2] > 59 {
		return 0, false
	}
	return time.Duration(v[0])*time.Hour + time.Duration(v[1])*time.Minute + time.Duration(v[2])*time.Second, true
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
	// MaxBurstsPerDay bounds Bursts.PerDay: one a second.
	MaxBurstsPerDay = 86_400
	// MaxBatch bounds Traffic.Batch.
	MaxBatch = 100_000
)

// TrafficError lists every problem of a traffic document or value, by path.
type TrafficError struct {
	Problems []string
}

func (e *TrafficError) Error() string {
	return jsondoc.Message("check: invalid traffic: ", e.Problems, func(p string) string { return p })
}

// trafficError is the error of the problems of one document or value,
// each as its path and its words, nil if there are none.
func trafficError(p *jsondoc.Problems) error {
	if len(p.List) == 0 {
		return nil
	}
	list := make([]string, len(p.List))
	for i, q := range p.List {
		list[i] = q.Field + ": " + q.Problem
	}
	return &TrafficError{Problems: list}
}

// Validate reports every out-of-range field of t, or nil.
func (t Traffic) Validate() error {
	var p jsondoc.Problems
	t.check(&p, "")
	return trafficError(&p)
}

func (t Traffic) check(p *jsondoc.Problems, prefix string) {
	if math.IsNaN(t.Rate) || t.Rate < 0 || t.Rate > MaxRate {
		p.Add(prefix+"rate", "must be in [0, %d] calls per second, got %v", MaxRate, t.Rate)
	}
	if math.IsNaN(t.ErrorRatio) || t.ErrorRatio < 0 || t.ErrorRatio >= 1 {
		p.Add(prefix+"error_ratio", "must be in [0, 1), got %v", t.ErrorRatio)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"p50", t.P50}, {"p99", t.P99}, {"deadline", t.Deadline}, {"rtt", t.RTT}} {
		if d.v < 0 || d.v > day {
			p.Add(prefix+d.name, "must be in [0, %v], got %v", day, d.v)
		}
	}
	if t.P50 > 0 && t.P99 > 0 && t.P99 < t.P50 {
		p.Add(prefix+"p99", "must be at least p50 (%v), got %v", t.P50, t.P99)
	}
	if (t.P50 > 0) != (t.P99 > 0) {
		p.Add(prefix+"p99", "p50 and p99 go together: give both or neither")
	}
	if t.Targets < 0 || t.Targets > MaxTargets {
		p.Add(prefix+"targets", "must be in [0, %d], got %d", MaxTargets, t.Targets)
	}
	if t.Instances < 0 || t.Instances > MaxInstances {
		p.Add(prefix+"instances", "must be in [0, %d], got %d", MaxInstances, t.Instances)
	}
	if t.Workers < 0 || t.Workers > MaxWorkers {
		p.Add(prefix+"workers", "must be in [0, %d], got %d", MaxWorkers, t.Workers)
	}
	if len(t.Profile) > MaxPeriods {
		p.Add(prefix+"profile", "at most %d periods, got %d", MaxPeriods, len(t.Profile))
	}
	for i, per := range t.Profile {
		if i == MaxPeriods {
			break
		}
		path := fmt.Sprintf("%sprofile[%d].", prefix, i)
		switch {
		case i == 0 && per.From != 0:
			p.Add(path+"from", "the first period must begin at 00:00, got %v", per.From)
		case per.From < 0 || per.From >= day:
			p.Add(path+"from", "must be a time of day in [00:00, 24:00), got %v", per.From)
		case i > 0 && per.From <= t.Profile[i-1].From:
			p.Add(path+"from", "must be after the period before (%s), got %s", clockOf(t.Profile[i-1].From), clockOf(per.From))
		}
		if math.IsNaN(per.Rate) || per.Rate < 0 || per.Rate > MaxRate {
			p.Add(path+"rate", "must be in [0, %d] calls per second, got %v", MaxRate, per.Rate)
		}
		if math.IsNaN(per.ErrorRatio) || per.ErrorRatio < 0 || per.ErrorRatio >= 1 {
			p.Add(path+"error_ratio", "must be in [0, 1), got %v", per.ErrorRatio)
		}
	}
	b := t.Bursts
	if math.IsNaN(b.PerDay) || b.PerDay < 0 || b.PerDay > MaxBurstsPerDay {
		p.Add(prefix+"bursts.per_day", "must be in [0, %d], got %v", MaxBurstsPerDay, b.PerDay)
	}
	if b.Length < 0 || b.Length > day {
		p.Add(prefix+"bursts.length", "must be in [0, 24h], got %v", b.Length)
	}
	if math.IsNaN(b.ErrorRatio) || b.ErrorRatio < 0 || b.ErrorRatio >= 1 {
		p.Add(prefix+"bursts.error_ratio", "must be in [0, 1), got %v", b.ErrorRatio)
	}
	if b.PerDay > 0 && (b.Length <= 0 || b.ErrorRatio <= 0) {
		p.Add(prefix+"bursts", "bursts per_day %v need a length and an error_ratio above 0", b.PerDay)
	}
	if b.PerDay > 0 && b.Length > 0 && b.PerDay*b.Length.Seconds() > day.Seconds() {
		p.Add(prefix+"bursts", "%v bursts of %v a day last longer than a day", b.PerDay, b.Length)
	}
	if math.IsNaN(t.Batch) || t.Batch < 0 || (t.Batch > 0 && t.Batch < 1) || t.Batch > MaxBatch {
		p.Add(prefix+"batch", "must be 0 (calls one by one) or in [1, %d] calls an arrival, got %v", MaxBatch, t.Batch)
	}
}

// Validate reports every problem of w by path, or nil.
func (w Workload) Validate() error {
	var p jsondoc.Problems
	w.Defaults.check(&p, "defaults.")
	if len(w.Keys) > MaxKeys {
		p.Add("keys", "at most %d keys, got %d", MaxKeys, len(w.Keys))
		return trafficError(&p)
	}
	for _, k := range slices.Sorted(maps.Keys(w.Keys)) {
		if k == "" {
			p.Add("keys", "empty key")
			continue
		}
		w.Keys[k].check(&p, keyPath(k))
	}
	return trafficError(&p)
}

// keyPath is the path of key k's members, its key quoted as the root's
// problems quote an override's.
func keyPath(k string) string { return "keys[" + jsondoc.QuoteKey(k) + "]." }

// ParseWorkload decodes and validates a traffic document (see
// [Workload]). The error, if any, is a *[TrafficError] naming every problem.
func ParseWorkload(data []byte) (Workload, error) {
	var p jsondoc.Problems
	top := members(&p, data, "(document)")
	var w Workload
	if top == nil {
		return Workload{}, trafficError(&p)
	}
	// null stands for a missing member, as a Workload without keys
	// encodes to.
	if raw, ok := top.get("defaults"); ok && !isNull(raw) {
		decodeTraffic(&p, &w.Defaults, raw, "defaults.")
		w.Defaults = w.Defaults.withMeans()
	}
	if raw, ok := top.get("keys"); ok && !isNull(raw) {
		var list []member
		if keys := members(&p, raw, "keys"); keys != nil {
			list = keys.list
		}
		for _, m := range list {
			if m.name == "" {
				p.Add("keys", "empty key")
				continue
			}
			t := w.Defaults
			decodeTraffic(&p, &t, m.raw, keyPath(m.name))
			t = t.withMeans()
			if w.Keys == nil {
				w.Keys = make(map[string]Traffic)
			}
			w.Keys[m.name] = t
		}
	}
	for _, m := range top.list {
		if m.name != "defaults" && m.name != "keys" {
			p.Add(jsondoc.QuoteKey(m.name), `unknown field; a traffic document has "defaults" and "keys"`)
		}
	}
	if err := trafficError(&p); err != nil {
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
func members(p *jsondoc.Problems, data []byte, path string) *object {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		p.Add(path, "must be a JSON object")
		return nil
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.Add(path, "bad JSON: %v", err)
			return nil
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			p.Add(path, "bad JSON: %v", err)
			return nil
		}
		if seen[name] {
			p.Add(path, "%q is given twice", name)
			continue
		}
		seen[name] = true
		o.list = append(o.list, member{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		p.Add(path, "bad JSON: %v", err)
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		p.Add(path, "unexpected data after the object")
		return nil
	}
	return o
}

// decodeProfile reads a profile: a list of periods.
func decodeProfile(p *jsondoc.Problems, t *Traffic, data []byte, path string) {
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		p.Add(path, "must be a list of periods such as [{\"from\": \"00:00\", \"rate\": 2}]")
		return
	}
	if len(list) > MaxPeriods {
		p.Add(path, "at most %d periods, got %d", MaxPeriods, len(list))
		return
	}
	if len(list) == 0 {
		p.Add(path, "a profile needs at least one period; leave it out for steady traffic")
		return
	}
	for i, raw := range list {
		ppath := fmt.Sprintf("%s[%d]", path, i)
		o := members(p, raw, ppath)
		if o == nil {
			continue
		}
		per := Period{}
		hasFrom, hasRate := false, false
		for _, m := range o.list {
			var err error
			switch m.name {
			case "from":
				hasFrom = true
				var str string
				if json.Unmarshal(m.raw, &str) != nil {
					p.Add(ppath+".from", `must be a time of day such as "06:00"`)
					continue
				}
				d, ok := parseClock(str)
				if !ok {
					if len(str) > 40 {
						str = str[:40] + "…"
					}
					p.Add(ppath+".from", `must be a time of day from "00:00" to "23:59:59", got %q`, str)
					continue
				}
				per.From = d
			case "rate":
				hasRate = true
				err = json.Unmarshal(m.raw, &per.Rate)
			case "error_ratio":
				err = json.Unmarshal(m.raw, &per.ErrorRatio)
			default:
				p.Add(ppath+"."+jsondoc.FieldName(m.name), `unknown field; a period has "from", "rate" and "error_ratio"`)
				continue
			}
			if err != nil {
				p.Add(ppath+"."+m.name, "%s", typeProblem(m.name, err))
			}
		}
		if !hasFrom {
			p.Add(ppath+".from", "missing: when the period begins")
		}
		if !hasRate {
			p.Add(ppath+".rate", "missing: the period's calls per second")
		}
		t.Profile = append(t.Profile, per)
	}
}

// decodeBursts reads error bursts.
func decodeBursts(p *jsondoc.Problems, b *Bursts, data []byte, path string) {
	o := members(p, data, path)
	if o == nil {
		return
	}
	for _, m := range o.list {
		var err error
		switch m.name {
		case "per_day":
			err = json.Unmarshal(m.raw, &b.PerDay)
		case "length":
			b.Length, err = duration(m.raw)
		case "error_ratio":
			err = json.Unmarshal(m.raw, &b.ErrorRatio)
		default:
			p.Add(path+"."+jsondoc.FieldName(m.name), `unknown field; bursts have "per_day", "length" and "error_ratio"`)
			continue
		}
		if err != nil {
			p.Add(path+"."+m.name, "%s", typeProblem(m.name, err))
		}
	}
}

// decodeTraffic lays the members of one traffic object onto t.
func decodeTraffic(p *jsondoc.Problems, t *Traffic, data []byte, prefix string) {
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
		case "profile":
			t.Profile = nil
			decodeProfile(p, t, m.raw, path)
			continue
		case "bursts":
			decodeBursts(p, &t.Bursts, m.raw, path)
			continue
		case "batch":
			err = json.Unmarshal(m.raw, &t.Batch)
		default:
			p.Add(prefix+jsondoc.FieldName(m.name), "unknown field")
			continue
		}
		if err != nil {
			p.Add(path, "%s", typeProblem(m.name, err))
		}
	}
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
	case "rate", "error_ratio", "batch", "per_day":
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

type period struct {
	From       string  `json:"from"`
	Rate       float64 `json:"rate"`
	ErrorRatio float64 `json:"error_ratio"`
}

type bursts struct {
	PerDay     float64 `json:"per_day"`
	Length     string  `json:"length"`
	ErrorRatio float64 `json:"error_ratio"`
}

// MarshalJSON writes t in the document's form, durations as strings.
func (t Traffic) MarshalJSON() ([]byte, error) {
	type plain struct {
		Rate       float64  `json:"rate"`
		P50        string   `json:"p50,omitempty"`
		P99        string   `json:"p99,omitempty"`
		ErrorRatio float64  `json:"error_ratio"`
		Deadline   string   `json:"deadline,omitempty"`
		RTT        string   `json:"rtt,omitempty"`
		Targets    int      `json:"targets,omitempty"`
		Instances  int      `json:"instances,omitempty"`
		Workers    int      `json:"workers,omitempty"`
		Fallback   bool     `json:"fallback,omitempty"`
		Profile    []period `json:"profile,omitempty"`
		Bursts     *bursts  `json:"bursts,omitempty"`
		Batch      float64  `json:"batch,omitempty"`
	}
	str := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	out := plain{t.Rate, str(t.P50), str(t.P99), t.ErrorRatio, str(t.Deadline), str(t.RTT), t.Targets, t.Instances, t.Workers, t.Fallback, nil, nil, t.Batch}
	for _, p := range t.Profile {
		out.Profile = append(out.Profile, period{clockOf(p.From), p.Rate, p.ErrorRatio})
	}
	if t.Bursts != (Bursts{}) {
		out.Bursts = &bursts{t.Bursts.PerDay, str(t.Bursts.Length), t.Bursts.ErrorRatio}
	}
	return json.Marshal(out)
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
		if st.State != breaker.Closed && st.Outage != nil {
			snap = st.Outage.Trip.Window
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

// UnmarshalJSON decodes one key's traffic strictly onto t and validates
// it; on error t is unchanged.
func (t *Traffic) UnmarshalJSON(data []byte) error {
	var p jsondoc.Problems
	u := *t
	decodeTraffic(&p, &u, data, "")
	if err := trafficError(&p); err != nil {
		return err
	}
	u = u.withMeans()
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
