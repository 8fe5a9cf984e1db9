package replay

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/govkit/breaker"
)

// RunKind says what a run of a scenario changes.
type RunKind int

const (
	// Baseline: no faults, no breakers. The reference every other run
	// is measured against, second by second.
	Baseline RunKind = iota
	// NoBreaker: the faults, and no breaker on any call.
	NoBreaker
	// WithBreaker: the faults, and the scenario's policies.
	WithBreaker
	// CandidateRun: the faults, and the candidate policy on its calls.
	CandidateRun
)

func (k RunKind) String() string {
	switch k {
	case Baseline:
		return "baseline"
	case NoBreaker:
		return "no breaker"
	case WithBreaker:
		return "with breaker"
	case CandidateRun:
		return "candidate"
	}
	return "run(?)"
}

// A Report holds the runs of one scenario.
type Report struct {
	Scenario *Scenario
	// Runs are the baseline, no-breaker and with-breaker runs, then the
	// candidate run if the scenario has a candidate.
	Runs []*RunResult
	// FaultStart and FaultEnd are the start of the first fault window and
	// the end of the last one; both zero if there are none.
	FaultStart, FaultEnd time.Duration
}

// Run returns the run of kind k, or nil.
func (r *Report) Run(k RunKind) *RunResult {
	for _, run := range r.Runs {
		if run.Kind == k {
			return run
		}
	}
	return nil
}

// RunResult is the outcome of one simulation of a scenario.
type RunResult struct {
	Kind  RunKind
	Label string
	// Entry counts the entry's requests per second of simulated time.
	Entry Series
	// Tiers holds the peak worker and queue use of each tier per second.
	Tiers []TierSeries
	// Calls holds what happened on each call of the chain.
	Calls []CallResult
	// Requests is the number of requests simulated, at every tier.
	Requests int64
	// Events is the number of events the simulation processed.
	Events int64

	// The rest compares the run with the baseline, second by second.

	// WorstDrop is the largest fraction of the baseline's entry goodput
	// lost in one second; WorstAt is the start of that second.
	WorstDrop float64
	WorstAt   time.Duration
	// Amplification is the goodput amplification, the one amplification
	// the reports print: the baseline's goodput divided by this run's, in
	// the worst second: how many times over the entry's capacity to answer
	// shrank (+Inf if nothing was answered).
	Amplification float64
	// Lost is the baseline's total goodput minus this run's.
	Lost int

	// FullWorstDrop and FullWorstAt are WorstDrop and WorstAt for the
	// entry's full answers: the good ones that no fallback degraded. A
	// breaker that answers everything from a fallback keeps the goodput
	// and loses every full answer.
	FullWorstDrop float64
	FullWorstAt   time.Duration
	// Unanswered is the number of entry requests that got no good answer:
	// answered with an error, or too late for the client.
	Unanswered int

	// Recovery is how long after the last fault ended full service came
	// back: the start of the first second from which the entry's full
	// answers are within 5% of the baseline's and stay so for 5 s (or to
	// the end of the run). Recovered is false if they never do.
	Recovery  time.Duration
	Recovered bool
}

// Full returns the entry's full answers per second: good and not
// degraded.
func (s Series) Full() []int {
	out := make([]int, len(s.Good))
	for i := range out {
		out[i] = s.Good[i] - s.Degraded[i]
	}
	return out
}

// Series counts entry requests per second. A request is counted in the
// second it ended; Offered counts arrivals.
type Series struct {
	Offered []int
	// Good is the requests answered successfully within the client's
	// timeout: the goodput. Degraded counts those of them that used a
	// fallback somewhere on the way.
	Good     []int
	Degraded []int
	// Failed is the requests answered with an error; TimedOut those the
	// client gave up on.
	Failed   []int
	TimedOut []int
}

func newSeries(n int) Series {
	return Series{
		Offered:  make([]int, n),
		Good:     make([]int, n),
		Degraded: make([]int, n),
		Failed:   make([]int, n),
		TimedOut: make([]int, n),
	}
}

// TierSeries is the peak use of one tier's workers and queue per second.
type TierSeries struct {
	Name    string
	Workers int
	Busy    []int
	Queue   []int
	// Offered counts the requests sent to the tier per second: every
	// call made to it, retries included, whether a fault in front of it
	// answered them or they reached its workers (at the entry tier, the
	// entry's requests).
	Offered []int
	// Abandoned is the number of requests the tier finished after their
	// caller had given up: work done for nobody, the mark of a chain in
	// congestion collapse.
	Abandoned int64
}

// FullSeconds is the number of seconds in which every worker was busy.
func (t TierSeries) FullSeconds() int {
	n := 0
	for _, b := range t.Busy {
		if b >= t.Workers {
			n++
		}
	}
	return n
}

// CallResult is what happened on one call of the chain in one run.
type CallResult struct {
	Name     string // "orders->inventory"
	From, To string
	// Breaker says whether the call was guarded in this run, and Policy
	// by what.
	Breaker bool
	Policy  breaker.Policy
	// Sent counts calls that went out, Rejected those the breaker
	// refused; Probes is the number of sent calls that were half-open
	// probes.
	Sent, Rejected, Probes int64
	// Retries counts the tries after the first (each is also in Sent, or
	// in Rejected if the breaker refused it); RetriesDenied the retries
	// the call's retry budget did not allow.
	Retries, RetriesDenied int64
	// Succeeded, Failed and TimedOut split the sent calls by outcome
	// (calls still in flight at the end are in none of them).
	Succeeded, Failed, TimedOut int64
	// WastedWork is the time callers' workers spent on calls that failed
	// or timed out: work spent on a broken downstream.
	WastedWork time.Duration
	// Transitions are the breaker's state changes, in order.
	Transitions []Transition
	// Counters are the breaker's counters at the end of the run.
	Counters breaker.Counters
	// PeakWindow is the largest number of calls the breaker's window held
	// at a second's end.
	PeakWindow uint64
}

// Wasted is the number of sent calls that failed or timed out.
func (c *CallResult) Wasted() int64 { return c.Failed + c.TimedOut }

// Opens is the number of transitions to Open.
func (c *CallResult) Opens() int {
	n := 0
	for _, t := range c.Transitions {
		if t.To == breaker.Open {
			n++
		}
	}
	return n
}

// FirstOpen returns when the breaker first opened.
func (c *CallResult) FirstOpen() (time.Duration, bool) {
	for _, t := range c.Transitions {
		if t.To == breaker.Open {
			return t.At, true
		}
	}
	return 0, false
}

// ClosedAt returns when the breaker last closed, if it ended the run
// closed after having opened.
func (c *CallResult) ClosedAt() (time.Duration, bool) {
	if n := len(c.Transitions); n > 0 && c.Transitions[n-1].To == breaker.Closed {
		return c.Transitions[n-1].At, true
	}
	return 0, false
}

// StateAt returns the breaker's state at t.
func (c *CallResult) StateAt(t time.Duration) breaker.State {
	st := breaker.Closed
	for _, tr := range c.Transitions {
		if tr.At > t {
			break
		}
		st = tr.To
	}
	return st
}

// TimeIn returns how long the breaker spent in state st before end.
func (c *CallResult) TimeIn(st breaker.State, end time.Duration) time.Duration {
	var total time.Duration
	cur, since := breaker.Closed, time.Duration(0)
	for _, tr := range c.Transitions {
		if cur == st {
			total += tr.At - since
		}
		cur, since = tr.To, tr.At
	}
	if cur == st && end > since {
		total += end - since
	}
	return total
}

// Transition is one change of a breaker's state.
type Transition struct {
	At        time.Duration // since the start of the scenario
	From, To  breaker.State
	Reason    breaker.Reason
	Snapshot  breaker.Snapshot
	Cooldown  time.Duration
	Doublings int // see breaker.Event.Doublings
	// Trip is, for a trip from closed, what tripped it, with the evidence
	// of its rule (breaker.Trip.String); zero otherwise.
	Trip breaker.Trip
}

// tripOf is the trip an event from closed to open makes, under a policy
// whose SlowCall is slowCall: the outage's own trip when it began the
// outage, else the rule and the window it judged.
func tripOf(ev breaker.Event, slowCall time.Duration) breaker.Trip {
	if ev.From != breaker.Closed || ev.To != breaker.Open {
		return breaker.Trip{}
	}
	if o := ev.Outage; o != nil && o.Since.Equal(ev.Time) {
		return o.Trip
	}
	t := breaker.Trip{Reason: ev.Reason, Window: ev.Snapshot}
	if ev.Reason == breaker.ReasonSlowRatio {
		t.SlowCall = slowCall
	}
	return t
}

// Run simulates s in each of its runs: baseline, no breaker, with breaker
// and, if s has a candidate, candidate. The runs are independent and go
// in parallel on up to GOMAXPROCS goroutines, all of which have returned
// when Run does; the report is the same for the same scenario whatever
// the parallelism.
func Run(s *Scenario) (*Report, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	specs := s.specs()
	runs := make([]*RunResult, len(specs))
	errs := make([]error, len(specs))
	inParallel(len(specs), func(i int) {
		sm, err := newSim(s, specs[i])
		if err != nil {
			errs[i] = err
			return
		}
		runs[i] = sm.run()
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	r := &Report{Scenario: s, Runs: runs}
	r.FaultStart, r.FaultEnd = s.faultSpan()
	for _, run := range runs[1:] {
		r.compare(run, runs[0])
	}
	return r, nil
}

// faultSpan is the start of the first fault window and the end of the
// last one; both zero if there are none.
func (s *Scenario) faultSpan() (start, end time.Duration) {
	ws := s.FaultWindows()
	if len(ws) == 0 {
		return 0, 0
	}
	start = ws[0].Start
	for _, w := range ws {
		end = max(end, w.End)
	}
	return start, end
}

// inParallel calls f(0), ..., f(n-1) on up to GOMAXPROCS goroutines and
// returns once every call has returned.
func inParallel(n int, f func(i int)) {
	sem := make(chan struct{}, max(1, min(runtime.GOMAXPROCS(0), n)))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// checkSeeds refuses an empty list of seeds or a zero seed.
func checkSeeds(seeds []uint64) error {
	if len(seeds) == 0 {
		return fmt.Errorf("replay: no seeds to run")
	}
	for i, seed := range seeds {
		if seed == 0 {
			return fmt.Errorf("replay: seeds[%d] is 0; seeds start at 1", i)
		}
	}
	return nil
}

func (s *Scenario) specs() []runSpec {
	edges := s.calls()
	none := make([]*breaker.Policy, len(edges))
	with := make([]*breaker.Policy, len(edges))
	base := s.policy()
	for e, ref := range edges {
		switch {
		case ref.call.NoBreaker:
		case ref.call.Policy != nil:
			p := *ref.call.Policy
			with[e] = &p
		default:
			with[e] = &base
		}
	}
	specs := []runSpec{
		{kind: Baseline, label: "baseline", faults: false, policies: none},
		{kind: NoBreaker, label: "no breaker", faults: true, policies: none},
		{kind: WithBreaker, label: "with breaker", faults: true, policies: with},
	}
	if c := s.Candidate; c != nil {
		cand := append([]*breaker.Policy(nil), with...)
		for e, ref := range edges {
			if with[e] != nil && c.appliesTo(ref.name) {
				// Validate has refused a candidate that fails here.
				if p, err := c.policyOn(ref, *with[e]); err == nil {
					cand[e] = &p
				}
			}
		}
		label := c.Label
		if label == "" {
			label = "candidate"
		}
		specs = append(specs, runSpec{kind: CandidateRun, label: label, faults: true, policies: cand})
	}
	return specs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// recoveryHold is how many seconds full answers must stay near the
// baseline for full service to count as back; recoveryLevel is how near.
const (
	recoveryHold  = 5
	recoveryLevel = 0.95
)

// worst finds the second in which got falls furthest below ref: the drop
// as a fraction of ref, its start, and ref/got then (+Inf if got is 0).
func worst(got, ref []int) (drop float64, at time.Duration, amp float64) {
	amp = 1
	for sec := range got {
		if ref[sec] == 0 {
			continue
		}
		if d := 1 - float64(got[sec])/float64(ref[sec]); d > drop {
			drop, at = d, time.Duration(sec)*time.Second
			if got[sec] == 0 {
				amp = math.Inf(1)
			} else {
				amp = float64(ref[sec]) / float64(got[sec])
			}
		}
	}
	return drop, at, amp
}

func (r *Report) compare(run, base *RunResult) {
	good, ref := run.Entry.Good, base.Entry.Good
	run.WorstDrop, run.WorstAt, run.Amplification = worst(good, ref)
	full, fullRef := run.Entry.Full(), base.Entry.Full()
	run.FullWorstDrop, run.FullWorstAt, _ = worst(full, fullRef)
	lost := 0
	for sec := range good {
		lost += ref[sec] - good[sec]
	}
	run.Lost = max(lost, 0)
	run.Unanswered = sum(run.Entry.Failed) + sum(run.Entry.TimedOut)
	if r.FaultEnd == 0 && r.FaultStart == 0 {
		run.Recovered = true
		return
	}
	// The first whole second after the fault.
	first := int((r.FaultEnd + time.Second - 1) / time.Second)
	for sec := first; sec < len(full); sec++ {
		ok := true
		for t := sec; t < min(sec+recoveryHold, len(full)); t++ {
			if float64(full[t]) < recoveryLevel*float64(fullRef[t]) {
				ok = false
				break
			}
		}
		if ok {
			run.Recovered = true
			run.Recovery = time.Duration(sec)*time.Second - r.FaultEnd
			return
		}
	}
}
