package check

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/govkit/breaker"
)

// The simulator runs the real breaker (package breaker, with its window,
// cooldowns, probes and jitter) on a virtual clock, under calls drawn from
// a traffic description: Poisson arrivals (in batches when Traffic.Batch is
// above 1), each failing at the error ratio of the period of the day it
// falls in (or of an error burst), independently. It is what the checker
// falls back on where a formula cannot be trusted, and the same seed gives
// the same numbers.
//
// Assumptions, stated in every simulated finding: calls end at once (a
// fault's hanging calls end at the effective timeout), healthy calls
// slower than the timeout are failures at once, and there is one instance.

// simClock is the simulation's time. Nothing waits on it: the simulator
// moves it from event to event.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time { return c.now }

// WithTimeout leaves the context alone: the simulator ends every hanging
// call itself, at its timeout.
func (c *simClock) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

var errSimulated = errors.New("check: simulated failure")

// simEpoch is midnight, the start of every simulated day.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sim is one run of the real breaker.
type sim struct {
	p     breaker.Policy
	t     Traffic
	clk   *simClock
	b     *breaker.Breaker
	rng   *rand.Rand
	start time.Time

	// fault, from faultAt on (negative: none); te is when a hanging call
	// of the fault is cut (0: never).
	fault   Fault
	faultAt time.Duration
	te      time.Duration

	// bursts: the end of the error burst in progress, and the start of
	// the next one.
	burstEnd, nextBurst time.Duration

	hangs []simHang // by end
	calls int       // calls made

	trips     int           // closed → open transitions
	firstOpen time.Duration // of the first trip at or after faultAt; -1 none
}

type simHang struct {
	at   time.Duration
	done func(error)
}

// newSim starts a breaker under p at offset (from midnight) of a day of
// traffic t.
func newSim(p breaker.Policy, t Traffic, seed uint64, offset time.Duration) (*sim, error) {
	s := &sim{p: p, t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), faultAt: -1, firstOpen: -1}
	s.clk = &simClock{now: simEpoch.Add(offset)}
	s.start = simEpoch
	jitter := rand.New(rand.NewPCG(seed, 0x717e))
	b, err := breaker.New("check", p, breaker.WithClock(s.clk), breaker.WithRand(jitter.Float64),
		breaker.OnTransition(func(ev breaker.Event) {
			if ev.From == breaker.Closed && ev.To == breaker.Open {
				s.trips++
				if at := ev.Time.Sub(s.start); s.faultAt >= 0 && at >= s.faultAt && s.firstOpen < 0 {
					s.firstOpen = at
				}
			}
		}))
	if err != nil {
		return nil, err
	}
	s.b = b
	s.nextBurst = -1
	if t.Bursts.PerDay > 0 {
		s.nextBurst = offset + s.burstGap()
	}
	return s, nil
}

func (s *sim) burstGap() time.Duration {
	return time.Duration(s.rng.ExpFloat64() / s.t.Bursts.PerDay * 86400 * float64(time.Second))
}

// now is the simulation's time since midnight of its first day.
func (s *sim) now() time.Duration { return s.clk.now.Sub(s.start) }

// errorRatio is the healthy failure ratio at time at: the period's, or the
// burst's during an error burst.
func (s *sim) errorRatio(at time.Duration, base float64) float64 {
	for s.nextBurst >= 0 && s.nextBurst <= at {
		s.burstEnd = s.nextBurst + s.t.Bursts.Length
		s.nextBurst += s.t.Bursts.Length + s.burstGap()
	}
	if at < s.burstEnd {
		return s.t.Bursts.ErrorRatio
	}
	return base
}

// run makes calls until end (since midnight), or until the breaker opens
// in the fault when stopAtOpen. base is the failure ratio a healthy call
// sees at a period's error ratio e: e plus the healthy calls the timeout
// cuts.
func (s *sim) run(end time.Duration, stopAtOpen bool, maxCalls int) {
	ctx := context.Background()
	batch := max(s.t.Batch, 1)
	lat := fitLatency(s.t)
	te := effectiveTimeout(s.p, s.t)
	cut := lat.over(te)
	for s.calls < maxCalls {
		at := s.now()
		per := s.t.periodAt(at)
		rate := per.Rate / batch
		var next time.Duration
		if rate > 0 {
			next = at + time.Duration(s.rng.ExpFloat64()/rate*float64(time.Second))
		} else {
			next = end + 1
		}
		// A rate changes at the period's end: an arrival drawn past it
		// is drawn again from there (arrivals have no memory).
		if pe := per.end; pe > at && next > pe && pe < end {
			s.settle(pe)
			s.clk.now = s.start.Add(pe)
			continue
		}
		if next >= end {
			s.settle(end)
			s.clk.now = s.start.Add(end)
			return
		}
		s.settle(next)
		s.clk.now = s.start.Add(next)
		if stopAtOpen && s.firstOpen >= 0 {
			return
		}
		n := 1
		if batch > 1 {
			// Batch sizes are geometric with mean batch.
			n = 1 + int(math.Floor(math.Log(1-s.rng.Float64())/math.Log(1-1/batch)))
		}
		e := s.errorRatio(next, per.ErrorRatio)
		fail := e + (1-e)*cut
		for range n {
			s.call(ctx, next, fail)
			if stopAtOpen && s.firstOpen >= 0 {
				return
			}
		}
	}
}

// call makes one call at time at, failing at the healthy ratio fail, or as
// the fault says once it has begun.
func (s *sim) call(ctx context.Context, at time.Duration, fail float64) {
	s.calls++
	_, done, err := s.b.Allow(ctx)
	if err != nil {
		return
	}
	u := s.rng.Float64()
	if s.faultAt >= 0 && at >= s.faultAt {
		switch {
		case u < s.fault.Errors:
			done(errSimulated)
			return
		case u < s.fault.Errors+s.fault.Timeouts:
			if s.te > 0 {
				s.hangs = append(s.hangs, simHang{at + s.te, done})
			}
			return
		}
		u = s.rng.Float64()
	}
	if u < fail {
		done(errSimulated)
		return
	}
	done(nil)
}

// settle ends the hanging calls due by until, in order.
func (s *sim) settle(until time.Duration) {
	i := 0
	for ; i < len(s.hangs) && s.hangs[i].at <= until; i++ {
		s.clk.now = s.start.Add(s.hangs[i].at)
		s.hangs[i].done(context.DeadlineExceeded)
		s.hangs[i].done = nil
	}
	if i > 0 {
		s.hangs = append(s.hangs[:0], s.hangs[i:]...)
	}
}

// simBudget is the most calls one simulated estimate makes by default
// (docs/internals.md, "simBudget", gives its cost).
const simBudget = 4_000_000

// simFalseTrips simulates up to span of healthy traffic t under p (from
// midnight, through the periods of its profile and its error bursts) and
// returns the breaker's trips and the simulated time they were counted
// over, which is shorter than span when the budget of calls runs out,
// and the calls it made.
func simFalseTrips(p breaker.Policy, t Traffic, span time.Duration, seed uint64, budget int) (int, time.Duration, int, error) {
	s, err := newSim(p, t, seed, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	s.run(span, false, budget)
	return s.trips, s.now(), s.calls, nil
}

// simTimeToTrip runs trials of a fault f in steady traffic t under p: a
// lead of healthy traffic (a window and a random share of another, so
// that the fault begins anywhere in a bucket), then the fault for up to
// horizon. It returns each trial's time to trip, +Inf for a trial that did
// not trip within the horizon; fewer trials than asked when the budget of
// calls runs out, but at least one; and the calls it made.
func simTimeToTrip(p breaker.Policy, t Traffic, f Fault, trials int, horizon time.Duration, seed uint64, budget int) ([]float64, int, error) {
	t.Profile, t.Bursts = nil, Bursts{}
	te := effectiveTimeout(p, t)
	out := make([]float64, 0, trials)
	used := 0
	for i := range trials {
		s, err := newSim(p, t, seed+uint64(i)*0x9e3779b97f4a7c15, 0)
		if err != nil {
			return nil, used, err
		}
		lead := p.Window + time.Duration(s.rng.Float64()*float64(p.Window))
		s.fault, s.faultAt, s.te = f, lead, te
		s.run(lead, false, budget-used)
		if s.b.State() != breaker.Closed && s.calls < budget-used {
			// Tripped by the healthy traffic before the fault: it
			// refuses the fault's calls from its start.
			used += s.calls
			out = append(out, 0)
			continue
		}
		s.run(lead+horizon, true, budget-used)
		used += s.calls
		if s.firstOpen >= 0 {
			out = append(out, (s.firstOpen - lead).Seconds())
		} else if s.now() >= lead+horizon {
			out = append(out, math.Inf(1))
		} else {
			break // the budget ran out within the trial
		}
		if used >= budget {
			break
		}
	}
	return out, used, nil
}
