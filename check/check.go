package check

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// Severity is how much a finding matters. A policy with an Error finding
// should not ship: the command exits non-zero on one.
type Severity int

const (
	// Info is a number worth knowing: how fast the breaker opens, how
	// likely its probes are to pass.
	Info Severity = iota
	// Warning is a choice that is likely to hurt: false trips, a timeout
	// close to the latency.
	Warning
	// Error is a policy that cannot do its job for this traffic: a
	// breaker that can never open, a timeout the client never waits for.
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	for c := Info; c <= Error; c++ {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("check: unknown severity %q", b)
}

// The checks, by the name a Finding carries. docs/checking-policies.md
// gives the rule and the numbers of each.
const (
	CheckNeverTrips          = "never_trips"
	CheckPerTargetNeverTrips = "per_target_never_trips"
	CheckFalseTrips          = "false_trips"
	CheckTimeToTrip          = "time_to_trip"
	CheckFaultTimeToTrip     = "fault_time_to_trip"
	CheckTimeoutBelowP99     = "timeout_below_p99"
	CheckTimeoutDeadline     = "timeout_above_deadline"
	CheckTimeoutBelowRTT     = "timeout_below_rtt"
	CheckNoTimeout           = "no_timeout"
	CheckProbeShare          = "probe_share"
	CheckProbePass           = "probe_pass"
	CheckNoBackoff           = "no_backoff"
	CheckBackoffCap          = "backoff_cap"
	CheckNoJitter            = "no_jitter"
	CheckUnchecked           = "unchecked_override"
)

// Finding is one result of the checker about one key.
type Finding struct {
	Severity Severity `json:"severity"`
	// Key is the breaker key ("inventory.GetStock"), "method@*" for the
	// per-target breakers of a method whose traffic has Targets > 1.
	Key string `json:"key"`
	// Check names the check (CheckNeverTrips, ...).
	Check string `json:"check"`
	// Message says what was found, with the numbers, in words.
	Message string `json:"message"`
	// Numbers are the figures behind the message, by name, to six
	// significant digits; durations are in seconds (names ending in _s).
	// Every value is finite.
	Numbers map[string]float64 `json:"numbers,omitempty"`
}

// Options tune the checks. The zero value is the defaults.
type Options struct {
	// Fault is the fault whose time to trip is reported; the zero value
	// is DefaultFault.
	Fault Fault
	// MaxFalseTripsPerDay is the expected number of false trips a day
	// above which a key gets a warning: a positive finite number, or 0
	// for DefaultMaxFalseTripsPerDay.
	MaxFalseTripsPerDay float64
}

// DefaultMaxFalseTripsPerDay is one false trip every ten days per
// instance: a fleet of twenty instances then sees one every twelve hours.
const DefaultMaxFalseTripsPerDay = 0.1

func (o Options) orDefault() Options {
	if o.Fault == (Fault{}) {
		o.Fault = DefaultFault
	}
	if o.MaxFalseTripsPerDay == 0 {
		o.MaxFalseTripsPerDay = DefaultMaxFalseTripsPerDay
	}
	return o
}

func (o Options) validate() error {
	if v := o.MaxFalseTripsPerDay; !(v > 0) || math.IsInf(v, 1) {
		return fmt.Errorf("check: Options.MaxFalseTripsPerDay must be a positive number (0 for the default), got %v", v)
	}
	return o.Fault.validate()
}

// Report is the result of [Group].
type Report struct {
	// Keys are the keys checked, sorted, with the policy each runs.
	Keys []KeyReport `json:"keys"`
	// Findings are sorted by key; a key's findings are in the order of
	// the checks.
	Findings []Finding `json:"findings"`
	// Fault and MaxFalseTripsPerDay are the options the checks used.
	Fault               Fault   `json:"fault"`
	MaxFalseTripsPerDay float64 `json:"max_false_trips_per_day"`
}

// KeyReport is one key checked: its traffic (per target, for a method with
// Targets > 1) and the policy it runs.
type KeyReport struct {
	Key     string         `json:"key"`
	Traffic Traffic        `json:"traffic"`
	Policy  breaker.Policy `json:"policy"`
	// Source says where the policy comes from: "default", or the
	// override's key.
	Source string `json:"source"`
}

// Count returns the number of findings of severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Group checks the policies of gp against the traffic of w, key by key,
// and reports what it finds. Every key of w is checked under the policy a
// group with gp would give it (its override, its method's, or the
// default; a zero Default is DefaultPolicy()); an override whose key has
// no traffic in w is reported as unchecked. An invalid gp or w is an
// error, and nothing is checked.
func Group(gp breaker.GroupPolicy, w Workload, o Options) (*Report, error) {
	if err := gp.Validate(); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if gp.Default == (breaker.Policy{}) {
		gp.Default = breaker.DefaultPolicy()
	}
	o = o.orDefault()
	if err := o.validate(); err != nil {
		return nil, err
	}
	r := &Report{Fault: o.Fault, MaxFalseTripsPerDay: o.MaxFalseTripsPerDay}
	covered := map[string]bool{}
	for _, k := range sortedKeys(w.Keys) {
		t := w.Keys[k]
		key, lookupKey := k, k
		method, _ := breaker.SplitKey(k)
		perTarget := method != k
		if t.Targets > 1 {
			key, lookupKey = breaker.TargetKey(k, "*"), breaker.TargetKey(k, "")
			t.Rate /= float64(t.Targets)
			perTarget = true
		}
		p, src := policyFor(gp, lookupKey)
		covered[src] = true
		r.Keys = append(r.Keys, KeyReport{Key: key, Traffic: t, Policy: p, Source: src})
		c := checker{key: key, p: p, t: t, o: o, perTarget: perTarget}
		c.run()
		r.Findings = append(r.Findings, c.out...)
	}
	for _, k := range sortedKeys(gp.Overrides) {
		if !covered[k] {
			r.Findings = append(r.Findings, Finding{
				Severity: Info, Key: k, Check: CheckUnchecked,
				Message: "the override has no traffic in the traffic description, so it was not checked",
			})
		}
	}
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Key < r.Findings[j].Key })
	return r, nil
}

func (f Fault) validate() error {
	bad := func(x float64) bool { return math.IsNaN(x) || x < 0 || x > 1 }
	if bad(f.Errors) || bad(f.Timeouts) || f.Errors+f.Timeouts > 1 {
		return fmt.Errorf("check: a fault's errors and timeouts must be shares in [0, 1] that add up to at most 1, got %v and %v", f.Errors, f.Timeouts)
	}
	return nil
}

// String describes the fault in words: "40% errors + 20% timeouts".
func (f Fault) String() string {
	var parts []string
	if f.Errors > 0 {
		parts = append(parts, pct(f.Errors)+" errors")
	}
	if f.Timeouts > 0 {
		parts = append(parts, pct(f.Timeouts)+" timeouts")
	}
	if len(parts) == 0 {
		return "no fault"
	}
	return strings.Join(parts, " + ")
}

// policyFor is the policy a group with gp gives key, and where it comes
// from: the key's override, its method's ("payment.Charge" for
// "payment.Charge@10.0.0.7"), or the default, as breaker.GroupPolicy
// documents.
func policyFor(gp breaker.GroupPolicy, key string) (breaker.Policy, string) {
	if p, ok := gp.Overrides[key]; ok {
		return p, key
	}
	if m, _ := breaker.SplitKey(key); m != key {
		if p, ok := gp.Overrides[m]; ok {
			return p, m
		}
	}
	return gp.Default, "default"
}

type checker struct {
	key       string
	p         breaker.Policy
	t         Traffic
	o         Options
	perTarget bool
	out       []Finding
}

func (c *checker) add(s Severity, check string, nums map[string]float64, format string, args ...any) {
	for k, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(nums, k)
			continue
		}
		// Six significant digits are more than any model here is worth,
		// and keep reports the same on machines whose floating point
		// differs in the last bits (a fused multiply-add).
		nums[k], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	}
	c.out = append(c.out, Finding{Severity: s, Key: c.key, Check: check, Message: fmt.Sprintf(format, args...), Numbers: nums})
}

func (c *checker) run() {
	never := c.neverTrips()
	if c.t.Rate > 0 && !never {
		c.falseTrips()
	}
	c.timeToTrip(never)
	c.timeout()
	c.probes()
	c.backoff()
}

// windowRules says whether any of the window's rules is on.
func (c *checker) windowRules() bool {
	return c.p.ErrorRatio > 0 || c.p.ErrorCount > 0 || c.p.SlowCall > 0
}

// neverTrips reports a window that cannot hold MinRequests calls at the
// key's rate. It returns true when nothing can open the breaker.
func (c *checker) neverTrips() bool {
	p, t := c.p, c.t
	if !c.windowRules() {
		return false
	}
	if t.Rate <= 0 {
		// An idle key (a breaker a snapshot caught with an empty window)
		// says nothing about whether its traffic, when it comes, can
		// fill the window: not an error to fail a build on.
		c.add(Info, CheckNeverTrips, map[string]float64{"rate": 0, "min_requests": float64(p.MinRequests)},
			"no calls described (rate 0): the checks that need traffic are skipped")
		return true
	}
	full := t.Rate * p.Window.Seconds()
	minReq := max(p.MinRequests, 1)
	if float64(minReq) <= full {
		return false
	}
	check := CheckNeverTrips
	if c.perTarget {
		check = CheckPerTargetNeverTrips
	}
	nums := map[string]float64{
		"min_requests":  float64(p.MinRequests),
		"rate":          t.Rate,
		"window_s":      p.Window.Seconds(),
		"window_calls":  full,
		"burst_chance":  atLeastChance(full, minReq),
		"consecutive":   float64(p.ConsecutiveFailures),
		"targets":       float64(max(t.Targets, 1)),
		"needed_rate":   float64(minReq) / p.Window.Seconds(),
		"suggested_min": math.Floor(full / 2),
	}
	what := "min_requests"
	if c.perTarget {
		what = "per-target traffic cannot reach min_requests:"
	}
	msg := fmt.Sprintf("%s %d > %s calls/s × %v window = %s calls: the window's rules can never trip (a Poisson burst fills the window in %s of windows)",
		what, p.MinRequests, num(t.Rate), p.Window, num(full), pct(nums["burst_chance"]))
	if p.ConsecutiveFailures > 0 {
		c.add(Info, check, nums, "%s; only consecutive_failures (%d) can open it", msg, p.ConsecutiveFailures)
		return false
	}
	c.add(Error, check, nums, "%s; set min_requests to at most %s, or consecutive_failures for a key this quiet", msg, num(math.Max(1, nums["suggested_min"])))
	return true
}

func (c *checker) falseTrips() {
	p, t := c.p, c.t
	v := FalseTripsPerDay(p, t)
	b := baselineOf(p, t)
	nums := map[string]float64{
		"false_trips_per_day":     v,
		"baseline_failure_ratio":  b.fail,
		"baseline_timeout_ratio":  b.timeouts,
		"window_calls":            t.Rate * p.Window.Seconds(),
		"max_false_trips_per_day": c.o.MaxFalseTripsPerDay,
	}
	sev := Info
	if v > c.o.MaxFalseTripsPerDay {
		sev = Warning
	}
	detail := ""
	if b.timeouts >= 1e-4 {
		detail = fmt.Sprintf(" (%s errors + %s slower than the timeout)", pct(t.ErrorRatio), pct(b.timeouts))
	}
	count := num(v)
	if v < 1e-6 {
		count = "fewer than 1e-6"
	}
	c.add(sev, CheckFalseTrips, nums, "%s false trips a day expected at a %s baseline failure ratio%s, threshold %s",
		count, pct(b.fail), detail, num(c.o.MaxFalseTripsPerDay))
}

func (c *checker) timeToTrip(never bool) {
	p, t := c.p, c.t
	if t.Rate <= 0 {
		return
	}
	all, ok := TimeToTrip(p, t, Fault{Errors: 1})
	if !ok {
		if !never {
			full := t.Rate * p.Window.Seconds()
			why := ""
			if p.ErrorCount > 0 && float64(p.ErrorCount) > full {
				why = fmt.Sprintf(": error_count %d is more than the %s calls a full window holds", p.ErrorCount, num(full))
			}
			c.add(Error, CheckTimeToTrip, map[string]float64{"rate": t.Rate, "window_calls": full},
				"never opens, even when every call fails, at %s calls/s%s", num(t.Rate), why)
		}
		return
	}
	c.add(Info, CheckTimeToTrip, map[string]float64{"time_to_trip_s": all.Seconds(), "rate": t.Rate},
		"opens %s after every call starts failing, at %s calls/s", dur(all), num(t.Rate))

	f := c.o.Fault
	d, ok := TimeToTrip(p, t, f)
	te := effectiveTimeout(p, t)
	ft := f.Timeouts
	if te <= 0 {
		ft = 0
	}
	b := baselineOf(p, t)
	seen := f.Errors + ft + max(0, 1-f.Errors-f.Timeouts)*b.fail
	nums := map[string]float64{
		"fault_errors":          f.Errors,
		"fault_timeouts":        f.Timeouts,
		"fault_failure_ratio":   seen,
		"effective_timeout_s":   te.Seconds(),
		"error_ratio_to_trip":   p.ErrorRatio,
		"time_to_trip_s":        d.Seconds(),
		"rate":                  t.Rate,
		"timeouts_counted_at_s": te.Seconds(),
	}
	if !ok {
		delete(nums, "time_to_trip_s")
		why := ""
		if p.ErrorRatio > 0 && seen < p.ErrorRatio {
			why = fmt.Sprintf(": its calls fail at %s, below error_ratio %s", pct(seen), pct(p.ErrorRatio))
		}
		if f.Timeouts > 0 && te <= 0 {
			why += "; with no timeout and no client deadline its hanging calls are never counted"
		}
		c.add(Warning, CheckFaultTimeToTrip, nums, "never opens during a fault of %s%s", f, why)
		return
	}
	when := fmt.Sprintf("its timeouts counted %s after they start", dur(te))
	if f.Timeouts > 0 && te <= 0 {
		when = "its hanging calls never counted: no timeout and no client deadline"
	} else if f.Timeouts == 0 {
		when = "errors counted as they happen"
	}
	c.add(Info, CheckFaultTimeToTrip, nums, "opens %s into a fault of %s (%s)", dur(d), f, when)
}

func (c *checker) timeout() {
	p, t := c.p, c.t
	lat := fitLatency(t)
	lo := time.Duration(1.5*float64(t.P99)) + t.RTT
	hi := time.Duration(3*float64(t.P99)) + t.RTT
	if t.Deadline > 0 {
		hi = min(hi, t.Deadline-t.Deadline/10)
	}
	advice := ""
	if t.P99 > 0 && lo <= hi {
		advice = fmt.Sprintf("; p99 × 1.5–3 + RTT gives %v–%v", lo, hi)
	}
	if p.AdaptiveTimeout.Enabled {
		c.adaptiveTimeout(lat, advice)
		return
	}
	if p.CallTimeout <= 0 {
		nums := map[string]float64{"deadline_s": t.Deadline.Seconds()}
		if t.Deadline > 0 {
			c.add(Info, CheckNoTimeout, nums, "no timeout: a call that hangs counts only when the client's deadline (%v) cuts it%s", t.Deadline, advice)
		} else if p.SlowCall <= 0 {
			c.add(Warning, CheckNoTimeout, nums, "no timeout and no client deadline given: a call that hangs is never counted, so a hanging downstream never opens the breaker%s", advice)
		}
		return
	}
	nums := func() map[string]float64 {
		return map[string]float64{
			"timeout_s":  p.CallTimeout.Seconds(),
			"p99_s":      t.P99.Seconds(),
			"deadline_s": t.Deadline.Seconds(),
			"rtt_s":      t.RTT.Seconds(),
		}
	}
	if t.P99 > 0 && float64(p.CallTimeout) < 1.5*float64(t.P99) {
		n := nums()
		share := lat.over(p.CallTimeout) * (1 - t.ErrorRatio)
		n["healthy_timeout_ratio"] = share
		c.add(Warning, CheckTimeoutBelowP99, n, "timeout %v is below 1.5 × p99 (%v): %s of healthy calls time out%s",
			p.CallTimeout, time.Duration(1.5*float64(t.P99)), pct(share), advice)
	}
	if t.Deadline > 0 && p.CallTimeout >= t.Deadline {
		c.add(Error, CheckTimeoutDeadline, nums(), "timeout %v is not below the client's deadline %v: the client gives up first, and no time is left for a fallback%s",
			p.CallTimeout, t.Deadline, advice)
	}
	if t.RTT > 0 && p.CallTimeout < 2*t.RTT {
		c.add(Error, CheckTimeoutBelowRTT, nums(), "timeout %v is below 2 × RTT (%v): calls time out on the network alone",
			p.CallTimeout, 2*t.RTT)
	}
}

// adaptiveTimeout checks an adaptive timeout: the value it settles at
// against the key's p99, its max against the client's deadline (it can
// climb that far), and its min against the round trip (it can fall that
// low).
func (c *checker) adaptiveTimeout(lat latency, advice string) {
	p, t := c.p, c.t
	settled := policyTimeout(p, t)
	nums := func() map[string]float64 {
		return map[string]float64{
			"timeout_s":              settled.Seconds(),
			"adaptive_timeout_min_s": p.AdaptiveTimeout.Min.Seconds(),
			"adaptive_timeout_max_s": p.AdaptiveTimeout.Max.Seconds(),
			"p99_s":                  t.P99.Seconds(),
			"deadline_s":             t.Deadline.Seconds(),
			"rtt_s":                  t.RTT.Seconds(),
		}
	}
	if t.P99 > 0 && float64(settled) < 1.5*float64(t.P99) {
		n := nums()
		share := lat.over(settled) * (1 - t.ErrorRatio)
		n["healthy_timeout_ratio"] = share
		c.add(Warning, CheckTimeoutBelowP99, n, "adaptive timeout settles at %v (p%v × %v + %v, within [%v, %v]), below 1.5 × p99 (%v): %s of healthy calls time out%s",
			settled, p.AdaptiveTimeout.Quantile*100, p.AdaptiveTimeout.Factor, p.AdaptiveTimeout.Base, p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max,
			time.Duration(1.5*float64(t.P99)), pct(share), advice)
	}
	if t.Deadline > 0 && p.AdaptiveTimeout.Max >= t.Deadline {
		c.add(Error, CheckTimeoutDeadline, nums(), "adaptive timeout may climb to its max %v, not below the client's deadline %v: the client would give up first, and no time is left for a fallback%s",
			p.AdaptiveTimeout.Max, t.Deadline, advice)
	}
	if t.RTT > 0 && max(p.AdaptiveTimeout.Min, settled) < 2*t.RTT {
		c.add(Error, CheckTimeoutBelowRTT, nums(), "adaptive timeout settles at %v (min %v), below 2 × RTT (%v): calls time out on the network alone",
			settled, p.AdaptiveTimeout.Min, 2*t.RTT)
	}
}

func (c *checker) probes() {
	p, t := c.p, c.t
	if t.Rate > 0 {
		perCooldown := t.Rate * p.OpenFor.Seconds()
		share := float64(p.Probes) / perCooldown
		if share > 0.1 {
			c.add(Warning, CheckProbeShare, map[string]float64{
				"probes": float64(p.Probes), "calls_per_cooldown": perCooldown, "probe_share": share,
				"probe_wait_s": float64(p.Probes) / t.Rate,
			}, "%d probes per half-open episode are %s of the %s calls of a cooldown (%v), above 10%%; the probes take %s to arrive",
				p.Probes, pct(share), num(perCooldown), p.OpenFor, dur(seconds(float64(p.Probes)/t.Rate)))
		}
	}
	// A probe fails on a timeout, or with StrictProbes on any failure.
	b := baselineOf(p, t)
	healthyFail := b.timeouts
	rule := "a probe fails only on a timeout"
	if p.StrictProbes {
		healthyFail = b.fail
		rule = "strict_probes: a probe fails on any failure"
	}
	n := float64(p.Probes)
	half := math.Pow(0.5, n)
	healthy := math.Pow(1-healthyFail, n)
	sev := Info
	var worry []string
	if half > 0.25 {
		sev = Warning
		worry = append(worry, "a half-recovered downstream often closes the breaker")
	}
	if healthy < 0.9 {
		sev = Warning
		worry = append(worry, "a recovered downstream often fails its probes and stays cut off")
	}
	tail := ""
	if len(worry) > 0 {
		tail = ": " + strings.Join(worry, "; ")
	}
	which := fmt.Sprintf("all %d probes must pass: a half-recovered downstream (half its probes fail) passes all of them", p.Probes)
	if p.Probes == 1 {
		which = "one probe decides: a half-recovered downstream (half its probes fail) passes it"
	}
	c.add(sev, CheckProbePass, map[string]float64{
		"probes": n, "pass_half_recovered": half, "pass_healthy": healthy, "probe_failure_healthy": healthyFail,
	}, "%s %s of the time, a healthy one %s (%s)%s", which, pct(half), pct(healthy), rule, tail)
}

// maxCap is the cooldown beyond which a breaker is effectively without a
// cap: after a few failed probes it stays open for longer than anyone
// waits before doing something by hand.
const maxCap = 30 * time.Minute

func (c *checker) backoff() {
	p, t := c.p, c.t
	nums := map[string]float64{"open_for_s": p.OpenFor.Seconds(), "max_open_for_s": p.MaxOpenFor.Seconds()}
	switch {
	case p.MaxOpenFor == p.OpenFor:
		c.add(Warning, CheckNoBackoff, nums, "max_open_for equals open_for (%v): the cooldown never grows, so a downstream that keeps failing its probes is probed every %v", p.OpenFor, p.OpenFor)
	case p.MaxOpenFor > maxCap:
		k := math.Ceil(math.Log2(float64(p.MaxOpenFor) / float64(p.OpenFor)))
		nums["failed_probes_to_cap"] = k
		c.add(Warning, CheckBackoffCap, nums, "max_open_for %v is no practical cap: after %s failed probe episodes the breaker stays open %v before it probes again", p.MaxOpenFor, num(k), p.MaxOpenFor)
	}
	if p.Jitter == 0 && t.Instances != 1 {
		inst := "instances not given, a policy document is usually shared by every instance"
		if t.Instances > 1 {
			inst = fmt.Sprintf("%d instances share the policy", t.Instances)
		}
		c.add(Warning, CheckNoJitter, map[string]float64{"instances": float64(t.Instances)},
			"jitter is 0 (%s): instances tripped by the same fault probe the downstream in the same instant", inst)
	}
}

// num formats a number for a message: three significant digits, no
// exponent for everyday sizes.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6 || math.Abs(v) < 1e-3:
		return fmt.Sprintf("%.2g", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	s := fmt.Sprintf("%.3g", v)
	return s
}

// pct formats a share as a percentage.
func pct(v float64) string {
	switch {
	case v == 0:
		return "0%"
	case v >= 0.9995 && v < 1:
		return ">99.9%"
	case v < 0.0001:
		return fmt.Sprintf("%.1g%%", v*100)
	case v < 0.01:
		return fmt.Sprintf("%.2g%%", v*100)
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v*100), "0"), ".") + "%"
}

// dur formats a model's time: to the millisecond below 10 s.
func dur(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
