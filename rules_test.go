package breaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Closed: ConsecutiveFailures is its own sample
// requirement. A method with thin traffic, where the window never reaches
// MinRequests, must still be cut off after N failures in a row.
// Regression (e9822b5): ConsecutiveFailures 6 opened at the 20th call.
func TestClosed_SixFailuresInARowTripUnderTheDefaultGate(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ConsecutiveFailures = 6 }))
	h.calls(3, nil)
	h.calls(5, errBoom)
	h.requireState(Closed) // 5 in a row, 8 counted: under MinRequests
	h.calls(1, errBoom)
	h.requireState(Open)
	ev := h.eventLog()
	require.Len(t, ev, 1)
	assert.Equal(t, ReasonConsecutiveFailures, ev[0].Reason)
	assert.Equal(t, Snapshot{Counted: 9, Failures: 6}, ev[0].Snapshot)
}

// A run of ConsecutiveFailures failures trips the breaker below
// MinRequests: five failures in a row trip a breaker with
// ConsecutiveFailures 5 though the window holds 8 calls.
// Regression (e9822b5): the run waited for MinRequests calls in the window.
func TestClosed_ConsecutiveFailuresTripBelowMinRequests(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ConsecutiveFailures = 5 }))
	h.calls(3, nil)
	h.calls(4, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutiveFailures, h.lastReason())
	assert.Equal(t, Snapshot{Counted: 8, Failures: 5}, h.eventLog()[0].Snapshot)
}

// A success ends the run, however close it was to the threshold.
func TestClosed_ASuccessEndsTheConsecutiveRun(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ErrorRatio = 0; p.ConsecutiveFailures = 3 }))
	for i := 0; i < 10; i++ {
		h.calls(2, errBoom)
		h.calls(1, nil)
	}
	h.requireState(Closed)
	h.calls(3, errBoom)
	h.requireState(Open)
}

// behaviour.md §2 Policy: ErrorRatio 0 turns the ratio rule off when
// another rule is set, so gobreaker's "more than 5 consecutive failures" is
// expressible on its own: a window of 100% failures does not trip on the
// ratio.
func TestPolicy_ErrorRatioZeroTurnsTheRatioRuleOff(t *testing.T) {
	p := policy(func(p *Policy) { p.ErrorRatio = 0; p.ConsecutiveFailures = 6; p.MinRequests = 1 })
	require.NoError(t, p.Validate())
	h := newHarness(t, p)
	for i := 0; i < 20; i++ {
		h.calls(5, errBoom)
		h.calls(1, nil)
	}
	h.requireState(Closed) // 83% failures, never 6 in a row
	h.calls(6, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutiveFailures, h.eventLog()[0].Reason)
}

// ErrorCount keeps the MinRequests gate: a count of failures means
// something only against a sample, unlike an unbroken run.
func TestClosed_ErrorCountWaitsForMinRequests(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ErrorRatio = 0; p.ErrorCount = 3 }))
	h.calls(10, errBoom) // 3 failures reached long ago, but only 10 counted
	h.calls(9, nil)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonErrorCount, h.eventLog()[0].Reason)
}

func TestPolicy_ErrorRatioZeroNeedsAnotherRule(t *testing.T) {
	var pe *PolicyError
	require.ErrorAs(t, policy(func(p *Policy) { p.ErrorRatio = 0 }).Validate(), &pe)
	require.Len(t, pe.Problems, 1)
	assert.Equal(t, "error_ratio", pe.Problems[0].Field)
	assert.Contains(t, pe.Problems[0].Problem, "no other trip rule")
	for _, f := range []func(*Policy){
		func(p *Policy) { p.ErrorCount = 5 },
		func(p *Policy) { p.SlowCall = 1e9; p.SlowRatio = 0.5 },
		func(p *Policy) { p.ConsecutiveFailures = 5 },
		func(p *Policy) { p.Throttle.Enabled = true }, // throttling alone
	} {
		assert.NoError(t, policy(func(p *Policy) { p.ErrorRatio = 0; f(p) }).Validate())
	}
}
