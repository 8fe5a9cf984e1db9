package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Half-open: exactly Probes calls are admitted; the fourth
// is refused while three are in flight.
func TestHalfOpen_FourthCallIsRefusedWhileThreeProbesAreInFlight(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	var probes []*blocked
	for i := 0; i < 3; i++ {
		bl := h.start(context.Background())
		require.True(t, bl.admitted, "probe %d", i+1)
		require.True(t, bl.probe)
		probes = append(probes, bl)
	}
	err := h.call(nil)
	require.ErrorIs(t, err, ErrOpen, "the fourth call must be refused")
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, HalfOpen, oe.State)
	assert.Zero(t, oe.RetryAfter(), "probes are in flight; no fixed retry time")

	for _, bl := range probes[:2] {
		require.NoError(t, bl.finish(nil))
	}
	require.ErrorIs(t, h.call(nil), ErrOpen, "slots are not reissued after a pass")
	h.requireState(HalfOpen)
	require.NoError(t, probes[2].finish(nil))
	h.requireState(Closed)
}

// behaviour.md §4 Half-open: all probes pass → Closed, with an empty window.
func TestHalfOpen_AllProbesPassClosesOnAnEmptyWindow(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.OpenFor = time.Second; p.MaxOpenFor = 2 * time.Second }))
	h.trip()
	h.at(time.Second) // the tripping failures are still inside the 5 s window
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, Snapshot{}, h.b.Snapshot(), "window must be empty after closing")
	h.calls(19, errBoom)
	h.requireState(Closed) // the old failures would have tripped it
	assert.Equal(t, []string{
		"closed>open:err_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed",
	}, h.transitions())
	c := h.b.Counters()
	assert.Equal(t, uint64(3), c.ProbesPassed)
}

// behaviour.md §4 Half-open: one failing probe reopens at once, cooldown
// doubled.
func TestHalfOpen_OneTimedOutProbeReopensWithADoubledCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(2, nil)
	require.NoError(t, h.call(nil) /* slot 3 */)
	// closed now; trip again right away to test the doubled cooldown from
	// a failed probe instead.
	h2 := newHarness(t, DefaultPolicy())
	h2.trip()
	h2.at(30 * time.Second)
	h2.calls(1, nil)
	require.ErrorIs(t, h2.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h2.requireState(Open)
	ev := h2.eventLog()
	last := ev[len(ev)-1]
	assert.Equal(t, ReasonProbeFailed, last.Reason)
	assert.Equal(t, 60*time.Second, last.Cooldown)
	assert.Equal(t, 1, last.Doublings)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 20}, last.Snapshot, "reopen reports the trip that began the outage")
	h2.at(90*time.Second - 1)
	h2.requireState(Open)
	h2.at(90 * time.Second)
	h2.requireState(HalfOpen)
	assert.Equal(t, uint64(1), h2.b.Counters().ProbesFailed)
	assert.Equal(t, uint64(2), h2.b.Counters().Opens)
}

// behaviour.md §3 Outcomes: a probe that gets an answer, even an error
// (a 500, say), shows the downstream is back and passes; only a timeout
// fails it, unless StrictProbes is set.
func TestHalfOpen_AnErrorAnswerPassesAProbeUnlessStrict(t *testing.T) {
	for _, strict := range []bool{false, true} {
		h := newHarness(t, policy(func(p *Policy) { p.StrictProbes = strict }))
		h.trip()
		h.at(30 * time.Second)
		require.ErrorIs(t, h.call(errBoom), errBoom)
		if strict {
			h.requireState(Open)
			continue
		}
		h.calls(2, errBoom)
		h.requireState(Closed)
	}
}

// behaviour.md §3 Outcomes: an ignored probe gives no verdict and frees its
// slot.
func TestHalfOpen_AnIgnoredProbeFreesItsSlot(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	p1 := h.start(context.Background())
	p2 := h.start(context.Background())
	p3 := h.start(context.Background())
	require.True(t, p1.admitted && p2.admitted && p3.admitted)
	require.ErrorIs(t, h.call(nil), ErrOpen)
	notOurFault := Ignore(errors.New("invalid sku"))
	require.Equal(t, notOurFault, p1.finish(notOurFault))
	h.requireState(HalfOpen)
	// The freed slot goes to the next call.
	p4 := h.start(context.Background())
	require.True(t, p4.admitted && p4.probe)
	for _, p := range []*blocked{p2, p3, p4} {
		require.NoError(t, p.finish(nil))
	}
	h.requireState(Closed)
	c := h.b.Counters()
	assert.Equal(t, uint64(3), c.ProbesPassed)
	assert.Equal(t, uint64(1), c.Ignored)
}

// behaviour.md §3 Outcomes: a panic is counted, the probe slot released,
// then re-raised.
func TestHalfOpen_APanickingProbeFreesItsSlotAndThePanicGoesOn(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	assert.PanicsWithValue(t, "probe bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { panic("probe bug") })
	})
	h.requireState(HalfOpen)
	h.calls(3, nil) // all three slots are free again
	h.requireState(Closed)
	assert.Equal(t, uint64(21), h.b.Counters().Failures, "20 trips + 1 panic")
}

// behaviour.md §4 Half-open: a probe whose function ignores its context
// cannot wedge the breaker; after one cooldown without a verdict it
// reopens.
func TestHalfOpen_HungProbesReopenAfterOneCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	var hung []*blocked
	for i := 0; i < 3; i++ {
		hung = append(hung, h.start(context.Background()))
	}
	h.at(60*time.Second - 1)
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(HalfOpen)
	h.at(60 * time.Second)
	h.requireState(Open)
	ev := h.eventLog()
	assert.Equal(t, ReasonProbeTimeout, ev[len(ev)-1].Reason)
	assert.Equal(t, 60*time.Second, ev[len(ev)-1].Cooldown)
	// The hung probes finally return: stale, they change nothing.
	for _, bl := range hung {
		require.NoError(t, bl.finish(nil))
	}
	h.requireState(Open)
	assert.Zero(t, h.b.Counters().ProbesPassed)
}

func TestIsProbe_FalseOutsideProbesAndForNil(t *testing.T) {
	assert.False(t, IsProbe(nil)) //lint:ignore SA1012 testing nil ctx
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.Do(context.Background(), func(ctx context.Context) error {
		assert.False(t, IsProbe(ctx))
		return nil
	}))
}
