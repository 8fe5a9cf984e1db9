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
