package replay

import (
	"bytes"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// pair is a two-tier chain, front -> back, small enough to reason about
// exactly: constant service times and evenly spaced arrivals.
func pair(rate float64, d time.Duration) *Scenario {
	return &Scenario{
		Name:     "pair",
		Duration: d,
		Seed:     7,
		Entry:    Entry{Tier: "front", Rate: rate, Arrivals: Uniform, Timeout: time.Second},
		Tiers: []Tier{
			{Name: "front", Workers: 50, Queue: Unbounded, Service: Service{Dist: Constant, Mean: 10 * ms},
				Calls: []Call{{To: "back", Probability: 1, Timeout: 200 * ms}}},
			{Name: "back", Workers: 50, Queue: Unbounded, Service: Service{Dist: Constant, Mean: 20 * ms}},
		},
		Policy: breaker.DefaultPolicy(),
	}
}

func run(t *testing.T, s *Scenario) *Report {
	t.Helper()
	rep, err := Run(s)
	require.NoError(t, err)
	return rep
}

func TestRun_HealthyChainAnswersEverything(t *testing.T) {
	rep := run(t, pair(100, 20*time.Second))
	base := rep.Run(Baseline)
	assert.Equal(t, 2000, sum(base.Entry.Offered))
	// Every request takes 30 ms, so only the last 30 ms of arrivals are
	// still in flight at the end.
	assert.InDelta(t, 2000, sum(base.Entry.Good), 3)
	assert.Zero(t, sum(base.Entry.Failed)+sum(base.Entry.TimedOut))
	for _, kind := range []RunKind{NoBreaker, WithBreaker} {
		r := rep.Run(kind)
		assert.Equal(t, base.Entry.Good, r.Entry.Good, "%s: without a fault every run is the baseline", r.Label)
		assert.Zero(t, r.WorstDrop)
		assert.Equal(t, 1.0, r.Amplification)
		assert.True(t, r.Recovered)
	}
	c := call(t, rep.Run(WithBreaker), "front->back")
	assert.True(t, c.Breaker)
	assert.Empty(t, c.Transitions)
	assert.EqualValues(t, c.Succeeded, c.Counters.Successes, "the breaker saw every answer")
	assert.Nil(t, rep.Run(CandidateRun))
}

func TestRun_FullQueueRefuses(t *testing.T) {
	s := pair(20, 10*time.Second)
	// One worker, 100 ms a request, no queue: room for 10 of the 20
	// requests a second; the others are refused at once.
	s.Tiers = s.Tiers[1:]
	s.Tiers[0] = Tier{Name: "back", Workers: 1, Queue: 0, Service: Service{Dist: Constant, Mean: 100 * ms}}
	s.Entry.Tier = "back"
	base := run(t, s).Run(Baseline)
	assert.InDelta(t, 100, sum(base.Entry.Good), 1)
	assert.InDelta(t, 100, sum(base.Entry.Failed), 1)
	assert.Zero(t, sum(base.Entry.TimedOut))
	assert.Equal(t, 1, base.Tiers[0].Busy[5])
	assert.Zero(t, maxOf(base.Tiers[0].Queue))
}

func TestRun_WaitingPastTheCallersTimeoutFails(t *testing.T) {
	s := pair(20, 10*time.Second)
	// One worker, 100 ms a request, an unbounded queue and clients that
	// wait 500 ms: the queue holds what arrives within a timeout and no
	// more, because a request whose client has gone leaves it.
	s.Tiers = s.Tiers[1:]
	s.Tiers[0] = Tier{Name: "back", Workers: 1, Queue: Unbounded, Service: Service{Dist: Constant, Mean: 100 * ms}}
	s.Entry.Tier = "back"
	s.Entry.Timeout = 500 * ms
	base := run(t, s).Run(Baseline)
	assert.LessOrEqual(t, maxOf(base.Tiers[0].Queue), 11)
	assert.Greater(t, sum(base.Entry.TimedOut), 50)
	// The worker stays busy; some of what it finishes, its client has
	// given up on: goodput is below the 10/s it processes.
	assert.Less(t, sum(base.Entry.Good), 100)
	assert.Greater(t, base.Tiers[0].Abandoned, int64(0))
}

func TestRun_HangingCallsCountAsTimeouts(t *testing.T) {
	s := pair(100, 60*time.Second)
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 20 * time.Second, Outage: OutageHang}}
	rep := run(t, s)

	no := call(t, rep.Run(NoBreaker), "front->back")
	assert.InDelta(t, 2000, no.TimedOut, 5, "every call in the outage waits for its timeout")
	assert.Zero(t, no.Failed)
	assert.InDelta(t, 2000*(200*ms).Seconds(), no.WastedWork.Seconds(), 2, "each held its caller's worker for the timeout")

	with := call(t, rep.Run(WithBreaker), "front->back")
	open, ok := with.FirstOpen()
	require.True(t, ok)
	assert.Greater(t, open, 10*time.Second)
	trip := with.Transitions[0]
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "a call nobody answers is a timeout")
	assert.Less(t, with.TimedOut, no.TimedOut/2)
}

func TestRun_RefusedConnectionsCountAsTimeouts(t *testing.T) {
	s := pair(100, 40*time.Second)
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 20 * time.Second, Outage: OutageRefuse}}
	rep := run(t, s)
	with := call(t, rep.Run(WithBreaker), "front->back")
	require.NotEmpty(t, with.Transitions)
	trip := with.Transitions[0]
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "nothing answered: behaviour.md §3 counts it as a timeout")
	assert.Zero(t, with.WastedWork, "a refusal costs no time")
	no := rep.Run(NoBreaker)
	assert.InDelta(t, 2000, sum(no.Entry.Failed), 2, "without a fallback each refusal fails its request")
}

func TestRun_FallbackDegradesInsteadOfFailing(t *testing.T) {
	s := pair(100, 30*time.Second)
	s.Tiers[0].Calls[0].Fallback = true
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 10 * time.Second, ErrorRate: 1}}
	rep := run(t, s)
	for _, kind := range []RunKind{NoBreaker, WithBreaker} {
		r := rep.Run(kind)
		assert.Zero(t, sum(r.Entry.Failed), r.Label)
		assert.InDelta(t, sum(rep.Run(Baseline).Entry.Good), sum(r.Entry.Good), 5, r.Label)
	}
	assert.InDelta(t, 1000, sum(rep.Run(NoBreaker).Entry.Degraded), 5, "one degraded answer per failed call")
	// The breaker opens early in the fault and its 30 s cooldown outlasts
	// the run: every answer from then on is degraded, the fault's and the
	// cooldown's alike.
	with := call(t, rep.Run(WithBreaker), "front->back")
	assert.Greater(t, with.Rejected, int64(1500), "an open breaker's refusals take the fallback too")
	assert.InDelta(t, 2000, sum(rep.Run(WithBreaker).Entry.Degraded), 5)
}

func TestRun_PolicyTimeoutShortensTheCall(t *testing.T) {
	s := pair(100, 30*time.Second)
	s.Tiers[1].Service.Mean = 150 * ms // within the call's 200 ms
	s.Tiers[0].Calls[0].Timeout = 200 * ms
	p := breaker.DefaultPolicy()
	p.CallTimeout = 100 * ms
	s.Tiers[0].Calls[0].Policy = &p
	rep := run(t, s)

	no := call(t, rep.Run(NoBreaker), "front->back")
	assert.Zero(t, no.TimedOut, "without the breaker the call has 200 ms")
	with := call(t, rep.Run(WithBreaker), "front->back")
	assert.Greater(t, with.TimedOut, int64(0), "the breaker's deadline is the call's")
	require.NotEmpty(t, with.Transitions)
	assert.Equal(t, with.Transitions[0].Snapshot.Failures, with.Transitions[0].Snapshot.Timeouts)
}

func TestRun_ProbabilityPicksAShareOfRequests(t *testing.T) {
	s := pair(200, 30*time.Second)
	s.Entry.Arrivals = Poisson
	s.Tiers[0].Calls[0].Probability = 0.25
	base := run(t, s).Run(Baseline)
	c := call(t, base, "front->back")
	offered := float64(sum(base.Entry.Offered))
	assert.InDelta(t, 0.25, float64(c.Sent)/offered, 0.02)
}

// TestRun_BreakersReadSimulatedTime checks the breakers' clock is the
// simulation's: a cooldown of exactly 30 s (no jitter) ends 30 s of
// simulated time after the trip, whatever the wall clock did meanwhile.
func TestRun_BreakersReadSimulatedTime(t *testing.T) {
	s := pair(100, 2*time.Minute)
	s.Policy.Jitter = 0
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 5 * time.Second, ErrorRate: 1}}
	with := call(t, run(t, s).Run(WithBreaker), "front->back")
	require.GreaterOrEqual(t, len(with.Transitions), 3)
	open, half, closed := with.Transitions[0], with.Transitions[1], with.Transitions[2]
	assert.Equal(t, breaker.Open, open.To)
	assert.Equal(t, 30*time.Second, open.Cooldown)
	assert.Equal(t, breaker.HalfOpen, half.To)
	// Half-open is noticed by the first call after the cooldown: within
	// one gap between arrivals (10 ms).
	assert.GreaterOrEqual(t, half.At-open.At, 30*time.Second)
	assert.Less(t, half.At-open.At, 30*time.Second+10*ms)
	assert.Equal(t, breaker.Closed, closed.To)
	assert.Equal(t, breaker.ReasonProbesPassed, closed.Reason)
	assert.EqualValues(t, 3, with.Probes)
	assert.EqualValues(t, 3, with.Counters.ProbesPassed)
	at, ok := with.ClosedAt()
	require.True(t, ok)
	assert.Equal(t, closed.At, at)
	assert.Equal(t, breaker.Open, with.StateAt(open.At+time.Second))
	assert.Equal(t, breaker.Closed, with.StateAt(closed.At))
	assert.InDelta(t, (half.At - open.At).Seconds(), with.TimeIn(breaker.Open, s.Duration).Seconds(), 1e-9)
}

func TestRun_ColdInstanceIsExemptDuringWarmup(t *testing.T) {
	s := pair(100, 2*time.Minute)
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 50 * time.Second, ErrorRate: 0.8, ColdStart: true}}
	s.Candidate = &Candidate{Label: "no warmup", Policy: breaker.DefaultPolicy()}
	s.Candidate.Policy.Warmup = 0
	rep := run(t, s)
	with := call(t, rep.Run(WithBreaker), "front->back")
	assert.Empty(t, with.Transitions, "warmup (60 s) covers the 50 s of errors")
	assert.InDelta(t, 5000, with.Counters.Exempt, 10, "every call to the cold instance is left out of the window")
	cand := call(t, rep.Run(CandidateRun), "front->back")
	assert.NotEmpty(t, cand.Transitions)
	assert.Zero(t, cand.Counters.Exempt)
}

func TestRun_Deterministic(t *testing.T) {
	s := seeds000Early(t)
	s.Duration = 20 * time.Second // the fault, and the breaker's trip at 0:14 with its jittered cooldown
	render := func() (string, string) {
		rep := run(t, s)
		var text, svg bytes.Buffer
		require.NoError(t, rep.WriteText(&text, TextOptions{Full: true}))
		require.NoError(t, rep.WriteSVG(&svg))
		return text.String(), svg.String()
	}
	text1, svg1 := render()
	// Runs are spread over goroutines; on one processor they run one
	// after the other. The report must not notice.
	prev := runtime.GOMAXPROCS(1)
	text2, svg2 := render()
	runtime.GOMAXPROCS(prev)
	assert.Equal(t, text1, text2, "same scenario and seed, same text")
	assert.Equal(t, svg1, svg2, "same scenario and seed, same chart")

	s.Seed++
	text3, _ := render()
	assert.NotEqual(t, text1, text3, "the seed drives the draws")
}

func TestRun_AmplificationWhenNothingIsAnswered(t *testing.T) {
	s := pair(100, 30*time.Second)
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 5 * time.Second, Outage: OutageHang}}
	s.Tiers[0].Calls[0].NoBreaker = true
	rep := run(t, s)
	no := rep.Run(NoBreaker)
	assert.Equal(t, 1.0, no.WorstDrop)
	assert.True(t, math.IsInf(no.Amplification, 1))
	assert.GreaterOrEqual(t, no.WorstAt, 10*time.Second)
	assert.Less(t, no.WorstAt, 16*time.Second)
	assert.True(t, no.Recovered)
	assert.LessOrEqual(t, no.Recovery, time.Second)
	assert.Equal(t, no.Entry.Good, rep.Run(WithBreaker).Entry.Good, "an unguarded call is the same in every run")
}

func TestRun_ExtremeRatesEnd(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{1e-300, 0.01, MaxRate} {
		s := pair(rate, 2*time.Second)
		s.Tiers[1].Workers = MaxWorkers
		rep := run(t, s)
		assert.LessOrEqual(t, float64(sum(rep.Run(Baseline).Entry.Offered)), rate*2+1, "rate %v", rate)
	}
}
