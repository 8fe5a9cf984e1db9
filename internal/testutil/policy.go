package testutil

import (
	"time"

	"github.com/govkit/breaker"
)

// Policy is the test policy of the transport tests: it trips on 4 counted
// calls at 50% failures, stays open for exactly 10s (no jitter) and
// probes twice.
func Policy() breaker.Policy {
	p := breaker.DefaultPolicy()
	p.MinRequests = 4
	p.ErrorRatio = 0.5
	p.OpenFor = 10 * time.Second
	p.MaxOpenFor = 40 * time.Second
	p.Jitter = 0
	p.Probes = 2
	p.Warmup = 0
	return p
}

// MetricsPolicy is the policy of [MockGroup], under which the metrics
// tests tell their stories: it trips on 4 counted calls at 50% failures
// and probes once, so an outage takes a handful of calls, and counts a
// call of 2s or more as slow without ever tripping on slowness. With the
// jitter source of MockGroup every cooldown is exactly OpenFor·2^level:
// 10s, then 20s.
func MetricsPolicy() breaker.Policy {
	p := breaker.DefaultPolicy()
	p.Window = 10 * time.Second
	p.Buckets = 10
	p.MinRequests = 4
	p.SlowCall = 2 * time.Second
	p.SlowRatio = 1
	p.OpenFor = 10 * time.Second
	p.MaxOpenFor = 40 * time.Second
	p.Probes = 1
	return p
}

// ChaosPolicy is the policy of the chaos experiments, scaled down so that
// each takes well under a second: it trips on 5 counted calls at 50%
// failures within an 800 ms window and probes three times after a
// cooldown of 200 ms ±10%, doubling up to 800 ms. Policy.CallTimeout is two
// seconds, far above a loopback call, so that a healthy call a loaded
// machine delays does not count as a timeout; the delay experiment, whose
// calls are all slow, uses [DelayPolicy].
func ChaosPolicy() breaker.Policy {
	p := breaker.DefaultPolicy()
	p.Window = 800 * time.Millisecond
	p.Buckets = 4
	p.MinRequests = 5
	p.ErrorRatio = 0.5
	p.CallTimeout = 2 * time.Second
	p.OpenFor = 200 * time.Millisecond
	p.MaxOpenFor = 800 * time.Millisecond
	p.Jitter = 0.1
	p.Probes = 3
	p.Warmup = 0
	return p
}

// DelayPolicy is [ChaosPolicy] with Policy.CallTimeout at 200 ms, a quarter of
// the window, so that a window holds MinRequests timeouts of callers that
// call one after another.
func DelayPolicy() breaker.Policy {
	p := ChaosPolicy()
	p.CallTimeout = 200 * time.Millisecond
	return p
}

// Slack is the margin the chaos experiments allow for scheduling on a
// loaded machine wherever a bound depends on when a goroutine gets to run.
const Slack = 400 * time.Millisecond

// JitterBounds returns the least and the greatest cooldown a jitter of j
// (a fraction) can make of d.
func JitterBounds(d time.Duration, j float64) (lo, hi time.Duration) {
	return time.Duration(float64(d) * (1 - j)), time.Duration(float64(d) * (1 + j))
}
