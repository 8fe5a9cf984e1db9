package breaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression tests for wrong decisions of the state machine in rare paths.
// Each names the behaviour it protects; the comment tells the scenario that
// went wrong.

// lastReason is the reason of the last transition the harness saw.
func (h *harness) lastReason() Reason {
	ev := h.eventLog()
	if len(ev) == 0 {
		return ""
	}
	return ev[len(ev)-1].Reason
}

// Scenario: an open breaker is forced open. Its state does not change (no
// event), but Opens went up by one.
func TestRegression_ForcingOpenAnOpenBreakerIsNotAnOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(1), h.b.Counters().Opens)
	assert.Len(t, h.eventLog(), 1)
	// From half-open it is a transition, and counts.
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.requireState(HalfOpen)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(2), h.b.Counters().Opens)
}
