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
	if lead := t.Rate * 1.5 * p.Window.Seconds(); float64(c.o.simBudget()) < minTrials*lead {
		e.why = "too costly to simulate at this rate"
		return e
	}
	// The trials stop when the budget runs out: a fault that trips in
	// seconds costs little, one that never trips ten minutes of calls.
	xs, err := simTimeToTrip(p, t, f, simTrials, horizon, c.o.Seed, c.o.simBudget())
	if err != nil || len(xs) < minTrials {
		e.why = "too costly to simulate at this rate"
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

// secs formats seconds for a message: "17.2s", "beyond 10m0s".
func secs(s float64) string {
	if math.IsInf(s, 1) {
		return "beyond " + horizon.String()
	}
	return dur(seconds(s))
}
