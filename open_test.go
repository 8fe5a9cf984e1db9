package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Open: refusals carry name, reason, tripping snapshot and
// retry-after, and match ErrOpen.
func TestOpen_RefusesWithAnOpenError(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(12, nil)
	h.calls(8, context.DeadlineExceeded)
	h.calls(2, errBoom) // 10/22 < 0.5, still closed
	h.requireState(Closed)
	h.calls(2, errBoom) // 12/24
	h.requireState(Open)

	h.add(10 * time.Second)
	called := false
	err := h.b.Do(context.Background(), func(context.Context) error { called = true; return nil })
	assert.False(t, called, "fn must not run while open")
	require.ErrorIs(t, err, ErrOpen)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "inventory.GetStock", oe.Name)
	assert.Equal(t, Open, oe.State)
	assert.Equal(t, ReasonErrorRatio, oe.Reason)
	assert.Equal(t, Snapshot{Counted: 24, Failures: 12, Timeouts: 8}, oe.Trip.Window)
	assert.Equal(t, 20*time.Second, oe.RetryAfter())
	assert.Equal(t, h.t0, oe.Since)
	assert.Equal(t, h.t0.Add(30*time.Second), oe.Until)
	assert.Equal(t, "breaker: inventory.GetStock is open (error_ratio, 12/24 failed, 8 timeouts, retry in 20s)", err.Error())
}

// behaviour.md §4 Open: refusals are counted apart, never in the
// window, so they cannot keep a recovered breaker from closing.
func TestOpen_RefusalsNeverEnterTheWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	before := h.b.Snapshot()
	for i := 0; i < 500; i++ {
		require.ErrorIs(t, h.call(nil), ErrOpen)
	}
	assert.Equal(t, before, h.b.Snapshot())
	c := h.b.Counters()
	assert.Equal(t, uint64(500), c.Rejected)
	assert.Equal(t, uint64(20), c.Admitted)
}

// behaviour.md §4 Open: the cooldown ends lazily, exactly at OpenFor.
func TestOpen_CooldownEndsAtItsExactNanosecond(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30*time.Second - 1)
	require.ErrorIs(t, h.call(nil), ErrOpen, "one nanosecond before the cooldown ends")
	h.requireState(Open)
	h.at(30 * time.Second)
	bl := h.start(context.Background())
	assert.True(t, bl.admitted, "the first call after the cooldown is admitted")
	assert.True(t, bl.probe, "and it is a probe")
	h.requireState(HalfOpen)
	require.NoError(t, bl.finish(nil))
}

// behaviour.md §4 Open: the reason and window that began an outage stay
// for the whole outage. A breaker that tripped on error_ratio and then
// failed a probe still says error_ratio as its trip reason, with the
// window that tripped it, while Reason says what reopened it; the
// refusal's message leads with the cause.
func TestOpen_TripReasonStaysForTheWholeOutage(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.StrictProbes = true }))
	h.calls(10, nil)
	h.calls(10, context.DeadlineExceeded) // 10/20: error_ratio
	h.requireState(Open)
	st := h.b.Status()
	assert.Equal(t, ReasonErrorRatio, st.Outage.Trip.Reason)
	assert.Equal(t, ReasonErrorRatio, st.Reason)
	assert.Equal(t, 30*time.Second, st.Cooldown)

	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(errBoom), errBoom) // a failed probe reopens it
	h.requireState(Open)
	st = h.b.Status()
	assert.Equal(t, ReasonErrorRatio, st.Outage.Trip.Reason, "the cause of the outage")
	assert.Equal(t, ReasonProbeFailed, st.Reason, "what reopened it")
	assert.Equal(t, Snapshot{Counted: 20, Failures: 10, Timeouts: 10}, st.Outage.Trip.Window)
	assert.Equal(t, 60*time.Second, st.Cooldown, "the doubled cooldown that is running")

	err := h.call(nil)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, ReasonErrorRatio, oe.Trip.Reason)
	assert.Equal(t, ReasonProbeFailed, oe.Reason)
	assert.Equal(t, "breaker: inventory.GetStock is open (error_ratio, 10/20 failed, 10 timeouts; then probe_failed, retry in 1m0s)", err.Error())

	h.at(90 * time.Second) // half-open: the cause is still the trip's
	h.requireState(HalfOpen)
	st = h.b.Status()
	assert.Equal(t, ReasonErrorRatio, st.Outage.Trip.Reason)
	assert.Zero(t, st.Cooldown)

	for range 3 {
		require.NoError(t, h.call(nil))
	}
	h.requireState(Closed)
	st = h.b.Status()
	require.NotNil(t, st.Outage, "closed, the outage not yet settled")
	assert.Equal(t, ReasonErrorRatio, st.Outage.Trip.Reason, "the outage keeps its cause until it settles")
	assert.Empty(t, st.Reason)
	h.add(h.b.Policy().MaxOpenFor)
	assert.Nil(t, h.b.Status().Outage, "settled after MaxOpenFor closed")
}

// behaviour.md §4 Manual control: forcing a closed breaker open makes
// forced_open the cause; forcing an open one keeps the rule that tripped it.
func TestOpen_ForcedOpenTripReason(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, ReasonForcedOpen, h.b.Status().Outage.Trip.Reason)

	h = newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	st := h.b.Status()
	assert.Equal(t, ReasonErrorRatio, st.Outage.Trip.Reason)
	assert.Equal(t, ReasonForcedOpen, st.Reason)
	assert.Zero(t, st.Cooldown, "a forced open has no cooldown")
}

// behaviour.md §4 Cooldown: a policy pushed during an outage that lowers
// OpenFor or MaxOpenFor cuts the running cooldown to what it gives, with
// the same jitter, from when the cooldown began. A breaker that had doubled
// to a 2m cooldown and got MaxOpenFor 20s probes 20s after it reopened,
// not 2m after.
func TestOpen_PolicyPushCutsTheRunningCooldown(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.StrictProbes = true }))
	h.trip()
	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(errBoom), errBoom) // reopened for 60s
	h.at(90 * time.Second)
	require.ErrorIs(t, h.call(errBoom), errBoom) // reopened for 120s
	require.Equal(t, 2*time.Minute, h.b.Status().Cooldown)

	h.at(95 * time.Second)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) {
		p.StrictProbes = true
		p.OpenFor = 10 * time.Second
		p.MaxOpenFor = 20 * time.Second
	})))
	st := h.b.Status()
	assert.Equal(t, 20*time.Second, st.Cooldown)
	require.NotNil(t, st.Until)
	assert.Equal(t, h.t0.Add(110*time.Second), *st.Until)
	h.at(110*time.Second - 1)
	h.requireState(Open)
	h.at(110 * time.Second)
	h.requireState(HalfOpen)
}

// behaviour.md §4 Cooldown: a push never lengthens a running cooldown, and
// one whose cut cooldown has already ended lets the next call probe.
func TestOpen_PolicyPushNeverLengthensTheCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.OpenFor = time.Minute; p.MaxOpenFor = 5 * time.Minute })))
	assert.Equal(t, 30*time.Second, h.b.Status().Cooldown)
	h.at(30 * time.Second)
	h.requireState(HalfOpen)

	h = newHarness(t, DefaultPolicy())
	h.trip()
	h.at(20 * time.Second)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.OpenFor = 5 * time.Second; p.MaxOpenFor = 10 * time.Second })))
	h.requireState(HalfOpen)
}
