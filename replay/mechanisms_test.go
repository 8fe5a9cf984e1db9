package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The figures of the incident the seeds000 scenario is calibrated to: the
// entry held 1200 req/s; without breakers it fell to 150 req/s in its
// worst second (8× less); with the default policy it lost 21% at worst,
// and the inventory breaker opened in the first seconds of the fault.
// Each bound is the figure ±25%.
const (
	incidentWorstNoBreaker = 150.0
	incidentAmplification  = 8.0
	incidentDropWithPolicy = 0.21
	calibrationTolerance   = 0.25
)

func within(t *testing.T, got, want float64, what string) {
	t.Helper()
	lo, hi := want*(1-calibrationTolerance), want*(1+calibrationTolerance)
	assert.True(t, got >= lo && got <= hi, "%s: got %.3g, want %.3g ±25%% [%.3g, %.3g]", what, got, want, lo, hi)
}

// TestCalibration_Seeds000 pins the shipped replay of the incident to the
// incident's own figures.
func TestCalibration_Seeds000(t *testing.T) {
	rep := shippedReport(t, "seeds000")
	no, with := rep.Run(NoBreaker), rep.Run(WithBreaker)
	base := rep.Run(Baseline)

	sec := int(no.WorstAt / time.Second)
	within(t, float64(no.Entry.Good[sec]), incidentWorstNoBreaker, "no breaker: entry goodput in its worst second (req/s)")
	within(t, no.Amplification, incidentAmplification, "no breaker: amplification")
	within(t, with.WorstDrop, incidentDropWithPolicy, "default policy: worst drop of the entry's goodput")
	assert.InDelta(t, 1200, float64(base.Entry.Good[sec]), 1200*0.05, "the baseline holds the entry's 1200 req/s")

	opened, ok := call(t, with, "orders->inventory").FirstOpen()
	require.True(t, ok, "the inventory breaker opens")
	assert.LessOrEqual(t, opened-rep.FaultStart, 5*time.Second, "it opens in the first seconds of the fault")
}

// seeds000 returns a fresh copy of the calibrated scenario, cut to two
// minutes (the fault is over by 1:20) so that variants run fast.
func seeds000(t *testing.T) *Scenario {
	t.Helper()
	s, err := LoadScenario("seeds000")
	require.NoError(t, err)
	s.Duration = 2 * time.Minute
	return s
}

func runScenario(t *testing.T, s *Scenario) *Report {
	t.Helper()
	rep, err := Run(s)
	require.NoError(t, err)
	return rep
}

func worstGood(r *RunResult) int { return r.Entry.Good[int(r.WorstAt/time.Second)] }

// The gateway's bounded accept queue is what keeps part of the entry
// alive without breakers: a request that finds it full is refused at
// once, so the requests that do get in have waited less than the client
// will. Unbounded, the queue grows until every request in it has waited
// out its client, and the entry answers nothing in time.
func TestMechanism_AcceptQueueShedsLoad(t *testing.T) {
	s := seeds000(t)
	bounded := runScenario(t, s).Run(NoBreaker)
	s = seeds000(t)
	s.Tiers[0].Queue = Unbounded
	unbounded := runScenario(t, s).Run(NoBreaker)

	assert.Greater(t, worstGood(bounded), 100, "bounded: the entry keeps answering")
	assert.Less(t, worstGood(unbounded), 20, "unbounded: the entry answers next to nothing")
	assert.Greater(t, sum(bounded.Entry.Failed), 1000, "a full queue refuses requests at once")
	assert.Less(t, sum(unbounded.Entry.Failed), 10, "an unbounded one refuses none")
}

// backlog is a service of 10 workers (50 ms a request, 200 req/s) under
// 150 req/s whose database slows to 500 ms for 10 s: while it is slow the
// service manages 18 req/s and requests pile up in its queue.
func backlog(d Deadlines) *Scenario {
	return &Scenario{
		Duration: 40 * time.Second,
		Seed:     1,
		Entry:    Entry{Tier: "svc", Rate: 150, Arrivals: Uniform, Timeout: time.Second},
		Tiers: []Tier{
			{
				Name: "svc", Workers: 10, Queue: Unbounded, Deadlines: d,
				Service: Service{Dist: Constant, Mean: 50 * time.Millisecond},
				Calls:   []Call{{To: "db", Probability: 1, Timeout: 2 * time.Second, NoBreaker: true}},
			},
			{Name: "db", Workers: 100, Queue: Unbounded, Service: Service{Dist: Constant, Mean: time.Millisecond}},
		},
		Faults: []Fault{{Tier: "db", Start: 5 * time.Second, Duration: 10 * time.Second, AddedLatency: 500 * time.Millisecond}},
	}
}

// A tier that drops a waiting request whose caller has given up is back
// as soon as the fault is over: its queue only ever held requests someone
// still waited for. One that ignores deadlines first works off the backlog
// of requests nobody waits for any more, answering nothing in time.
func TestMechanism_DeadlinesDropAbandonedRequests(t *testing.T) {
	after := func(r *RunResult) int { return sum(r.Entry.Good[16:26]) } // the 10 s after the fault
	drop := runScenario(t, backlog(DeadlinesQueue)).Run(NoBreaker)
	serve := runScenario(t, backlog(DeadlinesIgnore)).Run(NoBreaker)

	assert.Greater(t, after(drop), 1200, "dropping: back to 150 req/s at once")
	assert.Less(t, after(serve), 300, "serving everyone: the backlog delays the recovery")
	assert.Greater(t, serve.Tiers[0].Abandoned, 10*drop.Tiers[0].Abandoned+100, "work for callers that are gone")
}

// Propagated deadlines let every tier of the chain stop waiting when the
// client does: with them the gateway's accept queue cannot fill with work
// nobody wants and the calibrated chain does not collapse.
func TestMechanism_DeadlinePropagationKeepsTheChainUp(t *testing.T) {
	s := seeds000(t)
	for i := range s.Tiers {
		s.Tiers[i].Deadlines = DeadlinesPropagate
	}
	rep := runScenario(t, s)
	no := rep.Run(NoBreaker)
	assert.Greater(t, worstGood(no), 600, "with deadlines propagated the entry keeps most of its goodput (worst second %v)", no.WorstAt)
}

// A tier's own timeout on its downstream call frees its worker: without
// it, orders holds a worker for the whole 5 s of every slow inventory call,
// its pool is full within a second, and even the default breaker, which
// cannot open before its window is mostly fault, comes too late to save
// the first seconds.
func TestMechanism_OwnTimeoutFreesTheWorker(t *testing.T) {
	s := seeds000(t)
	with := runScenario(t, s)
	s = seeds000(t)
	s.Tiers[1].Calls[0].Timeout = 0
	without := runScenario(t, s)

	assert.Less(t, with.Run(WithBreaker).WorstDrop, 0.3)
	assert.Greater(t, without.Run(WithBreaker).WorstDrop, 0.6, "without orders' own timeout the breaker cannot save the entry")
	assert.Less(t, worstGood(without.Run(NoBreaker)), 100)
}

// retrying returns seeds000 with a short accept queue (so that the chain
// sheds rather than collapses) and orders retrying inventory.
func retrying(t *testing.T, r *Retry) *Scenario {
	s := seeds000(t)
	s.Tiers[0].Queue = 100
	s.Tiers[1].Calls[0].Retry = r
	return s
}

// Retries are the classic amplifier: orders retrying each failed or timed
// out inventory call holds its workers for every try, so the fault costs
// the entry far more. A budget caps the retries at a fraction of first
// tries and gives most of it back; a backoff holds the worker longer still.
func TestMechanism_RetriesAmplifyBudgetCaps(t *testing.T) {
	none := runScenario(t, retrying(t, nil)).Run(NoBreaker)
	stormRep := runScenario(t, retrying(t, &Retry{Attempts: 3}))
	storm := stormRep.Run(NoBreaker)
	budget := runScenario(t, retrying(t, &Retry{Attempts: 3, Budget: 0.05})).Run(NoBreaker)
	backoff := runScenario(t, retrying(t, &Retry{Attempts: 3, Backoff: 100 * time.Millisecond})).Run(NoBreaker)

	inv := func(r *RunResult) *CallResult { return call(t, r, "orders->inventory") }
	assert.Zero(t, inv(none).Retries)
	assert.Greater(t, inv(storm).Retries, int64(10_000))
	assert.Greater(t, storm.WorstDrop, none.WorstDrop+0.2, "retries cost the entry far more (%.0f%% against %.0f%%)", storm.WorstDrop*100, none.WorstDrop*100)

	assert.Greater(t, inv(budget).RetriesDenied, int64(0), "the budget refuses retries")
	assert.Less(t, float64(inv(budget).Retries), 0.05*float64(inv(budget).Sent)+RetryReserve+1, "at most 5% of first tries, and the reserve")
	assert.Less(t, budget.WorstDrop, storm.WorstDrop-0.1, "the budget gives most of it back")

	assert.Greater(t, backoff.WorstDrop, storm.WorstDrop, "waiting out a backoff holds the worker longer")
	assert.Greater(t, stormRep.Run(WithBreaker).WorstDrop, 0.3, "the retries do their damage before the breaker can open")
}
