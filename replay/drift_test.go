package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrift: a fixed timeout against the adaptive one while the
// downstream's latency drifts up, then hangs. The adaptive run loses
// less: it cuts a fraction of the healthy calls the fixed timeout cuts
// during the drift, and no more requests, while the hang does not push
// its deadline up (its breaker opens as soon as the fixed one's, and
// orders' pool never fills). The suite runs the drift at twice the pace
// (testEdits); BREAKER_LONG=1 runs the scenario as shipped.
func TestDrift(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "drift")
	base, no, fixed, adaptive := rep.Run(Baseline), rep.Run(NoBreaker), rep.Run(WithBreaker), rep.Run(CandidateRun)
	require.NotNil(t, adaptive, "the scenario has an adaptive candidate")
	require.True(t, adaptive.Calls[1].Policy.AdaptiveTimeout.Enabled)
	require.False(t, fixed.Calls[1].Policy.AdaptiveTimeout.Enabled)

	hang := rep.Scenario.Faults[len(rep.Scenario.Faults)-1]
	require.Equal(t, OutageHang, hang.Outage)

	// Full answers lost: the baseline's minus the run's, second by second.
	fullLost := func(run *RunResult, from, to time.Duration) int {
		lost := 0
		full, ref := run.Entry.Full(), base.Entry.Full()
		for sec := int(from / time.Second); sec < int(to/time.Second); sec++ {
			lost += ref[sec] - full[sec]
		}
		return lost
	}
	drift := rep.Scenario.Faults[0].Start
	fixedDrift, adaptiveDrift := fullLost(fixed, drift, hang.Start), fullLost(adaptive, drift, hang.Start)
	t.Logf("full answers lost to the drift: fixed timeout %d, adaptive %d", fixedDrift, adaptiveDrift)
	// 150 a minute of drift: 1,500 of the shipped run's 2,898, 750 of
	// the suite's 1,476 (testEdits).
	minCut := int(150 * (hang.Start - drift).Minutes())
	assert.Greater(t, fixedDrift, minCut, "the fixed timeout cuts healthy calls as latency drifts")
	assert.Less(t, adaptiveDrift*5, fixedDrift, "the adaptive one cuts a fraction of them")
	end := rep.Scenario.Duration
	assert.Less(t, fullLost(adaptive, 0, end), fullLost(fixed, 0, end), "over the whole run the adaptive timeout loses less")
	assert.LessOrEqual(t, adaptive.Lost, fixed.Lost+50, "and no more requests, within noise")
	assert.Less(t, adaptive.Lost, no.Lost, "a breaker still beats none in the hang")

	for _, run := range []*RunResult{fixed, adaptive} {
		inv := call(t, run, "orders->inventory")
		opened, ok := inv.FirstOpen()
		require.True(t, ok, "%s: the breaker opens in the hang", run.Label)
		assert.GreaterOrEqual(t, opened, hang.Start, "%s: not during the drift", run.Label)
		assert.LessOrEqual(t, opened-hang.Start, 5*time.Second, "%s: within 5 s of the hang", run.Label)
		assert.Zero(t, run.Tiers[1].FullSeconds(), "%s: orders' pool never fills", run.Label)
	}
	assert.Positive(t, no.Tiers[1].FullSeconds(), "without a breaker the hang fills orders' pool")
}
