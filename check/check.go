package check

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/enumtext"
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
	return enumtext.Unmarshal(s, b, Info, Error, "check", "severity")
}

// The checks, by the name a Finding carries. docs/checking-policies.md
// gives the rule and the numbers of each.
const (
	CheckNeverTrips          = "never_trips"
	CheckTripsOnBursts       = "trips_on_bursts"
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
	CheckThrottleInert       = "throttle_inert"
	CheckThrottleFloor       = "throttle_floor"
	CheckThrottleHealthy     = "throttle_refuses_healthy"
	CheckSlowTripsHealthy    = "slow_call_trips_healthy"
	CheckSlowBelowLatency    = "slow_call_below_p99"
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
	// Source says where the numbers come from: SourceAnalytic (the
	// formulas of docs/checking-policies.md), SourceSimulated (the real
	// breaker on a virtual clock, with the estimate's interval) or
	// SourceTrace; empty for a finding that is a comparison of settings.
	// Report.Assumptions states what each source rests on.
	Source string `json:"source,omitempty"`
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
	// SimCalls is the most calls one simulated estimate makes; 0 is
	// DefaultSimCalls, and a negative value turns simulation off,
	// leaving the formulas alone.
	SimCalls int
	// Seed seeds the simulations: the same seed gives the same report.
	Seed uint64
	// SimCallsPerRun is the most calls the simulations of one [Group]
	// make in all: each key's estimates share an even part of it, fixed
	// before any key is checked (so a key's report does not depend on the
	// order of the others), each estimate at most SimCalls. 0 is
	// DefaultSimCallsPerRun.
	SimCallsPerRun int64
}

// DefaultSimCallsPerRun is the default bound on the calls the
// simulations of one [Group] make: about a hundred seconds of a core.
const DefaultSimCallsPerRun = 200_000_000

// MaxModelSteps bounds the work of the formulas of one [Group], as
// [Group] estimates it before it checks anything (see ModelSteps): about
// two minutes of a core. A workload beyond it is refused.
const MaxModelSteps = 240_000_000

// DefaultSimCalls is the default budget of a simulated estimate.
const DefaultSimCalls = simBudget

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
	if o.SimCallsPerRun < 0 {
		return fmt.Errorf("check: Options.SimCallsPerRun must be positive (0 for the default), got %d", o.SimCallsPerRun)
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
	// Assumptions states, by source, what the findings' numbers rest on.
	Assumptions map[string]string `json:"assumptions"`
	// SimulatedCalls are the calls the simulations made, at most
	// Options.SimCallsPerRun; ModelSteps the work of the formulas as
	// estimated before the check (see [ModelSteps]).
	SimulatedCalls int64   `json:"simulated_calls"`
	ModelSteps     float64 `json:"model_steps"`
}

// Assumptions of each source of numbers.
var assumptions = map[string]string{
	SourceAnalytic: "steady Poisson arrivals at each period's rate, independent failures at its error ratio, lognormal latency; " +
		"times to trip from expected counts (fluid), false trips from the rate of failures that cross the line, through the cooldowns and the refill of the window after a close",
	SourceSimulated: "the real breaker (window, cooldowns, probes, jitter) on a virtual clock; Poisson arrivals (geometric batches when batch > 1), " +
		"independent failures at the period's or the burst's error ratio, calls that end at once (the fault's hanging calls at the timeout), one instance; " +
		"95% intervals from the count of trips or the ranks of the trials",
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
	steps := ModelSteps(gp, w)
	if steps > MaxModelSteps {
		return nil, fmt.Errorf("check: the formulas would take about %s steps for these %s (%s of a core), more than the %s a check takes (%s): check fewer keys at a time, or with fewer periods in their profiles",
			num(steps), plural(len(w.Keys), "key"), coreTime(steps), num(MaxModelSteps), coreTime(MaxModelSteps))
	}
	r := &Report{Fault: o.Fault, MaxFalseTripsPerDay: o.MaxFalseTripsPerDay, Assumptions: assumptions, ModelSteps: steps}
	covered := map[string]bool{}
	share := int64(0)
	if len(w.Keys) > 0 {
		share = o.runBudget() / int64(len(w.Keys))
	}
	for _, k := range slices.Sorted(maps.Keys(w.Keys)) {
		t := w.Keys[k]
		key, lookupKey := k, k
		method, _ := breaker.SplitKey(k)
		perTarget := method != k
		t = t.withMeans()
		if t.Targets > 1 {
			key, lookupKey = breaker.TargetKey(k, "*"), breaker.TargetKey(k, "")
			t.Rate /= float64(t.Targets)
			t.Profile = append([]Period(nil), t.Profile...)
			for i := range t.Profile {
				t.Profile[i].Rate /= float64(t.Targets)
			}
			perTarget = true
		}
		p, src := policyFor(gp, lookupKey)
		covered[src] = true
		r.Keys = append(r.Keys, KeyReport{Key: key, Traffic: t, Policy: p, Source: src})
		left := share
		c := checker{key: key, p: p, t: t, o: o, perTarget: perTarget, left: &left, used: &r.SimulatedCalls}
		c.run()
		r.Findings = append(r.Findings, c.out...)
	}
	for _, k := range slices.Sorted(maps.Keys(gp.Overrides)) {
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
	// period says the traffic is one period of the key's profile: the
	// false trips are judged over the whole day instead.
	period bool
	// source is the source of the next finding added.
	source string
	// all caches the time to trip when every call fails.
	all *tripEstimate
	// bursty says a trips_on_bursts finding was made.
	bursty bool
	// left is what is left of the key's share of the run's simulated
	// calls, shared by its periods; used counts the run's.
	left, used *int64
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
	c.out = append(c.out, Finding{Severity: s, Key: c.key, Check: check, Message: fmt.Sprintf(format, args...), Numbers: nums, Source: c.source})
	c.source = ""
}

func (c *checker) run() {
	if len(c.t.Profile) > 0 {
		c.runProfile()
		return
	}
	never := c.neverTrips()
	if c.t.Rate > 0 && !never && !c.period {
		c.falseTrips()
	}
	c.slowRule()
	c.timeToTrip(never)
	c.timeout()
	c.probes()
	c.backoff()
	c.throttle()
}

// runProfile judges each period of the key's day as steady traffic and
// keeps, of each check, the worst period's finding, saying when it
// happens; the false trips are the day's.
func (c *checker) runProfile() {
	day := c.t
	worst := map[string]Finding{}
	var order []string
	for i, per := range day.Profile {
		pt := day
		pt.Profile, pt.Bursts = nil, Bursts{}
		pt.Rate, pt.ErrorRatio = per.Rate, per.ErrorRatio
		pc := checker{key: c.key, p: c.p, t: pt, o: c.o, perTarget: c.perTarget, period: true, left: c.left, used: c.used}
		pc.run()
		when := fmt.Sprintf("worst from %s to %s (%s calls/s, %s errors)", clockOf(per.From), clockOf(per.From+day.periodLength(i)), num(per.Rate), pct(per.ErrorRatio))
		for _, f := range pc.out {
			f.Message += "; " + when
			if f.Numbers == nil {
				f.Numbers = map[string]float64{}
			}
			f.Numbers["period_from_s"] = per.From.Seconds()
			f.Numbers["period_to_s"] = (per.From + day.periodLength(i)).Seconds()
			old, ok := worst[f.Check]
			if !ok {
				order = append(order, f.Check)
			}
			if !ok || worse(f, old) {
				worst[f.Check] = f
			}
		}
	}
	for _, k := range order {
		c.out = append(c.out, worst[k])
	}
	if day.Rate > 0 {
		c.falseTrips()
	}
}

// worse says that finding a is worse than b, of the same check: a higher
// severity, then a longer time to trip or a larger share of probes.
func worse(a, b Finding) bool {
	if a.Severity != b.Severity {
		return a.Severity > b.Severity
	}
	for _, k := range []string{"time_to_trip_s", "probe_share", "healthy_timeout_ratio"} {
		x, okx := a.Numbers[k]
		y, oky := b.Numbers[k]
		if !okx {
			x = math.Inf(1)
		}
		if !oky {
			y = math.Inf(1)
		}
		if okx || oky {
			return x > y
		}
	}
	return false
}

// windowRules says whether any of the window's rules is on.
func (c *checker) windowRules() bool {
	return c.p.ErrorRatio > 0 || c.p.ErrorCount > 0 || c.p.SlowCall > 0
}

// allFail is the time to trip when every call fails.
func (c *checker) allFail() tripEstimate {
	if c.all == nil {
		e := c.tripTime(Fault{Errors: 1})
		c.all = &e
	}
	return *c.all
}

// neverTrips reports a window that cannot hold MinRequests calls at the
// key's mean rate. The verdict comes from the distribution of the
// window's count: a Poisson count over the windows of a fault, the rules
// checked on every failure. It says the breaker never trips only when a
// trip within a 10-minute outage is improbable, and returns true then;
// a breaker that trips when a burst of calls fills the window gets a
// finding of its own, with its time to trip.
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
	// The window's rules alone: a run of consecutive failures is not a
	// burst that fills the window.
	e := c.allFail()
	if p.ConsecutiveFailures > 0 {
		wc := *c
		wc.p.ConsecutiveFailures = 0
		wc.all = nil
		e = wc.allFail()
	}
	check := CheckNeverTrips
	if c.perTarget {
		check = CheckPerTargetNeverTrips
	}
	chance := e.chance
	if e.source == SourceSimulated {
		chance = 1 - e.never
	}
	nums := map[string]float64{
		"min_requests":     float64(p.MinRequests),
		"rate":             t.Rate,
		"window_s":         p.Window.Seconds(),
		"window_calls":     full,
		"burst_chance":     atLeastChance(full, minReq),
		"trip_chance_10m":  chance,
		"consecutive":      float64(p.ConsecutiveFailures),
		"targets":          float64(max(t.Targets, 1)),
		"needed_rate":      float64(minReq) / p.Window.Seconds(),
		"suggested_min":    math.Floor(full / 2),
		"analytic_chance":  e.chance,
		"simulated_trials": float64(e.trials),
	}
	what := "min_requests"
	if c.perTarget {
		what = "per-target traffic cannot reach min_requests:"
	}
	fix := fmt.Sprintf("set min_requests to at most %s, or consecutive_failures for a key this quiet", num(math.Max(1, nums["suggested_min"])))
	if p.ConsecutiveFailures > 0 {
		fix = fmt.Sprintf("only consecutive_failures (%d) opens it reliably", p.ConsecutiveFailures)
	}
	tripped := e.source == SourceSimulated && e.never < 1 || e.source == SourceAnalytic && chance >= improbable
	if !tripped {
		sev := Error
		if p.ConsecutiveFailures > 0 {
			sev = Info
		}
		c.source = e.source
		c.add(sev, check, nums, "%s %d > %s calls/s × %v window = %s calls: the window's rules can never trip (a trip within a 10-minute outage is below %s likely: %s); %s",
			what, p.MinRequests, num(t.Rate), p.Window, num(full), pct(improbable), e.evidence(), fix)
		return p.ConsecutiveFailures == 0
	}
	// It trips, when a burst of calls fills the window.
	sev := Warning
	if math.IsInf(e.median, 1) {
		sev = Error
	}
	if p.ConsecutiveFailures > 0 {
		sev = Info
	}
	for k, v := range tripNums(e, t) {
		nums[k] = v
	}
	c.source = e.source
	c.bursty = p.ConsecutiveFailures == 0
	c.add(sev, CheckTripsOnBursts, nums, "%s %d > %s calls/s × %v window = %s calls: the window's rules trip only when a burst of calls fills the window (%s of windows); when every call fails it opens %s; %s",
		what, p.MinRequests, num(t.Rate), p.Window, num(full), pct(nums["burst_chance"]), e.describe(), fix)
	return false
}

// severity is that of a breaker that opens: a warning when one fault in
// ten or more does not open it within the horizon.
func (e tripEstimate) severity() Severity {
	if e.never >= 0.1 {
		return Warning
	}
	return Info
}

// evidence says what a never-trips verdict rests on.
func (e tripEstimate) evidence() string {
	if e.source == SourceSimulated {
		return fmt.Sprintf("none of %d simulated 10-minute outages tripped it; analytic bound %s", e.trials, pct(e.chance))
	}
	return fmt.Sprintf("analytic bound %s", pct(e.chance))
}

// describe says when a breaker opens: "in 17.2s (median; p90 41s;
// simulated, 200 trials, median in [15s, 19s])".
func (e tripEstimate) describe() string {
	if e.source == SourceSimulated {
		never := ""
		if e.never > 0 {
			never = fmt.Sprintf(", %s of them not within %v", pct(e.never), horizon)
		}
		if math.IsInf(e.median, 1) {
			return fmt.Sprintf("in fewer than half of %d simulated outages within %v (%s tripped)", e.trials, horizon, pct(1-e.never))
		}
		return fmt.Sprintf("in %s (median; p90 %s; simulated, %d trials%s; median in [%s, %s])",
			secs(e.median), secs(e.p90), e.trials, never, secs(e.medLo), secs(e.medHi))
	}
	if !e.ok {
		return fmt.Sprintf("in about %s (analytic: one over the rate at which a failure finds the window at min_requests, which errs short)", secs(1/(e.chance/horizon.Seconds())))
	}
	if e.p90 != e.median {
		return fmt.Sprintf("in %s (median; p90 %s; analytic)", secs(e.median), secs(e.p90))
	}
	return fmt.Sprintf("in %s (analytic, from expected counts; %s)", secs(e.median), e.why)
}

func (c *checker) falseTrips() {
	p, t := c.p, c.t
	b := baselineOf(p, t)
	v, m := dailyFalseTrips(p, t)
	nums := map[string]float64{
		"false_trips_per_day":          v,
		"analytic_false_trips_per_day": v,
		"retrip_chance":                m.retrip,
		"baseline_failure_ratio":       b.fail,
		"baseline_timeout_ratio":       b.timeouts,
		"window_calls":                 t.Rate * p.Window.Seconds(),
		"max_false_trips_per_day":      c.o.MaxFalseTripsPerDay,
	}
	figure := v
	source := SourceAnalytic
	simNote := ""
	// Simulate where the formulas cannot be trusted: traffic that is not
	// steady, trips again on the refilling window after a close, or a
	// busy key, and only where the answer can matter.
	simulate := c.o.SimCalls >= 0 && p.SlowCall <= 0 &&
		(!t.steady() || m.retrip > 0.01 || t.Rate*p.Window.Seconds() > 1000) &&
		(v >= c.o.MaxFalseTripsPerDay/10 || !t.steady())
	budget, why := c.budget()
	if simulate && budget <= 0 {
		simNote = " (analytic; the key's share of the run's simulations is spent)"
	}
	if simulate && budget > 0 {
		n, span, used, err := simFalseTrips(p, t, day, c.o.Seed, budget)
		c.spend(used)
		if err == nil && span > 0 {
			d := span.Hours() / 24
			lo, hi := poissonInterval(n)
			est := float64(n) / d
			nums["simulated_false_trips_per_day"] = est
			nums["simulated_low"] = lo / d
			nums["simulated_high"] = hi / d
			nums["simulated_days"] = d
			if n >= 5 || span >= day {
				figure, source = est, SourceSimulated
				simNote = fmt.Sprintf(" (simulated: %d trips in %v, 95%% interval [%s, %s] a day; analytic %s)", n, span.Round(time.Minute), num(lo/d), num(hi/d), num(v))
			} else {
				simNote = fmt.Sprintf(" (analytic; a simulation of %v%s saw %d trips, at most %s a day)", span.Round(time.Minute), why, n, num(hi/d))
			}
		}
	}
	if simNote == "" {
		simNote = " (analytic)"
	}
	nums["false_trips_per_day"] = figure
	sev := Info
	if figure > c.o.MaxFalseTripsPerDay {
		sev = Warning
	}
	detail := ""
	if b.timeouts >= 1e-4 {
		detail = fmt.Sprintf(" (%s errors + %s slower than the timeout)", pct(t.ErrorRatio), pct(b.timeouts))
	}
	if len(t.Profile) > 0 {
		detail += ", over the day's profile"
	}
	if t.Bursts.PerDay > 0 {
		detail += fmt.Sprintf(", with %s error bursts a day of %v at %s", num(t.Bursts.PerDay), t.Bursts.Length, pct(t.Bursts.ErrorRatio))
	}
	if t.Batch > 1 {
		detail += fmt.Sprintf(", calls in batches of %s", num(t.Batch))
	}
	count := num(figure)
	if figure < 1e-6 {
		count = "fewer than 1e-6"
	}
	c.source = source
	c.add(sev, CheckFalseTrips, nums, "%s false trips a day expected at a %s baseline failure ratio%s, threshold %s%s",
		count, pct(b.fail), detail, num(c.o.MaxFalseTripsPerDay), simNote)
}

// dailyFalseTrips is the analytic false trips a day of traffic t: its
// periods' in turn, and the error bursts', the trips of the burst's error
// ratio for the burst's length. It returns the model of the busiest period.
func dailyFalseTrips(p breaker.Policy, t Traffic) (float64, falseTripModel) {
	steady := t
	steady.Profile, steady.Bursts = nil, Bursts{}
	var total float64
	var worst falseTripModel
	if len(t.Profile) == 0 {
		worst = falseTrips(p, steady)
		total = worst.perDay
	}
	for i, per := range t.Profile {
		pt := steady
		pt.Rate, pt.ErrorRatio = per.Rate, per.ErrorRatio
		m := falseTrips(p, pt)
		total += m.perDay * t.periodLength(i).Seconds() / day.Seconds()
		if m.perDay >= worst.perDay {
			worst = m
		}
	}
	if bs := t.Bursts; bs.PerDay > 0 {
		bt := steady
		bt.ErrorRatio = bs.ErrorRatio
		m := falseTrips(p, bt)
		// The trips a burst brings: its error ratio's rate, through the
		// cooldowns, for as long as it lasts.
		total += bs.PerDay * m.perDay * bs.Length.Seconds() / day.Seconds()
	}
	return total, worst
}

func (c *checker) timeToTrip(never bool) {
	p, t := c.p, c.t
	if t.Rate <= 0 {
		return
	}
	all := c.allFail()
	full := t.Rate * p.Window.Seconds()
	switch {
	case never:
		return
	case c.bursty:
		// The trips_on_bursts finding gave the time to trip.
	case !all.ok:
		why := ""
		if p.ErrorCount > 0 && float64(p.ErrorCount) > full {
			why = fmt.Sprintf(": error_count %d is more than the %s calls a full window holds", p.ErrorCount, num(full))
		}
		c.source = all.source
		nums := map[string]float64{"rate": t.Rate, "window_calls": full}
		if all.source == SourceSimulated && all.never < 1 {
			nums["never_share"] = all.never
			c.add(Error, CheckTimeToTrip, nums,
				"seldom opens, even when every call fails, at %s calls/s%s: %s of %d simulated outages opened it within %v",
				num(t.Rate), why, pct(1-all.never), all.trials, horizon)
			break
		}
		c.add(Error, CheckTimeToTrip, nums,
			"never opens, even when every call fails, at %s calls/s%s", num(t.Rate), why)
		return
	default:
		c.source = all.source
		c.add(all.severity(), CheckTimeToTrip, tripNums(all, t), "opens %s after every call starts failing, at %s calls/s", all.describe(), num(t.Rate))
	}
	c.faultTimeToTrip()
}

// faultTimeToTrip adds the time to trip during the fault of the options.
func (c *checker) faultTimeToTrip() {
	p, t := c.p, c.t
	f := c.o.Fault
	e := c.tripTime(f)
	te := effectiveTimeout(p, t)
	ft := f.Timeouts
	if te <= 0 {
		ft = 0
	}
	b := baselineOf(p, t)
	seen := f.Errors + ft + max(0, 1-f.Errors-f.Timeouts)*b.fail
	nums := tripNums(e, t)
	for k, v := range map[string]float64{
		"fault_errors":          f.Errors,
		"fault_timeouts":        f.Timeouts,
		"fault_failure_ratio":   seen,
		"effective_timeout_s":   te.Seconds(),
		"error_ratio_to_trip":   p.ErrorRatio,
		"timeouts_counted_at_s": te.Seconds(),
	} {
		nums[k] = v
	}
	c.source = e.source
	if !e.ok {
		delete(nums, "time_to_trip_s")
		why := ""
		if p.ErrorRatio > 0 && seen < p.ErrorRatio {
			why = fmt.Sprintf(": its calls fail at %s, below error_ratio %s", pct(seen), pct(p.ErrorRatio))
		}
		if f.Timeouts > 0 && te <= 0 {
			why += "; with no timeout and no client deadline its hanging calls are never counted"
		}
		if e.source == SourceSimulated && e.never < 1 {
			why += fmt.Sprintf("; %s of %d simulated faults opened it within %v", pct(1-e.never), e.trials, horizon)
		} else if e.source == SourceSimulated {
			why += fmt.Sprintf("; none of %d simulated faults opened it within %v", e.trials, horizon)
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
	c.add(e.severity(), CheckFaultTimeToTrip, nums, "opens %s into a fault of %s (%s)", e.describe(), f, when)
}

// FaultTimeToTrip is the fault_time_to_trip finding [Group] makes for a
// key named key under policy p with traffic t: how long after the fault
// o.Fault begins the breaker opens, as a median and a 90th percentile
// (numbers time_to_trip_s and time_to_trip_p90_s, absent when it does not
// open within 10 minutes), from the same model, with its source and,
// simulated, the 95% interval of each (time_to_trip_low_s, ...). The
// traffic is taken as steady at its Rate and ErrorRatio, for one breaker
// (its profile, bursts and targets left out). The same options give the
// same figure as Group where Group's simulations were not bounded by the
// key's share of SimCallsPerRun; this call has SimCalls alone.
func FaultTimeToTrip(key string, p breaker.Policy, t Traffic, o Options) (Finding, error) {
	if err := p.Validate(); err != nil {
		return Finding{}, err
	}
	t = t.withMeans()
	t.Profile, t.Bursts, t.Targets = nil, Bursts{}, 0
	if err := t.Validate(); err != nil {
		return Finding{}, err
	}
	o = o.orDefault()
	if err := o.validate(); err != nil {
		return Finding{}, err
	}
	if t.Rate <= 0 {
		return Finding{}, fmt.Errorf("check: the key has no traffic (rate 0): no time to trip")
	}
	c := checker{key: key, p: p, t: t, o: o}
	c.faultTimeToTrip()
	return c.out[0], nil
}

// tripNums are the numbers of a time to trip.
func tripNums(e tripEstimate, t Traffic) map[string]float64 {
	n := map[string]float64{
		"time_to_trip_s":     e.median,
		"time_to_trip_p90_s": e.p90,
		"rate":               t.Rate,
	}
	if !math.IsNaN(e.fluid) {
		n["analytic_time_to_trip_s"] = e.fluid
	}
	if e.source == SourceSimulated {
		n["time_to_trip_low_s"] = e.medLo
		n["time_to_trip_high_s"] = e.medHi
		n["time_to_trip_p90_low_s"] = e.p90Lo
		n["time_to_trip_p90_high_s"] = e.p90Hi
		n["never_share"] = e.never
		n["trials"] = float64(e.trials)
	}
	return n
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

// throttle judges Policy.Throttle against the traffic: a ratio rule that
// trips before anything is throttled, a protection floor the window never
// reaches at the key's rate, and a K under which the healthy traffic is
// throttled. The analytic models of the other checks leave the throttle
// out (a throttled call is not counted, so a throttling breaker's window
// fills more slowly than they assume); the simulated ones run the real
// breaker, throttle included.
func (c *checker) throttle() {
	p, t := c.p, c.t
	th := p.Throttle
	if !th.Enabled {
		return
	}
	onset := 1 - 1/th.K // the failure ratio above which the throttle refuses
	if p.ErrorRatio > 0 && p.ErrorRatio <= onset {
		c.add(Warning, CheckThrottleInert, map[string]float64{
			"error_ratio": p.ErrorRatio, "k": th.K, "throttle_onset": onset, "max_k": 1 / (1 - p.ErrorRatio)},
			"throttling is on, but error_ratio %s is at most 1 - 1/k = %s, where the throttle starts: the ratio rule trips the breaker before any call is throttled, so throttling never acts; set error_ratio above %s (0.8, say) or to 0, or k below %s",
			num(p.ErrorRatio), num(onset), num(onset), num(1/(1-p.ErrorRatio)))
		return
	}
	if t.Rate <= 0 {
		return
	}
	// The throttle refuses nothing below throttle.min_requests requests,
	// nor while the window holds fewer than 3·min_requests counted calls
	// (the trip rules' sample).
	full := t.Rate * p.Window.Seconds()
	counted := 3 * p.MinRequests
	if e := p.ErrorRatio; e > 0 && e < 1 {
		// and the calls that, every one failed, show error_ratio with
		// confidence: n/(n+9) >= error_ratio
		counted = max(counted, int(math.Ceil(9*e/(1-e))))
	}
	floor := max(th.MinRequests, counted)
	if float64(floor) > full {
		c.add(Warning, CheckThrottleFloor, map[string]float64{
			"throttle_min_requests": float64(th.MinRequests), "min_requests": float64(p.MinRequests),
			"rate": t.Rate, "window_s": p.Window.Seconds(), "window_calls": full, "suggested_min": math.Max(1, math.Floor(full/2))},
			"throttle.min_requests %d and min_requests %d: the throttle refuses nothing while the window holds fewer than %d requests or %d counted calls (3 × min_requests, and enough to show error_ratio with confidence), and at %s calls/s the %v window holds %s on average, so throttling never acts; lower them so that both are at most %s",
			th.MinRequests, p.MinRequests, th.MinRequests, counted, num(t.Rate), p.Window, num(full), num(math.Max(1, math.Floor(full/2))))
		return
	}
	bl := baselineOf(p, t)
	if success := 1 - bl.fail; success < 1/th.K {
		refuse := 1 - th.K*success
		c.add(Error, CheckThrottleHealthy, map[string]float64{
			"baseline_failure_ratio": bl.fail, "success_ratio": success, "k": th.K,
			"refusal_probability": refuse, "suggested_k": math.Min(maxThrottleK, math.Ceil(10/success)/10)},
			"a healthy downstream succeeds on %s of the calls (%s baseline failures), below 1/k = %s: the throttle refuses healthy traffic, %s of it before its own refusals count, and more as they do; raise k to at least %s, or set the errors it counts apart with a classifier",
			pct(success), pct(bl.fail), pct(1/th.K), pct(refuse), num(math.Min(maxThrottleK, math.Ceil(10/success)/10)))
	}
}

// slowRule judges the slow-call rule against the key's healthy latency:
// the share of calls slower than SlowCall, from the lognormal fitted to
// p50 and p99. At or above SlowRatio the healthy traffic alone holds the
// window over the line, and the rule trips the breaker as soon as the
// window holds MinRequests calls, after every close: an error. A
// SlowCall below p99 marks more than 1% of the healthy calls slow: a
// warning, and the false_trips finding gives what that costs.
func (c *checker) slowRule() {
	p, t := c.p, c.t
	lat := fitLatency(t)
	if p.SlowCall <= 0 || !lat.ok {
		return
	}
	share := lat.over(p.SlowCall)
	slowOnly := p
	slowOnly.ErrorRatio, slowOnly.ErrorCount, slowOnly.ConsecutiveFailures = 0, 0, 0
	healthy := t
	healthy.ErrorRatio = 0
	m := falseTrips(slowOnly, healthy)
	below := "p99"
	if p.SlowCall < t.P50 {
		below = "p50"
	}
	nums := map[string]float64{
		"slow_call_s": p.SlowCall.Seconds(), "slow_ratio": p.SlowRatio, "healthy_slow_ratio": share,
		"p50_s": t.P50.Seconds(), "p99_s": t.P99.Seconds(), "min_requests": float64(p.MinRequests),
		"slow_retrip_chance": m.retrip, "slow_false_trips_per_day": m.perDay,
		"suggested_slow_call_s": time.Duration(1.5 * float64(t.P99)).Seconds(),
	}
	fix := fmt.Sprintf("set slow_call above p99 (%v; 1.5 × p99 is %v), or slow_ratio well above %s", t.P99, time.Duration(1.5*float64(t.P99)), pct(share))
	switch {
	case t.Rate > 0 && share >= p.SlowRatio:
		c.source = SourceAnalytic
		c.add(Error, CheckSlowTripsHealthy, nums,
			"%s of healthy calls are slower than slow_call %v (lognormal from p50 %v and p99 %v), at or above slow_ratio %s: the healthy traffic alone trips the slow-call rule as soon as the window holds min_requests %d calls, after every close (%s false trips a day); %s",
			pct(share), p.SlowCall, t.P50, t.P99, pct(p.SlowRatio), p.MinRequests, num(m.perDay), fix)
	case p.SlowCall < t.P99:
		c.add(Warning, CheckSlowBelowLatency, nums,
			"slow_call %v is below the healthy %s (%v): %s of healthy calls count as slow, against slow_ratio %s; %s",
			p.SlowCall, below, map[string]time.Duration{"p99": t.P99, "p50": t.P50}[below], pct(share), pct(p.SlowRatio), fix)
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

// maxThrottleK is the largest Policy.Throttle.K a policy accepts.
const maxThrottleK = 10
