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
	assert.Equal(t, Snapshot{Counted: 24, Failures: 12, Timeouts: 8}, oe.Snapshot)
	assert.Equal(t, 20*time.Second, oe.RetryAfter())
	assert.Equal(t, h.t0, oe.Since)
	assert.Equal(t, h.t0.Add(30*time.Second), oe.Until)
	assert.Equal(t, "breaker: inventory.GetStock is open (err_ratio, 12/24 failed, 8 timeouts, retry in 20s)", err.Error())
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
