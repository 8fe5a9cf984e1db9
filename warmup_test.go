package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Warmup, breaker level: Rewarm, also right after New.
func TestWarmup_RewarmExemptsTheTargetForWarmup(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.b.Rewarm()
	h.calls(100, errBoom) // a cold cache: 100% errors
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	assert.Equal(t, uint64(100), h.b.Counters().Exempt)
	assert.Equal(t, uint64(100), h.b.Counters().Failures, "exempt calls still count in the metrics")
	h.at(60*time.Second - 1)
	h.calls(20, errBoom)
	h.requireState(Closed)
	h.at(60 * time.Second)
	h.calls(20, errBoom)
	h.requireState(Open)
}

func TestWarmup_RewarmRightAfterNewStartsANewBreakerCold(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.b.Rewarm()
	h.calls(30, errBoom)
	h.requireState(Closed)
	h.at(time.Minute)
	h.calls(20, errBoom)
	h.requireState(Open)
}

func TestWarmup_ZeroTurnsItOff(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Warmup = 0 }))
	h.b.Rewarm()
	h.calls(20, errBoom)
	h.requireState(Open)
}

// behaviour.md §4 Warmup, per call: the ctx carries the instance's start
// time.
func TestWarmup_PerCallInstanceStart(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(10 * time.Minute)
	coldCtx := WithInstanceStart(context.Background(), h.clk.Now().Add(-59*time.Second))
	warmCtx := WithInstanceStart(context.Background(), h.clk.Now().Add(-61*time.Second))
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(coldCtx, func(context.Context) error { return errBoom }), errBoom)
	}
	h.requireState(Closed)
	for i := 0; i < 20; i++ {
		_ = h.b.Do(warmCtx, func(context.Context) error { return errBoom })
	}
	h.requireState(Open)
}

func TestWarmup_AColdProbeFailureIsExcusedButItsPassCounts(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.b.Rewarm()
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(HalfOpen)
	h.calls(3, nil)
	h.requireState(Closed)
}
