package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Closed: below MinRequests counted calls, nothing trips.
func TestClosed_MinRequestsGate_19Against20(t *testing.T) {
	runSteps(t, newHarness(t, DefaultPolicy()), []step{
		{at: 0, fail: 19, want: Closed, label: "19 failures, 100%, under the gate"},
		{at: time.Second, fail: 1, want: Open, label: "20th failure"},
	})
}

// behaviour.md §4 Closed: the ratio rule trips at exactly ErrorRatio.
func TestClosed_TripsWithTheRatioExactlyAtTheThreshold(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(10, nil)
	h.calls(9, errBoom)
	h.requireState(Closed) // 9/19
	h.calls(1, errBoom)    // 10/20 = 0.5
	h.requireState(Open)
	ev := h.eventLog()
	require.Len(t, ev, 1)
	assert.Equal(t, ReasonErrorRatio, ev[0].Reason)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 10}, ev[0].Snapshot)
}

func TestClosed_JustBelowTheRatioDoesNotTrip(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ErrorRatio = 0.3 }))
	h.calls(71, nil)
	h.calls(29, errBoom) // 29/100 < 0.3
	h.requireState(Closed)
	h.calls(1, errBoom) // 30/101 < 0.3
	h.requireState(Closed)
	h.calls(1, nil)
	h.calls(1, errBoom) // 31/103 = 0.30097 >= 0.3
	h.requireState(Open)
}

// behaviour.md §2 Policy, MinRequests: a low-traffic method never reaches
// the gate and never trips, even at 100% errors; for so thin a method,
// opening on a few errors does more harm than missing a fault.
func TestClosed_LowTrafficNeverTrips(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	for i := 0; i < 360; i++ { // 3 failing calls a second for two minutes
		h.at(time.Duration(i) * time.Second / 3)
		h.calls(1, errBoom)
	}
	h.requireState(Closed)
	assert.Less(t, h.b.Snapshot().Counted, uint64(defaultMinRequests))
}

// behaviour.md §2 Policy: the optional rules are OR-ed with the ratio
// rule.
func TestClosed_ErrorCountRule(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ErrorCount = 5; p.MinRequests = 10 }))
	h.calls(100, nil)
	h.calls(4, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom) // 5 failures, ratio 5/105
	h.requireState(Open)
	assert.Equal(t, ReasonErrorCount, h.eventLog()[0].Reason)
}

func TestClosed_ConsecutiveFailuresRule(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ConsecutiveFailures = 3; p.MinRequests = 10 }))
	h.calls(50, nil)
	h.calls(2, errBoom)
	h.calls(1, nil) // breaks the run
	h.calls(2, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutiveFailures, h.eventLog()[0].Reason)
}

func TestClosed_SlowCallRule(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) {
		p.SlowCall = 300 * time.Millisecond
		p.SlowRatio = 0.5
	}))
	slow := func() error {
		return h.b.Do(context.Background(), func(context.Context) error {
			h.add(301 * time.Millisecond) // the call takes longer than SlowCall
			return nil
		})
	}
	h.calls(10, nil)
	for i := 0; i < 9; i++ {
		require.NoError(t, slow())
	}
	h.requireState(Closed)
	require.NoError(t, slow()) // 10 slow of 20, all of them successes
	h.requireState(Open)
	ev := h.eventLog()[0]
	assert.Equal(t, ReasonSlowRatio, ev.Reason)
	assert.Equal(t, uint64(10), ev.Snapshot.Slow)
	assert.Zero(t, ev.Snapshot.Failures)
}

func TestClosed_CallExactlyAtSlowCallIsNotSlow(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.SlowCall = time.Second; p.SlowRatio = 1 }))
	for i := 0; i < 30; i++ {
		require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
			h.add(time.Second)
			return nil
		}))
	}
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Slow)
}

// behaviour.md §3 Outcomes: with 60% slow calls the error ratio alone was
// 8% and the breaker never opened. Timeouts must count as failures.
func TestClosed_TimeoutsCountAsFailures(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(4, errBoom)
	h.calls(4, nil)
	h.calls(12, context.DeadlineExceeded) // 16/20 failures, 12 of them timeouts
	h.requireState(Open)
	ev := h.eventLog()[0]
	assert.Equal(t, Snapshot{Counted: 20, Failures: 16, Timeouts: 12}, ev.Snapshot)
}

func TestClosed_WindowSlidesOldFailuresOut(t *testing.T) {
	runSteps(t, newHarness(t, DefaultPolicy()), []step{
		{at: 0, fail: 15, want: Closed, label: "15 failures"},
		{at: 5 * time.Second, ok: 5, fail: 0, want: Closed, label: "the failures aged out"},
		{at: 5*time.Second + time.Millisecond, fail: 14, want: Closed, label: "14/19"},
		{at: 6 * time.Second, fail: 1, want: Open, label: "15/20"},
	})
}

func TestClosed_APanicCountsAsAFailureAndThePanicGoesOn(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(19, errBoom)
	assert.PanicsWithValue(t, "bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { panic("bug") })
	})
	h.requireState(Open)
}
