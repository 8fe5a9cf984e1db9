package check

import (
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func slowPolicy(slowCall time.Duration) breaker.Policy {
	p := breaker.DefaultPolicy()
	p.SlowCall, p.SlowRatio, p.MinRequests = slowCall, 0.5, 10
	return p
}

func findingsOf(t *testing.T, p breaker.Policy, tr Traffic) map[string]Finding {
	t.Helper()
	r, err := Group(breaker.GroupPolicy{Default: p}, Workload{Keys: map[string]Traffic{"inventory.Reserve": tr}}, Options{})
	require.NoError(t, err)
	out := map[string]Finding{}
	for _, f := range r.Findings {
		out[f.Check] = f
	}
	return out
}

// Scenario: slow_call 200ms, slow_ratio 0.5, min_requests 10 against 400
// calls/s with p50 210ms and p99 400ms: 57% of the healthy calls are
// slower than slow_call. The checker said "0.0227 false trips a day" and
// passed; the real breaker on the same traffic tripped after every close.
// The false-trip model counted only the failures that cross the line,
// while this window is over it most of the time. Now the slow rule is
// judged against the latency: an error finding, and a false-trip figure
// bound by the cooldowns and the probes (the agreement grid holds it
// against the real breaker).
func TestSlowRule_HealthyLatencyOverTheLineIsAnError(t *testing.T) {
	tr := Traffic{Rate: 400, P50: 210 * time.Millisecond, P99: 400 * time.Millisecond, Deadline: 2 * time.Second, Instances: 3}
	fs := findingsOf(t, slowPolicy(200*time.Millisecond), tr)
	f, ok := fs[CheckSlowTripsHealthy]
	require.True(t, ok, "no %s finding: %v", CheckSlowTripsHealthy, fs)
	assert.Equal(t, Error, f.Severity)
	assert.InDelta(t, 0.57, f.Numbers["healthy_slow_ratio"], 0.005)
	assert.Contains(t, f.Message, "57% of healthy calls are slower than slow_call 200ms (lognormal from p50 210ms and p99 400ms), at or above slow_ratio 50%")
	ft := fs[CheckFalseTrips]
	assert.Equal(t, Warning, ft.Severity)
	// A trip after every close, bound by the cooldowns and by the slow
	// probes that fail most episodes (57% of calls are slow: all three
	// pass 8% of the time).
	assert.Greater(t, ft.Numbers["false_trips_per_day"], 30.0)
}

// A slow_call below the latency's p99 (or p50) that the healthy traffic
// does not trip is a warning; one above p99 is no finding.
func TestSlowRule_BelowP99IsAWarning(t *testing.T) {
	tr := Traffic{Rate: 400, P50: 150 * time.Millisecond, P99: 400 * time.Millisecond, Deadline: 2 * time.Second, Instances: 3}
	fs := findingsOf(t, slowPolicy(300*time.Millisecond), tr)
	_, tripped := fs[CheckSlowTripsHealthy]
	assert.False(t, tripped)
	f, ok := fs[CheckSlowBelowLatency]
	require.True(t, ok)
	assert.Equal(t, Warning, f.Severity)
	assert.Contains(t, f.Message, "slow_call 300ms is below the healthy p99 (400ms)")

	fs = findingsOf(t, slowPolicy(100*time.Millisecond), Traffic{Rate: 400, P50: 150 * time.Millisecond, P99: 160 * time.Millisecond, Deadline: 2 * time.Second, Instances: 3})
	assert.Equal(t, Error, fs[CheckSlowTripsHealthy].Severity, "nearly every call is slow")

	fs = findingsOf(t, slowPolicy(time.Second), tr)
	assert.NotContains(t, fs, CheckSlowTripsHealthy)
	assert.NotContains(t, fs, CheckSlowBelowLatency)
}

// FaultTimeToTrip is the fault_time_to_trip finding of Group for the
// same key, policy, traffic and options: -suggest shows the check's
// figure for each candidate through it.
func TestFaultTimeToTrip_IsGroupsFinding(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.MinRequests = 10
	for _, tr := range []Traffic{
		{Rate: 3, P50: 5 * time.Millisecond, P99: 30 * time.Millisecond, Deadline: time.Second},
		{Rate: 400, P50: 5 * time.Millisecond, P99: 30 * time.Millisecond, Deadline: time.Second},
	} {
		o := Options{SimCalls: 20000, Seed: 3}
		r, err := Group(breaker.GroupPolicy{Default: p}, Workload{Keys: map[string]Traffic{"k": tr}}, o)
		require.NoError(t, err)
		want, ok := finding(r, CheckFaultTimeToTrip)
		require.True(t, ok)
		got, err := FaultTimeToTrip("k", p, tr, o)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := FaultTimeToTrip("k", p, Traffic{}, Options{})
	assert.ErrorContains(t, err, "rate 0")
}
