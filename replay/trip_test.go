package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/govkit/breaker"
)

// A transition's trip carries the evidence of its rule, for every rule,
// as the reports print it: the outage's own trip when the event began it
// (its run included), else the rule and the window it judged, with the
// policy's SlowCall for the slow rule.
func TestTripOf_TheEvidenceOfEachRule(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	began := func(tr breaker.Trip) breaker.Event {
		return breaker.Event{From: breaker.Closed, To: breaker.Open, Reason: tr.Reason, Time: at, Snapshot: tr.Window,
			Outage: &breaker.Outage{Since: at, Trip: tr, Trips: 1}}
	}
	run := breaker.Trip{Reason: breaker.ReasonConsecutiveFailures, Window: breaker.Snapshot{Counted: 8, Failures: 5}, Run: 5}
	assert.Equal(t, "consecutive_failures: 5 failures in a row (5 of 8 calls failed)", tripOf(began(run), 0).String())

	slow := breaker.Event{From: breaker.Closed, To: breaker.Open, Reason: breaker.ReasonSlowRatio, Time: at.Add(time.Minute),
		Snapshot: breaker.Snapshot{Counted: 20, Slow: 12, Failures: 1},
		Outage:   &breaker.Outage{Since: at, Trip: run, Trips: 2}}
	assert.Equal(t, "slow_ratio: 12 of 20 calls slower than 200ms (1 failed)", tripOf(slow, 200*time.Millisecond).String(),
		"a trip inside an outage another trip began: its own rule and window")

	ratio := breaker.Trip{Reason: breaker.ReasonErrorRatio, Window: breaker.Snapshot{Counted: 20, Failures: 10, Timeouts: 4}}
	assert.Equal(t, "error_ratio: 10 of 20 calls failed, 4 of them timeouts", tripOf(began(ratio), 0).String())

	reopen := breaker.Event{From: breaker.HalfOpen, To: breaker.Open, Reason: breaker.ReasonProbeFailed}
	assert.Zero(t, tripOf(reopen, 0), "a reopen is no trip")
}
