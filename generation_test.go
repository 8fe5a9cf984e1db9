package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Generations: a result from an earlier episode never
// changes the current one.
func TestGenerations_AResultFromAnEarlierEpisodeIsIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	slowClosed := h.start(context.Background()) // admitted while closed
	h.calls(20, errBoom)
	h.requireState(Open)
	h.at(30 * time.Second)
	probe := h.start(context.Background())
	require.True(t, probe.probe)
	// The closed-state call fails now: it must not reopen the half-open
	// breaker nor enter its window.
	require.ErrorIs(t, slowClosed.finish(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(HalfOpen)
	require.NoError(t, probe.finish(nil))
	h.calls(2, nil)
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	assert.Equal(t, uint64(21), h.b.Counters().Timeouts+h.b.Counters().Failures, "it still counts in the metrics")
}

func TestGenerations_AProbeFromAnEarlierHalfOpenEpisodeIsIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	old := h.start(context.Background())
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded) // second probe fails: reopen
	h.requireState(Open)
	h.at(90 * time.Second)
	h.requireState(HalfOpen)
	// The first episode's probe now passes; it must not count toward
	// this episode's three.
	require.NoError(t, old.finish(nil))
	h.calls(2, nil)
	h.requireState(HalfOpen)
	h.calls(1, nil)
	h.requireState(Closed)
}

// checkedResult is the result of a call admitted now that has passed the
// generation check and not yet been added: land adds it, as a goroutine
// descheduled between the check and the add would, after whatever the
// test has done to the breaker in between.
type checkedResult struct {
	b   *Breaker
	win *slidingWindow
	w   word
}

func passedCheck(b *Breaker) checkedResult {
	return checkedResult{b: b, win: b.win.Load(), w: b.state.Load()}
}

func (c checkedResult) land(o Outcome) {
	b := c.b
	b.land(context.Background(), b.opt.tb.Now(), c.w.gen(), c.win, c.w, false, o, false, b.rules.Load())
}

// behaviour.md §4 Generations. Scenario: a call's result passes the
// generation check; a transition that starts a new window runs, and a
// call of the new generation opens the new window's first bucket; then the
// result is added. The window's totals were shared by the old window and
// the new one, so the result counted in the new window: a timeout from
// before a Reset was counted after it.
func TestGenerations_AResultCheckedBeforeATransitionNeverLandsInTheNewWindow(t *testing.T) {
	for _, c := range []struct {
		name       string
		transition func(h *harness)
	}{
		{"reset", func(h *harness) { h.b.Reset() }},
		{"set_policy_new_window", func(h *harness) {
			require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Window = 10 * time.Second })))
		}},
		{"forced_closed_after_a_trip", func(h *harness) {
			h.trip()
			require.NoError(t, h.b.SetMode(ModeForcedClosed))
		}},
		{"close_after_probes", func(h *harness) {
			h.trip()
			h.at(30 * time.Second)
			h.calls(3, nil)
			h.requireState(Closed)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, DefaultPolicy())
			late := passedCheck(h.b)
			before := h.b.Counters()
			c.transition(h)
			h.calls(1, nil) // the new window's first bucket
			late.land(Timeout)
			assert.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot(), "the new window holds the new call only")
			after := h.b.Counters()
			assert.Equal(t, before.Timeouts+1, after.Timeouts, "the late result still counts in the counters")
		})
	}
}

// A window that tripped the breaker shows, while open, the calls that
// tripped it: a result checked before the trip and added after it does not
// change it.
func TestGenerations_AResultCheckedBeforeATripLeavesTheOpenWindowAsItTripped(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(defaultMinRequests-1, errBoom)
	late := passedCheck(h.b)
	h.calls(1, errBoom)
	h.requireState(Open)
	late.land(Success)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, oe.Trip.Window, h.b.Snapshot())
	assert.Equal(t, Snapshot{Counted: defaultMinRequests, Failures: defaultMinRequests}, h.b.Snapshot())
	assert.Equal(t, uint64(1), h.b.Counters().Successes)
}

// A failure checked before a Reset and added after it does not lengthen
// the new run of consecutive failures.
func TestGenerations_AFailureCheckedBeforeResetIsNotInTheNewRun(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ErrorRatio = 0; p.ConsecutiveFailures = 3 }))
	late := passedCheck(h.b)
	h.b.Reset()
	h.calls(1, errBoom)
	late.land(Failure)
	h.calls(1, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
}
