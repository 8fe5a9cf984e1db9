package check

import (
	"fmt"
	"math"
	"time"

	"github.com/govkit/breaker"
)

// Sources of a finding's numbers.
const (
	// SourceAnalytic numbers come from the models' formulas.
	SourceAnalytic = "analytic"
	// SourceSimulated numbers come from running the real breaker on a
	// virtual clock under traffic drawn from the description.
	SourceSimulated = "simulated"
	// SourceTrace numbers come from running the real breaker over a
	// recorded trace.
	SourceTrace = "trace"
)

// horizon is how long a fault is followed before "never opens": a fault
// that lasts longer has been noticed by people.
const horizon = 10 * time.Minute

// improbable is the chance of a trip within the horizon below which the
// checker says a breaker never trips.
const improbable = 1e-3

// tripEstimate is a time to trip during a fault, from the formulas or
// from a simulation.
type tripEstimate struct {
	source string
	// ok says the breaker opens within the horizon (simulated: in at
	// least half the trials).
	ok bool
	// median and p90 are in seconds (+Inf: beyond the horizon), each
	// with its 95% interval (simulated; the analytic ones are the
	// figure itself).
	median, medLo, medHi float64
	p90, p90Lo, p90Hi    float64
	// never is the share of simulated faults not tripped within the
	// horizon.
	never  float64
	trials int
	// fluid is the analytic time (NaN: never), and chance the analytic
	// chance of a trip within the horizon when it says never (a bound:
	// the expected number of crossings).
	fluid, chance float64
	// why says why the simulation was run, or why it was not.
	why string
}

// faultTripRate is the rate (per second) at which failures take a full
// window of steady fault traffic over the line: the chance that fault f
// trips the breaker in one more second, once the window holds only fault
// traffic and its timeouts are being cut. Like the false-trip model's
// rate, it counts every crossing, so as a chance it is a bound.
func faultTripRate(p breaker.Policy, t Traffic, f Fault) float64 {
	b := baselineOf(p, t)
	te := effectiveTimeout(p, t)
	ft := f.Timeouts
	if te <= 0 {
		ft = 0
	}
	h := max(0, 1-f.Errors-f.Timeouts)
	counted := f.Errors + ft + h
	if counted <= 0 || t.Rate <= 0 {
		return 0
	}
	q := (f.Errors + ft + h*b.fail) / counted
	rc := t.Rate * counted
	r := windowTripRate(rc, q, p.ErrorRatio, p.ErrorCount, p.MinRequests, p.Window, bucketWidth(p), false)
	if c := p.ConsecutiveFailures; c > 0 && q < 1 {
		r += rc * (1 - q) * math.Pow(q, float64(c))
	}
	return r
}

// tripTime estimates the time to trip during fault f. It simulates the
// real breaker where the formulas cannot be trusted: where the fluid
// model says never but a burst can fill the window, where the window's
// counts are small enough for their noise to matter (and a simulation is
// cheap), and for batched arrivals.
func (c *checker) tripTime(f Fault) tripEstimate {
	p, t := c.p, c.t
	e := tripEstimate{source: SourceAnalytic, fluid: math.NaN()}
	d, ok := TimeToTrip(p, t, f)
	if ok {
		e.fluid = d.Seconds()
	} else {
		e.chance = min(1, faultTripRate(p, t, f)*horizon.Seconds())
	}
	e.ok = ok
	e.median, e.medLo, e.medHi = e.fluid, e.fluid, e.fluid
	e.p90, e.p90Lo, e.p90Hi = e.fluid, e.fluid, e.fluid
	if !ok {
		e.median, e.p90 = math.Inf(1), math.Inf(1)
		e.medLo, e.medHi, e.p90Lo, e.p90Hi = e.median, e.median, e.p90, e.p90
	} else if r, okr := runSpread(p, t, f); okr {
		e.median, e.p90 = r.median, r.p90
		e.medLo, e.medHi, e.p90Lo, e.p90Hi = r.median, r.median, r.p90, r.p90
	}

	// Whether to simulate.
	te := effectiveTimeout(p, t)
	ft := f.Timeouts
	if te <= 0 {
		ft = 0
	}
	counted := t.Rate * (f.Errors + ft + max(0, 1-f.Errors-f.Timeouts)) * p.Window.Seconds()
	switch {
	case c.o.SimCalls < 0:
		e.why = "simulation off"
		return e
	case p.SlowCall > 0:
		e.why = "the simulation does not model latency, which slow_call needs"
		return e
	case t.Batch > 1:
		e.why = "calls arrive in batches, which the formulas do not model"
	case !ok && e.chance >= improbable:
		e.why = "a burst of calls can fill the window, which the fluid model does not see"
	case ok && counted < 300:
		e.why = "the window holds few enough calls for their noise to matter"
	default:
		if ok {
			e.why = fmt.Sprintf("the window holds %s calls of the fault: their counts vary little", num(counted))
		}
		return e
	}
	budget, why := c.budget()
	if lead := t.Rate * 1.5 * p.Window.Seconds(); float64(budget) < minTrials*lead {
		e.why = "too costly to simulate at this rate" + why
		return e
	}
	// The trials stop when the budget runs out: a fault that trips in
	// seconds costs little, one that never trips ten minutes of calls.
	xs, used, err := simTimeToTrip(p, t, f, simTrials, horizon, c.o.Seed, budget)
	c.spend(used)
	if err != nil || len(xs) < minTrials {
		e.why = "too costly to simulate at this rate" + why
		return e
	}
	s := newSample(xs)
	e.source = SourceSimulated
	e.trials = len(s)
	e.median, e.medLo, e.medHi = s.quantile(0.5)
	e.p90, e.p90Lo, e.p90Hi = s.quantile(0.9)
	e.never = s.never()
	e.ok = !math.IsInf(e.median, 1)
	return e
}

// simTrials is how many faults a simulated time to trip follows, and
// minTrials the fewest it reports from.
const (
	simTrials = 200
	minTrials = 40
)

// spread is a median and a 90th percentile, in seconds.
type spread struct{ median, p90 float64 }

// runSpread is the median and 90th percentile of the time to trip when it
// is the ConsecutiveFailures rule that trips first, before any timeout of
// the fault is cut: the number of counted calls N until a run of C
// failures (each a failure with probability q) has a known distribution,
// and the N-th counted call comes at an Erlang(N, λc) time.
func runSpread(p breaker.Policy, t Traffic, f Fault) (spread, bool) {
	c := p.ConsecutiveFailures
	if c <= 0 {
		return spread{}, false
	}
	te := effectiveTimeout(p, t)
	b := baselineOf(p, t)
	h := max(0, 1-f.Errors-f.Timeouts)
	early := f.Errors + h
	if early <= 0 {
		return spread{}, false
	}
	q := (f.Errors + h*b.fail) / early
	rc := t.Rate * early
	runD, okRun := runTimeToTrip(c, t.Rate, f.Errors, f.Timeouts, h, b.fail, te)
	wp := p
	wp.ConsecutiveFailures = 0
	win, okWin := TimeToTrip(wp, t, f)
	if !okRun || (okWin && win < runD) || q <= 0 {
		return spread{}, false
	}
	if f.Timeouts > 0 && te > 0 && runD.Seconds() > te.Seconds() {
		return spread{}, false
	}
	// P(N = n) by the run length so far, to where the tail is below 1e-4
	// or, for a long wait, as an exponential: such runs are rare events.
	mean := runD.Seconds()
	if mean*rc > 2000 {
		return spread{math.Ln2 * mean, math.Log(10) * mean}, true
	}
	var pn []float64
	state := make([]float64, c) // P(run of j so far, not yet tripped)
	state[0] = 1
	left := 1.0
	for n := 1; left > 1e-4 && n < 100_000; n++ {
		next := make([]float64, c)
		var tripped float64
		for j, v := range state {
			if j+1 == c {
				tripped += v * q
			} else {
				next[j+1] += v * q
			}
			next[0] += v * (1 - q)
		}
		pn = append(pn, tripped)
		left -= tripped
		state = next
	}
	// P(T ≤ x) = Σ_n P(N = n)·P(Poisson(λc·x) ≥ n).
	cdf := func(x float64) float64 {
		var s float64
		for i, v := range pn {
			s += v * atLeastChance(rc*x, i+1)
		}
		return s
	}
	quant := func(q float64) float64 {
		lo, hi := 0.0, 10*mean+10/rc
		for range 50 {
			mid := (lo + hi) / 2
			if cdf(mid) < q {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi
	}
	return spread{quant(0.5), quant(0.9)}, true
}

// simBudget is the most calls one simulated estimate makes.
func (o Options) simBudget() int {
	if o.SimCalls > 0 {
		return o.SimCalls
	}
	return simBudget
}

// runBudget is the most calls the simulations of one Group make.
func (o Options) runBudget() int64 {
	if o.SimCallsPerRun > 0 {
		return o.SimCallsPerRun
	}
	return DefaultSimCallsPerRun
}

// budget is the most calls the checker's next simulated estimate may
// make: SimCalls, or what is left of the key's share of the run's, and
// a note for a message when it is the share that bounds it.
func (c *checker) budget() (int, string) {
	b := c.o.simBudget()
	if c.left == nil || *c.left >= int64(b) {
		return b, ""
	}
	return int(max(*c.left, 0)), fmt.Sprintf(" within the key's share of the run's simulations (%s calls left)", num(float64(max(*c.left, 0))))
}

// spend takes n simulated calls from the key's share.
func (c *checker) spend(n int) {
	if c.left != nil {
		*c.left -= int64(n)
	}
	if c.used != nil {
		*c.used += int64(n)
	}
}

// secs formats seconds for a message: "17.2s", "beyond 10m0s".
func secs(s float64) string {
	if math.IsInf(s, 1) {
		return "beyond " + horizon.String()
	}
	return dur(seconds(s))
}

// Costs of the formulas, in steps of about half a microsecond of a core,
// the time of a simulated call, measured on the costliest inputs within
// the limits (busy windows, 1,440-period profiles, long runs of
// consecutive failures); they err high.
const (
	stepsPerPeriod = 500  // a period's formulas at a small rate
	stepsPerRootLW = 35   // and per √(λW): the Poisson ranges they sum over
	stepsPerRunSq  = 1.4  // per C² of a consecutive_failures rule C
	maxCostlyRun   = 2000 // beyond it the run's spread is an exponential
	secondsPerStep = 0.5e-6
	profileFactor  = 2 // a profile's periods are judged, then its day's false trips
	burstsFactor   = 1 // bursts add a false-trip model at their error ratio
)

// ModelSteps estimates the work of the formulas [Group] runs for gp and
// w, in steps of about half a microsecond of a core (a simulated call
// takes about one): each period of a key's day (a steady key is one
// period) costs 500 + 35·√(λW) steps, λ its rate per target and W its
// policy's window in seconds; twice that for a key with a profile (its
// periods are judged, then its day's false trips), once more with error
// bursts; a consecutive_failures rule C adds 1.4·min(C, 2000)² a period.
// The estimate errs high. [Group] refuses a workload whose estimate is
// above MaxModelSteps before it checks anything; its simulations are
// bounded apart, by Options.SimCallsPerRun.
func ModelSteps(gp breaker.GroupPolicy, w Workload) float64 {
	if gp.Default == (breaker.Policy{}) {
		gp.Default = breaker.DefaultPolicy()
	}
	var steps float64
	for k, t := range w.Keys {
		lookup := k
		targets := 1.0
		if t.Targets > 1 {
			lookup, targets = breaker.TargetKey(k, ""), float64(t.Targets)
		}
		p, _ := policyFor(gp, lookup)
		c := min(float64(p.ConsecutiveFailures), maxCostlyRun)
		period := func(rate float64) float64 {
			return stepsPerPeriod + stepsPerRootLW*math.Sqrt(max(0, rate/targets*p.Window.Seconds())) + stepsPerRunSq*c*c
		}
		var key float64
		if len(t.Profile) == 0 {
			key = period(t.Rate)
		}
		for _, per := range t.Profile {
			key += profileFactor * period(per.Rate)
		}
		if t.Bursts.PerDay > 0 {
			key += burstsFactor * period(t.Rate)
		}
		steps += key
	}
	return steps
}

// coreTime is how long steps take a core: "about 2m0s".
func coreTime(steps float64) string {
	d := time.Duration(steps * secondsPerStep * float64(time.Second))
	if d < time.Second {
		return "under a second"
	}
	return "about " + d.Round(time.Second).String()
}
