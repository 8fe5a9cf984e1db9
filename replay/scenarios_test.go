package replay

import (
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bounds here are the qualitative claims of each scenario, with room
// to spare; they are not the figures the scenarios happen to produce.

// TestSeeds000 is the replay of the incident behind the breaker's defaults:
// without breakers the cascade amplifies the fault several times over; with
// the default policy the entry loses little, because the inventory breaker
// opens within a window of the fault's start and is closed again soon after
// its end.
func TestSeeds000(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	no, with := rep.Run(NoBreaker), rep.Run(WithBreaker)

	assert.GreaterOrEqual(t, no.Amplification, 4.0, "without breakers the entry's goodput drops at least 4x (worst second %v)", no.WorstAt)
	assert.GreaterOrEqual(t, no.WorstAt, rep.FaultStart)
	assert.LessOrEqual(t, with.WorstDrop, 0.30, "with the default policy the entry loses at most 30%% in its worst second (%v)", with.WorstAt)
	assert.Less(t, with.Lost*10, no.Lost, "the breaker saves most of what the fault costs")

	inv := call(t, with, "orders->inventory")
	opened, ok := inv.FirstOpen()
	require.True(t, ok, "the inventory breaker opens")
	assert.Greater(t, opened, rep.FaultStart)
	assert.LessOrEqual(t, opened-rep.FaultStart, 6*time.Second, "it opens within 6 s of the fault's start")
	trip := inv.Transitions[0]
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Greater(t, trip.Snapshot.Timeouts, uint64(0), "the slow calls count, as timeouts")
	assert.Greater(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "and so do the errors")
	closed, ok := inv.ClosedAt()
	require.True(t, ok, "it ends the run closed")
	assert.Greater(t, closed, rep.FaultEnd)
	assert.LessOrEqual(t, closed-rep.FaultEnd, 2*time.Minute, "closed again within 2 minutes of the fault's end")
	assert.EqualValues(t, 3, inv.Probes, "one half-open episode, three probes")

	assert.Empty(t, call(t, with, "gateway->orders").Transitions, "orders stays healthy, so the gateway's breaker stays closed")
	for _, tier := range no.Tiers[:2] {
		assert.Greater(t, tier.FullSeconds(), 10, "without breakers %s's pool is full for most of the fault", tier.Name)
	}
	assert.Greater(t, no.Tiers[0].Abandoned, int64(1000), "the collapsed chain works for clients that have gone")
}

// TestSlowOnly: no call fails, and the breaker opens anyway, because
// timeouts count (behaviour.md §3: with 60% of calls slow, the error ratio
// alone stayed at 8% and the breaker never opened).
func TestSlowOnly(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "slow-only")
	no, with := rep.Run(NoBreaker), rep.Run(WithBreaker)

	inv := call(t, with, "orders->inventory")
	assert.Zero(t, inv.Failed, "inventory answers no call with an error")
	assert.Greater(t, inv.TimedOut, int64(0))
	require.NotEmpty(t, inv.Transitions, "the breaker opens")
	trip := inv.Transitions[0]
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Positive(t, trip.Snapshot.Failures)
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "every failure that tripped it is a timeout: the pure error ratio is 0")

	assert.GreaterOrEqual(t, no.Amplification, 4.0, "without breakers the entry collapses")
	assert.Less(t, with.Lost*4, no.Lost, "with it the entry loses under a quarter as much")
	// With the breaker the entry is back well before the fault ends;
	// without it the entry stays down until the end.
	base := rep.Run(Baseline)
	for sec := int((rep.FaultEnd - 10*time.Second) / time.Second); sec < int(rep.FaultEnd/time.Second); sec++ {
		assert.GreaterOrEqual(t, float64(with.Entry.Good[sec]), 0.9*float64(base.Entry.Good[sec]), "with breaker, second %d", sec)
		assert.Less(t, float64(no.Entry.Good[sec]), 0.25*float64(base.Entry.Good[sec]), "no breaker, second %d", sec)
	}
}

// TestColdStart is the false trip that motivated Warmup (behaviour.md §2
// Policy and §4 Warmup): a cold instance's 61% errors open a breaker
// without warmup and not one with it, and the false trip costs more than
// the cold start itself.
func TestColdStart(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "cold-start")
	no, with, cand := rep.Run(NoBreaker), rep.Run(WithBreaker), rep.Run(CandidateRun)
	require.NotNil(t, cand)
	assert.Equal(t, breaker.DefaultPolicy().Warmup, call(t, with, "orders->inventory").Policy.Warmup)
	assert.Zero(t, call(t, cand, "orders->inventory").Policy.Warmup)

	warm := call(t, with, "orders->inventory")
	assert.Empty(t, warm.Transitions, "with warmup the breaker never opens")
	assert.Greater(t, warm.Counters.Exempt, uint64(10000), "the cold instance's calls are left out of the window")
	assert.Equal(t, no.Entry.Good, with.Entry.Good, "a breaker that never opens changes nothing")

	cold := call(t, cand, "orders->inventory")
	opened, ok := cold.FirstOpen()
	require.True(t, ok, "without warmup the breaker opens")
	assert.LessOrEqual(t, opened-rep.FaultStart, 10*time.Second)
	assert.Equal(t, breaker.ReasonErrorRatio, cold.Transitions[0].Reason)
	assert.Greater(t, cold.TimeIn(breaker.Open, rep.Scenario.Duration), rep.FaultEnd-rep.FaultStart,
		"it stays open longer than the instance was cold")
	assert.Greater(t, cand.Lost, 2*no.Lost, "the false trip costs more than twice the cold start")
	assert.Greater(t, cand.Recovery, 20*time.Second, "and the entry recovers well after the instance has warmed up")
}

// TestFlapping shows the doubling cooldown damping the churn of a
// breaker in front of a flapping downstream.
func TestFlapping(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "flapping")
	no, with, cand := rep.Run(NoBreaker), rep.Run(WithBreaker), rep.Run(CandidateRun)
	require.NotNil(t, cand)
	doubling := call(t, with, "orders->pricing")
	fixed := call(t, cand, "orders->pricing")
	windows := len(rep.Scenario.FaultWindows())

	assert.LessOrEqual(t, doubling.Opens(), windows/2, "with a doubling cooldown the breaker walks into few bad phases")
	assert.GreaterOrEqual(t, fixed.Opens(), windows-1, "with a fixed 15 s cooldown it walks into nearly all of them")
	maxLevel := 0
	for _, tr := range doubling.Transitions {
		if tr.To == breaker.Open {
			maxLevel = max(maxLevel, tr.Doublings)
		}
	}
	assert.GreaterOrEqual(t, maxLevel, 2, "the cooldown doubled twice")
	for _, tr := range fixed.Transitions {
		if tr.To == breaker.Open {
			assert.LessOrEqual(t, tr.Cooldown, 18*time.Second, "a fixed cooldown does not grow (15 s, jittered)")
		}
	}
	assert.Greater(t, fixed.Probes, 2*doubling.Probes)
	assert.Greater(t, fixed.Wasted(), 2*doubling.Wasted(), "every reopening costs calls on a broken downstream")
	assert.Greater(t, cand.Lost, 2*with.Lost)
	assert.Greater(t, no.Lost, 5*with.Lost)
	assert.Empty(t, call(t, with, "gateway->orders").Transitions)
}

// TestLowTraffic: a method whose window never holds min_requests calls
// never trips, whatever its error ratio; for so thin a method, opening on a
// few errors does more harm than missing a fault (behaviour.md §2 Policy,
// MinRequests).
func TestLowTraffic(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "low-traffic")
	no, with, cand := rep.Run(NoBreaker), rep.Run(WithBreaker), rep.Run(CandidateRun)
	require.NotNil(t, cand)
	c := call(t, with, "reconcile->ledger")
	assert.Empty(t, c.Transitions, "the default breaker never opens")
	assert.Less(t, c.PeakWindow, uint64(breaker.DefaultPolicy().MinRequests), "its window never held min_requests calls")
	assert.Greater(t, c.Failed, int64(300), "although every call failed for two minutes")
	assert.Equal(t, no.Entry.Good, with.Entry.Good)

	low := call(t, cand, "reconcile->ledger")
	assert.NotEmpty(t, low.Transitions, "with min_requests 5 it opens")
	assert.GreaterOrEqual(t, cand.Lost, with.Lost)
}

func TestSeeds000_CandidateFromAPolicy(t *testing.T) {
	t.Parallel()
	// What a team does with the package: try its own policy on the replay.
	s := seeds000Early(t)
	p := breaker.DefaultPolicy()
	p.MinRequests = 100000 // a policy that can never trip
	s.Candidate = &Candidate{Label: "never trips", Policy: p, Calls: []string{"orders->inventory"}}
	rep := run(t, s)
	cand := rep.Run(CandidateRun)
	require.NotNil(t, cand)
	assert.Equal(t, "never trips", cand.Label)
	assert.Empty(t, call(t, cand, "orders->inventory").Transitions)
	assert.Equal(t, breaker.DefaultPolicy(), call(t, cand, "gateway->orders").Policy, "calls not named keep the scenario's policy")
	assert.GreaterOrEqual(t, cand.Amplification, 4.0, "a breaker that never trips is no breaker")
}

// TestNoCallTimeout is the incident as its own account tells it: orders
// waits for inventory with no timeout of its own, so the 5 s slow answers
// hold its threads, and the entry falls to nothing in the fault's second
// second with breakers as without. The inventory breaker cannot help: a
// slow answer is a success when it comes, so its window sees the 40% of
// errors only. A breaker needs a call timeout.
func TestNoCallTimeout(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "no-call-timeout")
	base := rep.Run(Baseline)
	second := int(rep.FaultStart/time.Second) + 1 // the fault's second second
	for _, run := range []*RunResult{rep.Run(NoBreaker), rep.Run(WithBreaker)} {
		assert.Less(t, float64(run.Entry.Good[second]), 0.05*float64(base.Entry.Good[second]), "%s: the entry falls to nothing in the fault's second second", run.Label)
		for sec := second + 1; sec < int(rep.FaultEnd/time.Second); sec++ {
			assert.Zero(t, run.Entry.Good[sec], "%s: and answers nothing for the rest of the fault (second %d)", run.Label, sec)
		}
		assert.Equal(t, 1.0, run.WorstDrop, run.Label)
	}
	with := rep.Run(WithBreaker)
	inv := call(t, with, "orders->inventory")
	assert.Empty(t, inv.Transitions, "the inventory breaker never opens")
	assert.Zero(t, inv.TimedOut, "no call to inventory times out: there is no timeout")
	gw := call(t, with, "gateway->orders")
	opened, ok := gw.FirstOpen()
	require.True(t, ok, "the gateway's breaker opens on orders' timeouts")
	assert.Greater(t, opened-rep.FaultStart, 2*time.Second, "after the entry has fallen")
	assert.Greater(t, with.Unanswered, rep.Run(NoBreaker).Unanswered, "and, refusing after the fault, loses more than no breaker")

	// With orders' own timeout, the chain is seeds000, where the breaker
	// saves the entry.
	s, err := LoadScenario("seeds000")
	require.NoError(t, err)
	nt, err := LoadScenario("no-call-timeout")
	require.NoError(t, err)
	nt.Tiers[1].Calls[0].Timeout = 600 * time.Millisecond
	nt.Name, nt.Description, nt.Duration = s.Name, s.Description, s.Duration
	assert.Equal(t, s, nt, "no-call-timeout is seeds000 without orders' call timeout")
}
