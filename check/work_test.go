package check

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bursty is traffic within every documented limit whose checks are
// costly: error bursts a simulation follows through a day, and a busy
// window for the formulas.
func bursty(rate float64) Traffic {
	return Traffic{Rate: rate, P50: 5 * time.Millisecond, P99: 50 * time.Millisecond, ErrorRatio: 0.3, Deadline: time.Second,
		Bursts: Bursts{PerDay: MaxBurstsPerDay, Length: time.Second / 2, ErrorRatio: 0.9}}
}

func keysOf(n int, t Traffic) Workload {
	w := Workload{Keys: map[string]Traffic{}}
	for i := range n {
		w.Keys[fmt.Sprintf("svc.Method%d", i)] = t
	}
	return w
}

// Scenario: 10,000 keys (check.MaxKeys) of bursty traffic, every value in
// range, ran for hours: every key's estimates simulated up to SimCalls
// each, and the formulas' cost grows with the window's calls. Group now
// estimates the formulas' work before it checks anything and refuses a
// workload beyond MaxModelSteps, with the figure and the bound.
func TestGroup_WorkBeyondTheBoundIsRefused(t *testing.T) {
	w := keysOf(MaxKeys, bursty(MaxRate))
	_, err := Group(breaker.GroupPolicy{}, w, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check: the formulas would take about 5e+09 steps for these 10000 keys (about 41m")
	assert.Contains(t, err.Error(), "more than the 2.4e+08 a check takes (about 2m0s)")
}

// The simulations of one Group share Options.SimCallsPerRun: each key an
// even part, fixed in advance, whatever each estimate's own SimCalls.
// Twenty bursty keys would each simulate a day of 50 calls a second (4
// million calls); under a run budget of 200,000 they make at most that in
// all, and say that their share bounded them.
func TestGroup_SimulationsShareTheRunBudget(t *testing.T) {
	w := keysOf(20, bursty(50))
	r, err := Group(breaker.GroupPolicy{}, w, Options{SimCallsPerRun: 200_000})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.SimulatedCalls, int64(200_000))
	assert.Greater(t, r.SimulatedCalls, int64(0))
	f, ok := finding(r, CheckFalseTrips)
	require.True(t, ok)
	assert.True(t, strings.Contains(f.Message, "within the key's share of the run's simulations"), f.Message)

	_, err = Group(breaker.GroupPolicy{}, w, Options{SimCallsPerRun: -1})
	assert.ErrorContains(t, err, "Options.SimCallsPerRun must be positive (0 for the default), got -1")
}
