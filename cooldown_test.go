package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Cooldown: min(OpenFor·2^doublings, MaxOpenFor); the
// doublings rise on a failed probe or a trip within MaxOpenFor of the last
// close, and return to 0 after MaxOpenFor closed.
func TestCooldown_DoublesCapsAndDecays(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	cooldowns := func() []time.Duration {
		var out []time.Duration
		for _, e := range h.eventLog() {
			if e.To == Open {
				out = append(out, e.Cooldown)
			}
		}
		return out
	}
	failProbe := func() {
		require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	}
	now := time.Duration(0)
	h.trip() // 30 s
	now += 30 * time.Second
	h.at(now)
	failProbe() // 60 s
	now += 60 * time.Second
	h.at(now)
	failProbe() // 120 s
	now += 120 * time.Second
	h.at(now)
	failProbe() // capped at 120 s
	now += 120 * time.Second
	h.at(now)
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second, 120 * time.Second}, cooldowns())

	// A trip within MaxOpenFor of the close keeps doubling: flapping.
	now += 2*time.Minute - time.Nanosecond
	h.at(now)
	h.trip()
	assert.Equal(t, 120*time.Second, cooldowns()[4])
	now += 120 * time.Second
	h.at(now)
	h.calls(3, nil)
	h.requireState(Closed)

	// Stable for MaxOpenFor: back to OpenFor.
	now += 2 * time.Minute
	h.at(now)
	h.trip()
	assert.Equal(t, 30*time.Second, cooldowns()[5])
	assert.Equal(t, 0, h.eventLog()[len(h.eventLog())-1].Doublings)
}

func TestCooldown_TripSoonAfterACloseDoubles(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.at(31 * time.Second)
	h.trip()
	ev := h.eventLog()
	assert.Equal(t, 60*time.Second, ev[len(ev)-1].Cooldown)
	assert.Equal(t, 1, ev[len(ev)-1].Doublings)
}

// behaviour.md §2 Policy, Jitter: each cooldown is scaled by a factor in
// [1-J, 1+J] drawn from the injected source.
func TestCooldown_JitterScalesByTheDrawnFactor(t *testing.T) {
	for _, c := range []struct {
		draw float64
		want time.Duration
	}{
		{0, 24 * time.Second},    // 1 - 0.2
		{0.25, 27 * time.Second}, // 0.9
		{0.5, 30 * time.Second},  // 1
		{0.999, 35988 * time.Millisecond},
		{1.5, 30 * time.Second}, // out of range: no jitter
		{-1, 30 * time.Second},
	} {
		draw := c.draw
		h := newHarness(t, DefaultPolicy(), WithRand(func() float64 { return draw }))
		h.trip()
		got := h.eventLog()[0].Cooldown
		assert.InDelta(t, float64(c.want), float64(got), float64(time.Millisecond), "draw %v", c.draw)
		h.at(got - 1)
		h.requireState(Open)
		h.at(got)
		h.requireState(HalfOpen)
	}
}

func TestCooldown_ZeroJitterIsExact(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Jitter = 0 }), WithRand(func() float64 { return 0.99 }))
	h.trip()
	assert.Equal(t, 30*time.Second, h.eventLog()[0].Cooldown)
}

// A jitter source (WithRand) that panics counts as no jitter: the trip is
// made with the exact cooldown, the lock is free, and the breaker recovers.
// Regression (548e873): the panic left the lock held; the next call hung.
func TestCooldown_APanickingJitterSourceLeavesTheBreakerUsable(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithRand(func() float64 { panic("rand bug") }))
	h.calls(19, errBoom)
	_ = h.call(errBoom)
	require.True(t, h.b.mu.TryLock(), "the lock is free")
	h.b.mu.Unlock()
	h.requireState(Open)
	assert.Equal(t, 30*time.Second, h.eventLog()[0].Cooldown, "no jitter")
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)
}

// A breaker stable for MaxOpenFor starts its doubling over, however it
// opens next: one that reopened once (level 1), was forced closed for
// MaxOpenFor and then forced open is at level 0, so a failed probe after
// the release doubles OpenFor once.
// Regression (a0a3fc5): the level stayed 1; the probe waited 4×OpenFor.
func TestCooldown_AForcedOpenAfterAStableSpellStartsTheDoublingOver(t *testing.T) {
	p := policy(func(p *Policy) { p.Jitter = 0; p.MinRequests = 1; p.StrictProbes = true })
	h := newHarness(t, p)
	h.trip()
	h.add(p.OpenFor)
	h.calls(1, errBoom) // the probe fails: level 1
	ev := h.eventLog()
	require.Equal(t, 2*p.OpenFor, ev[len(ev)-1].Cooldown)
	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.add(p.MaxOpenFor)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	ev = h.eventLog()
	assert.Equal(t, 0, ev[len(ev)-1].Doublings, "stable for MaxOpenFor: doublings back to 0")
	require.NoError(t, h.b.SetMode(ModeAuto)) // half-open
	h.calls(1, errBoom)                       // the probe fails: level 1
	ev = h.eventLog()
	assert.Equal(t, 2*p.OpenFor, ev[len(ev)-1].Cooldown)
}
