package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Manual control.
func TestManual_ForcedOpenRefusesEverythingUntilReleasedThenProbes(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.at(time.Hour)
	err := h.call(nil)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, ReasonForcedOpen, oe.Reason)
	assert.Zero(t, oe.RetryAfter())
	h.requireState(Open)
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.requireState(HalfOpen)
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, []string{"closed>open:forced_open", "open>half_open:released", "half_open>closed:probes_passed"}, h.transitions())
}

func TestManual_ForcedClosedAdmitsEverythingAndNeverTrips(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.requireState(Closed)
	h.calls(200, errBoom)
	h.requireState(Closed)
	assert.Equal(t, uint64(200), h.b.Snapshot().Failures, "it still measures")
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.calls(1, errBoom)
	h.requireState(Open)
}

func TestManual_ShadowReportsTripsButRefusesNothing(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeShadow))
	h.calls(20, errBoom)
	assert.Equal(t, Open, h.b.State(), "the shadow state machine opened")
	ev := h.eventLog()
	require.Len(t, ev, 1)
	assert.Equal(t, ModeShadow, ev[0].Mode)
	for i := 0; i < 10; i++ {
		require.NoError(t, h.call(nil), "a shadow breaker refuses nothing")
	}
	c := h.b.Counters()
	assert.Equal(t, uint64(10), c.ShadowRejected)
	assert.Zero(t, c.Rejected)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 20}, h.b.Snapshot(), "would-be refusals stay out of the window")
	// It recovers as a real breaker would.
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)
	// Switching to auto keeps the state and makes it real.
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.calls(20, errBoom)
	require.ErrorIs(t, h.call(nil), ErrOpen)
}

func TestManual_ResetClosesOnAnEmptyWindowAtLevelZero(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded) // level 1
	h.b.Reset()
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	_, open := openSince(h.b)
	assert.False(t, open)
	h.trip()
	ev := h.eventLog()
	assert.Equal(t, 30*time.Second, ev[len(ev)-1].Cooldown, "reset returns the cooldown to OpenFor")
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.b.Reset()
	assert.Equal(t, ModeAuto, h.b.Mode(), "reset ends a forced mode")
}

// resetCtx calls fire from its Value method once armed: the one place user
// code runs inside the recording of a closed-state result (it ran between
// the generation check and the window load).
type resetCtx struct {
	context.Context
	armed bool
	fire  func()
}

func (c *resetCtx) Value(key any) any {
	if c.armed {
		c.armed = false
		c.fire()
	}
	return c.Context.Value(key)
}

// A call admitted before Reset never counts in the new window, even one
// that records its result while Reset runs: the test forces that
// interleaving by running Reset from the context lookup that recording
// makes when warmup marks are in use.
// Regression (bc96faf): Reset stored the window before the generation.
func TestManual_AResultAdmittedBeforeResetNeverLandsInTheNewWindow(t *testing.T) {
	for _, err := range []error{nil, errBoom} {
		h := newHarness(t, DefaultPolicy())
		// A marked call of a long-started instance turns the breaker's
		// per-call lookup on for every later call.
		warm := WithInstanceStart(context.Background(), h.clk.Now().Add(-time.Hour))
		require.NoError(t, h.b.Do(warm, func(context.Context) error { return nil }))
		h.calls(5, errBoom)
		ctx := &resetCtx{Context: context.Background()}
		ctx.fire = func() {
			h.b.Reset()
			require.NoError(t, h.b.Do(context.Background(), func(context.Context) error { return nil }))
		}
		require.ErrorIs(t, h.b.Do(ctx, func(context.Context) error {
			ctx.armed = true
			return err
		}), err)
		require.False(t, ctx.armed, "reset ran")
		assert.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot(), "only the call made after the reset, err=%v", err)
	}
}

func TestManual_UnknownModeIsAnErrorAndChangesNothing(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	assert.EqualError(t, h.b.SetMode(Mode(9)), "breaker: unknown mode 9")
	assert.Equal(t, ModeAuto, h.b.Mode())
	assert.Empty(t, h.eventLog())
}
