package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Outages. Each test drives traffic at a steady rate on
// the mock clock, as a service would send it.

// manualClock is a clock the test moves by hand: a drive of minutes of
// traffic makes tens of thousands of steps, which clock.Mock makes slowly.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time { return c.now }

// driven is a breaker on a manualClock, with the harness's draw and event
// log.
type driven struct {
	*harness
	mc *manualClock
}

func newDriven(t *testing.T, p Policy) *driven {
	h := &harness{t: t}
	d := &driven{harness: h, mc: &manualClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	h.t0 = d.mc.now
	b, err := New("inventory.GetStock", p, WithClock(d.mc), WithRand(func() float64 { return 0.5 }),
		OnTransition(func(e Event) {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}))
	require.NoError(t, err)
	h.b = b
	return d
}

// drive sends one call every step until the clock reads t0+until, each
// returning what fn says for the instant it is made.
func (d *driven) drive(step, until time.Duration, fn func(now time.Duration) error) {
	for d.mc.now.Sub(d.t0) < until {
		_ = d.call(fn(d.mc.now.Sub(d.t0)))
		d.mc.now = d.mc.now.Add(step)
	}
}

// A downstream that answers every call with an error for 40 minutes,
// StrictProbes off: every cooldown ends with three probes that pass on
// their answers, the breaker closes and trips again a second later. It is
// one outage from the first trip on, whose length grows across the
// closes, so an alert graded on it reaches P2 at 10 minutes and P1 at 30.
// Regression: the open duration started again at every close, and a
// dependency down for an hour was never graded past P3.
func TestOutage_AHardErrorOutageWithAnsweredProbesIsOneOutage(t *testing.T) {
	h := newDriven(t, DefaultPolicy())
	failing := func(time.Duration) error { return errBoom }
	h.drive(50*time.Millisecond, 2*time.Second, failing)
	require.Equal(t, Open, h.b.State())
	first := h.b.Status().Outage
	require.NotNil(t, first)
	since := first.Since
	assert.Equal(t, Trip{Reason: ReasonErrorRatio, Window: Snapshot{Counted: 20, Failures: 20}}, first.Trip)

	for _, mark := range []time.Duration{10 * time.Minute, 30 * time.Minute, 40 * time.Minute} {
		h.drive(50*time.Millisecond, mark, failing)
		st := h.b.Status()
		require.NotNil(t, st.Outage, "at %v", mark)
		assert.Equal(t, since, st.Outage.Since, "one outage at %v", mark)
		assert.GreaterOrEqual(t, st.Outage.Duration, mark-2*time.Second, "its length at %v counts the closes", mark)
	}
	o := h.b.Status().Outage
	closes := 0
	for _, e := range h.eventLog() {
		if e.To == Closed {
			closes++
			require.NotNil(t, e.Outage, "a close inside the outage carries it")
			assert.Equal(t, since, e.Outage.Since)
		}
	}
	assert.GreaterOrEqual(t, closes, 4, "the probes passed on errors and closed it again and again")
	assert.Equal(t, closes+1, o.Trips, "every close was followed by a trip")
	assert.Equal(t, 3*closes, o.ProbesPassedOnError, "every pass was an answered error")
	assert.Zero(t, o.ProbesFailed)
	assert.Equal(t, ReasonErrorRatio, o.Trip.Reason, "the cause stays the first trip's")
	assert.Positive(t, o.Refused)
	assert.Equal(t, h.b.Counters().Rejected, o.Refused, "every refusal belongs to it")
}

// A downstream that recovers, then falls again while the breaker is still
// settling: one outage with several trips and no probe passed on an
// error. Once it has stayed closed for MaxOpenFor, a new fall is a new
// outage.
func TestOutage_AFlappingDownstreamKeepsOneOutageUntilItSettles(t *testing.T) {
	h := newDriven(t, DefaultPolicy())
	// Down for 5 s in every 50, long enough to trip a window of 5 s; the
	// cooldown outlasts the downtime, so the probes succeed.
	flapping := func(now time.Duration) error {
		if now%(50*time.Second) < 5*time.Second {
			return errBoom
		}
		return nil
	}
	h.drive(50*time.Millisecond, 5*time.Minute, flapping)
	o := h.b.Status().Outage
	require.NotNil(t, o)
	assert.Equal(t, h.eventLog()[0].Time, o.Since, "since the first trip")
	assert.GreaterOrEqual(t, o.Trips, 3)
	assert.Zero(t, o.ProbesPassedOnError, "the probes found it well")
	assert.Positive(t, o.ProbesPassed)

	h.drive(50*time.Millisecond, 10*time.Minute, func(time.Duration) error { return nil })
	assert.Nil(t, h.b.Status().Outage, "settled")
	h.drive(50*time.Millisecond, 10*time.Minute+5*time.Second, func(time.Duration) error { return errBoom })
	o = h.b.Status().Outage
	require.NotNil(t, o, "%v", h.transitions())
	assert.Equal(t, 1, o.Trips, "a new outage")
	assert.True(t, o.Since.After(h.t0.Add(10*time.Minute)))
	assert.Zero(t, o.ProbesPassed)
}

// A clean recovery: the outage stays in Status while the breaker settles,
// recovering, and is gone once it has stayed closed for MaxOpenFor; the
// close's event says what the outage cost.
func TestOutage_ACleanRecoverySettlesAfterMaxOpenFor(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)
	o := h.b.Status().Outage
	require.NotNil(t, o)
	assert.True(t, o.Recovering())
	assert.Equal(t, h.t0.Add(30*time.Second), o.ClosedAt)
	assert.Equal(t, h.t0.Add(30*time.Second+2*time.Minute), o.SettlesAt)
	assert.Equal(t, 30*time.Second, o.Duration)
	ev := h.eventLog()
	closing := ev[len(ev)-1]
	require.Equal(t, Closed, closing.To)
	require.NotNil(t, closing.Outage)
	assert.Equal(t, Outage{
		Since: h.t0, Duration: 30 * time.Second, Trip: o.Trip, Trips: 1, Refused: 1, ProbesPassed: 3,
		ClosedAt: h.t0.Add(30 * time.Second), SettlesAt: h.t0.Add(150 * time.Second),
	}, *closing.Outage)

	h.at(150*time.Second - time.Nanosecond)
	assert.NotNil(t, h.b.Status().Outage, "not yet settled")
	h.at(150 * time.Second)
	assert.Nil(t, h.b.Status().Outage, "settled")
	h.trip()
	assert.Equal(t, 30*time.Second, h.b.Status().Cooldown, "the doubling started over")
	assert.Equal(t, 1, h.b.Status().Outage.Trips)
}

// A process that restarts knows nothing of the outage before it: its
// first trip begins a new outage, with nothing counted from the earlier
// process.
func TestOutage_ARestartedProcessBeginsANewOutage(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	require.Equal(t, 1, h.b.Status().Outage.ProbesFailed)

	// The restart: a new breaker on the same clock, later.
	h.at(40 * time.Second)
	restarted, err := New(h.b.Name(), DefaultPolicy(), WithClock(h.clk))
	require.NoError(t, err)
	assert.Nil(t, restarted.Status().Outage)
	for range 20 {
		_ = restarted.Do(context.Background(), func(context.Context) error { return errBoom })
	}
	o := restarted.Status().Outage
	require.NotNil(t, o)
	assert.Equal(t, h.t0.Add(40*time.Second), o.Since)
	assert.Equal(t, 1, o.Trips)
	assert.Zero(t, o.ProbesFailed, "no probe of the earlier process")
	assert.Zero(t, o.Refused)
}

// A Reset ends the outage: the next trip begins a new one.
func TestOutage_ResetEndsIt(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.b.Reset()
	assert.Nil(t, h.b.Status().Outage)
	h.add(time.Second)
	h.trip()
	assert.Equal(t, h.t0.Add(time.Second), h.b.Status().Outage.Since)
}

// Every view leads with the evidence of the rule that tripped: the slow
// calls for the slow rule, the run for the consecutive rule.
// Regression: a slow trip read "0/169 failed, 0 timeouts".
func TestOutage_TheTripCarriesTheEvidenceOfItsRule(t *testing.T) {
	slow := newHarness(t, policy(func(p *Policy) {
		p.SlowCall, p.SlowRatio, p.MinRequests = 200*time.Millisecond, 0.5, 10
	}))
	for range 10 {
		_ = slow.b.Do(context.Background(), func(context.Context) error {
			slow.add(400 * time.Millisecond)
			return nil
		})
	}
	slow.requireState(Open)
	trip := slow.b.Status().Outage.Trip
	assert.Equal(t, Trip{Reason: ReasonSlowRatio, Window: Snapshot{Counted: 10, Slow: 10}, SlowCall: 200 * time.Millisecond}, trip)
	assert.Equal(t, "slow_ratio: 10 of 10 calls slower than 200ms (0 failed)", trip.String())
	err := slow.call(nil)
	assert.Contains(t, err.Error(), "(slow_ratio, 10/10 slower than 200ms")

	run := newHarness(t, policy(func(p *Policy) { p.ConsecutiveFailures = 5 }))
	run.calls(3, nil)
	run.calls(5, errBoom)
	run.requireState(Open)
	trip = run.b.Status().Outage.Trip
	assert.Equal(t, uint64(5), trip.Run)
	assert.Equal(t, "consecutive_failures: 5 failures in a row (5 of 8 calls failed)", trip.String())
	assert.Contains(t, run.call(nil).Error(), "(consecutive_failures, 5 failures in a row")

	ratio := newHarness(t, DefaultPolicy())
	ratio.calls(10, nil)
	ratio.calls(5, context.DeadlineExceeded)
	ratio.calls(5, errBoom)
	assert.Equal(t, "error_ratio: 10 of 20 calls failed, 5 of them timeouts", ratio.b.Status().Outage.Trip.String())
	assert.Equal(t, "forced_open", Trip{Reason: ReasonForcedOpen}.String())
}

// behaviour.md §4 Half-open: a probe of a breaker that the slow-call rule
// opened fails when it is slower than SlowCall, whatever StrictProbes
// says; a fast one passes.
// Regression: slow probes passed, and the rule tripped the breaker again
// 0.4 s after each close (four false closes in 40 s).
func TestHalfOpen_ASlowProbeFailsABreakerTheSlowRuleOpened(t *testing.T) {
	p := policy(func(p *Policy) { p.SlowCall, p.SlowRatio, p.MinRequests = 200*time.Millisecond, 0.5, 10 })
	h := newHarness(t, p)
	taking := func(d time.Duration) error {
		return h.b.Do(context.Background(), func(context.Context) error {
			h.add(d)
			return nil
		})
	}
	for range 10 {
		require.NoError(t, taking(400*time.Millisecond))
	}
	h.requireState(Open)
	h.at(h.b.Status().Cooldown + 4*time.Second)
	require.NoError(t, taking(400*time.Millisecond)) // the downstream answered, too slowly
	h.requireState(Open)
	assert.Equal(t, ReasonProbeFailed, h.lastReason())
	assert.Equal(t, 1, h.b.Status().Outage.ProbesFailed)

	h.add(h.b.Status().Cooldown)
	for range 3 {
		require.NoError(t, taking(100*time.Millisecond))
	}
	h.requireState(Closed)

	// An error-ratio trip: a slow probe passes, as the design says.
	e := newHarness(t, p)
	e.trip()
	e.at(30 * time.Second)
	for range 3 {
		require.NoError(t, e.b.Do(context.Background(), func(context.Context) error {
			e.add(400 * time.Millisecond)
			return nil
		}))
	}
	e.requireState(Closed)
}

// behaviour.md §4 Cooldown: a policy set while the breaker is open cuts
// the running cooldown only to what that policy gives it, with its own
// jitter at the running cooldown's draw, and never below that.
// Regression: after pushing open_for 5m (left alone, as promised), a push
// of open_for 1m cut a 30 s cooldown to 6 s (the ratio of the last two
// policies), and open_for 1m with jitter 0 gave 1m12s (the old jitter).
func TestSetPolicy_ACutCooldownIsWhatTheNewPolicyGives(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Jitter = 0 }))
	h.trip()
	require.Equal(t, 30*time.Second, h.b.Status().Cooldown)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.OpenFor, p.MaxOpenFor, p.Jitter = 5*time.Minute, 10*time.Minute, 0 })))
	assert.Equal(t, 30*time.Second, h.b.Status().Cooldown, "a longer cooldown waits for the next one")
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.OpenFor, p.MaxOpenFor, p.Jitter = time.Minute, 10*time.Minute, 0 })))
	assert.Equal(t, 30*time.Second, h.b.Status().Cooldown, "1 m is no cut of 30 s")

	// A draw near the top: the jitter lengthens the cooldown by 19.6%.
	j := newHarness(t, policy(func(p *Policy) { p.OpenFor, p.MaxOpenFor = 2*time.Minute, 4*time.Minute }),
		WithRand(func() float64 { return 0.99 }))
	j.trip()
	require.Equal(t, time.Duration(float64(2*time.Minute)*1.196), j.b.Status().Cooldown)
	require.NoError(t, j.b.SetPolicy(policy(func(p *Policy) { p.OpenFor, p.MaxOpenFor, p.Jitter = time.Minute, 4*time.Minute, 0 })))
	assert.Equal(t, time.Minute, j.b.Status().Cooldown, "the new policy's jitter: none")
	require.NoError(t, j.b.SetPolicy(policy(func(p *Policy) { p.OpenFor, p.MaxOpenFor, p.Jitter = 30*time.Second, 4*time.Minute, 0.2 })))
	assert.Equal(t, time.Duration(float64(30*time.Second)*1.196), j.b.Status().Cooldown, "its jitter at the same draw")
	j.at(time.Duration(float64(30*time.Second)*1.196) + time.Second)
	j.requireState(HalfOpen)
}

// Event.Doublings counts the doublings in effect: it stops rising once
// the cooldown has reached MaxOpenFor.
// Regression: it reached 5 with the cooldown capped at the third.
func TestCooldown_DoublingsStopAtTheCap(t *testing.T) {
	h := newHarness(t, DefaultPolicy()) // 30 s doubling to 2 m
	h.trip()
	var got []int
	var cds []time.Duration
	for range 5 {
		h.add(h.b.Status().Cooldown)
		require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
		ev := h.eventLog()
		got = append(got, ev[len(ev)-1].Doublings)
		cds = append(cds, ev[len(ev)-1].Cooldown)
	}
	assert.Equal(t, []int{1, 2, 2, 2, 2}, got)
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}, cds)
}

// behaviour.md §4 Outages: the end of a forced open starts the outage
// afresh, its length and its counts from the release, keeping its cause.
// Regression: its start moved to the release while its refusals and
// trips still counted from the first trip.
func TestOutage_AReleaseStartsItsCountsAgain(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	for range 5 {
		require.ErrorIs(t, h.call(nil), ErrOpen)
	}
	h.at(11 * time.Minute)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.at(13 * time.Minute)
	require.NoError(t, h.b.SetMode(ModeAuto))
	o := h.b.Status().Outage
	require.NotNil(t, o)
	assert.Equal(t, h.t0.Add(13*time.Minute), o.Since)
	assert.Zero(t, o.Refused, "refused since the release")
	assert.Zero(t, o.Trips, "no trip since the release")
	assert.Equal(t, ReasonErrorRatio, o.Trip.Reason, "the cause is kept")
}

// A maintenance hold begins an outage with no evidence; the first real
// trip inside it (after the release, before it has settled) becomes its
// cause, so every view leads with that rule's evidence. Regression: the
// views said "opened on forced_open" of an error-ratio trip.
func TestOutage_ATripAfterAReleasedHoldIsItsCause(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.at(5 * time.Minute)
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.calls(3, nil)
	h.requireState(Closed)
	h.at(5*time.Minute + 30*time.Second)
	h.trip()
	o := h.b.Status().Outage
	require.NotNil(t, o)
	assert.Equal(t, ReasonErrorRatio, o.Trip.Reason, "got %q", o.Trip.String())
	assert.Equal(t, Snapshot{Counted: 20, Failures: 20}, o.Trip.Window)
	assert.Equal(t, h.t0.Add(5*time.Minute), o.Since)
	assert.Equal(t, 1, o.Trips)
}
