package replay

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// A Scenario is a call chain, the load at its entry, the faults injected
// into it and the breaker policies on its calls. The JSON form is
// documented in the package overview; [ParseScenario] reads it and
// [LoadScenario] returns a shipped one. A Scenario built in Go follows the
// same rules (see [Scenario.Validate]); fields whose JSON default is not
// the Go zero value say so.
type Scenario struct {
	// Name identifies the scenario in reports and charts.
	Name string
	// Description says what the scenario shows and why its numbers are
	// what they are.
	Description string
	// Duration is the simulated time the scenario covers.
	Duration time.Duration
	// Seed seeds every random draw; the same seed gives the same report.
	Seed uint64
	// Entry is the traffic that arrives at the chain.
	Entry Entry
	// Tiers are the services of the chain.
	Tiers []Tier
	// Faults are injected in front of tiers for windows of time.
	Faults []Fault
	// Policy is the breaker policy of every call that has a breaker and no
	// policy of its own. The zero Policy means breaker.DefaultPolicy().
	Policy breaker.Policy
	// Candidate, if set, is a second policy tried in its own run.
	Candidate *Candidate
}

// Entry is the load at the chain's entry: requests from clients that give
// up after Timeout.
type Entry struct {
	// Tier is the name of the tier the requests arrive at.
	Tier string
	// Rate is the mean number of requests per second.
	Rate float64
	// Arrivals is how requests are spaced: Poisson (the default) or
	// Uniform.
	Arrivals Arrivals
	// Timeout is how long a client waits for an answer.
	Timeout time.Duration
}

// Arrivals is the arrival process at the entry.
type Arrivals string

const (
	// Poisson arrivals: exponential gaps, like independent users.
	Poisson Arrivals = "poisson"
	// Uniform arrivals: evenly spaced, like a load generator holding a
	// constant rate.
	Uniform Arrivals = "uniform"
)

// Tier is one service: a pool of workers in front of which requests wait
// in a queue. A request holds its worker for its own service time and then
// for every downstream call it makes, one after the other; that holding is
// what carries a slow downstream up the chain.
type Tier struct {
	// Name identifies the tier; calls and faults refer to it.
	Name string
	// Workers is the size of the worker pool (threads, goroutine limit).
	Workers int
	// Queue bounds the requests waiting for a worker, as a servlet
	// container's accept queue does; a request that finds it full is
	// refused at once, an error its caller sees without waiting (load
	// shedding). Unbounded (the JSON default) leaves it unbounded. 0
	// means no queue.
	Queue int
	// Deadlines is what the tier does with its callers' deadlines:
	// DeadlinesQueue (the default, also the zero value) drops a waiting
	// request whose caller has given up, DeadlinesIgnore serves it anyway,
	// DeadlinesPropagate also hands the time a request has left on to its
	// downstream calls.
	Deadlines Deadlines
	// Service is the distribution of the tier's own work per request.
	Service Service
	// Calls are the downstream calls each request makes, in order.
	Calls []Call
}

// Unbounded is the Tier.Queue of a queue without a bound.
const Unbounded = -1

// Deadlines is how a tier treats the time its callers are prepared to
// wait.
type Deadlines string

const (
	// DeadlinesQueue: a request still waiting for a worker when its
	// caller gives up leaves the queue; one that has a worker is served
	// to the end, as by a thread blocked on I/O that nobody interrupts.
	// The zero value means the same.
	DeadlinesQueue Deadlines = "queue"
	// DeadlinesIgnore: the tier never learns that a caller gave up; it
	// serves every request it accepted, as a server that reads requests
	// from its accept queue without looking at their age does.
	DeadlinesIgnore Deadlines = "ignore"
	// DeadlinesPropagate: as DeadlinesQueue, and each request carries the
	// earliest deadline of the chain above it (the client's, and every
	// caller's own timeout), as a gRPC deadline or a timeout header
	// does. The tier waits on a downstream call at most until that
	// deadline, makes no call once it has passed, and sends the
	// deadline along with the call.
	DeadlinesPropagate Deadlines = "propagate"
)

// Service is a distribution of service times.
type Service struct {
	// Dist is the shape: Exponential (the default), Lognormal or Constant.
	Dist Dist
	// Mean is the mean service time.
	Mean time.Duration
	// P99 is the 99th percentile of a Lognormal distribution, between
	// Mean and 14.9 × Mean. 0 means 3 × Mean.
	P99 time.Duration
}

// Dist names a service-time distribution.
type Dist string

const (
	Exponential Dist = "exponential"
	Lognormal   Dist = "lognormal"
	Constant    Dist = "constant"
)

// Call is a downstream call one tier makes while handling a request: the
// edge of the chain a breaker guards.
type Call struct {
	// To is the name of the called tier.
	To string
	// Probability is the fraction of requests that make this call, in
	// (0, 1]. The JSON default is 1.
	Probability float64
	// Timeout is how long the caller waits for an answer before it gives
	// up and frees its worker. With a breaker whose policy sets a shorter
	// Timeout, that one applies, as it would through the context the
	// breaker hands out. 0 (the JSON default) means the caller has no
	// timeout of its own: it waits for the answer however long it takes,
	// or until its request's deadline if its tier propagates deadlines.
	Timeout time.Duration
	// Retry, if set, makes the caller try a failed call again.
	Retry *Retry
	// Fallback makes a failed or refused call degrade the request instead
	// of failing it: the caller answers without this call's data (cached
	// stock, "unknown" shipping estimate). Without it the request fails.
	Fallback bool
	// NoBreaker leaves the call unguarded in every run. The JSON form is
	// "breaker": false.
	NoBreaker bool
	// Policy is this call's breaker policy; nil means Scenario.Policy.
	Policy *breaker.Policy
}

// Retry is a caller's retry policy for one call: a call that failed, timed
// out or was refused by a full queue is tried again after a backoff, up to
// Attempts tries in all, while a budget lasts. A call the breaker refused
// is not retried: the refusal says the downstream is known to be sick. The
// caller holds its worker through the backoff and the retries.
type Retry struct {
	// Attempts is the number of tries in all, the first one included, in
	// [2, MaxAttempts].
	Attempts int
	// Backoff is the wait before the first retry; each further retry
	// waits twice as long as the one before (no jitter, so that a run is
	// reproducible). 0 retries at once.
	Backoff time.Duration
	// Budget caps retries at this fraction of first tries, in (0, 1]:
	// each first try earns Budget tokens, each retry spends one, and at
	// most RetryReserve tokens are kept (the edge starts with them). 0
	// means no budget: every failed try may be retried.
	Budget float64
}

// MaxAttempts bounds Retry.Attempts; RetryReserve is the number of retry
// tokens an edge with a budget starts with and can bank.
const (
	MaxAttempts  = 10
	RetryReserve = 10
)

// Fault is a fault injected in front of a tier, as a fault-injection proxy
// would: errors and delays happen before the request reaches the tier's
// workers, so the caller's worker is held but the tier's are not.
type Fault struct {
	// Tier is the name of the faulty tier.
	Tier string
	// Start is when the fault begins, from the start of the scenario.
	Start time.Duration
	// Duration is how long each occurrence lasts.
	Duration time.Duration
	// Every and Repeat make the fault recur: Repeat occurrences (0 or 1
	// means once), each starting Every after the previous one.
	Every  time.Duration
	Repeat int
	// ErrorRate is the fraction of calls answered at once with an error.
	ErrorRate float64
	// SlowFraction is the fraction of calls delayed by SlowLatency
	// before they reach the tier. ErrorRate+SlowFraction is at most 1.
	SlowFraction float64
	SlowLatency  time.Duration
	// AddedLatency delays every call that is not answered with an error.
	AddedLatency time.Duration
	// CapacityLoss is the share of the tier's workers out of service, in
	// [0, 1): the tier keeps Workers − round(Workers × CapacityLoss)
	// of them, and at least one. Requests already running when it
	// begins finish; none starts while as many are busy as are left.
	CapacityLoss float64
	// Outage makes the tier unreachable: OutageHang (no answer, the
	// caller waits for its timeout) or OutageRefuse (connection refused
	// at once). It excludes the other effects.
	Outage Outage
	// ColdStart marks the tier as a freshly started instance for the
	// length of each occurrence: calls carry its start time
	// ([breaker.WithInstanceStart]), so a breaker with a Warmup leaves
	// their outcomes out of its window.
	ColdStart bool
}

// Outage is how an unreachable tier fails.
type Outage string

const (
	NoOutage     Outage = ""
	OutageHang   Outage = "hang"
	OutageRefuse Outage = "refuse"
)

// Candidate is a second policy to try in its own run, on the calls in
// Calls. It is given one of three ways: Overlay, a change laid over the
// policy each call runs under; Policies, a group policy document that
// gives each call the policy a group would; or Policy, one policy for
// every call. Setting more than one is an error.
type Candidate struct {
	// Label names the run in reports; default "candidate".
	Label string
	// Overlay is a breaker policy document ({"window": "5s"}) laid over
	// the policy each call in Calls runs under: its own, or the
	// scenario's. It names only the fields that change, and keeps the
	// rest of each call's policy. The scenario document's
	// candidate.policy is read into it.
	Overlay string
	// Policies is a group policy document, the one breaker.Group and the
	// command breaker-check read: each call in Calls runs the override
	// named by the call ("orders->inventory"), or else by the tier it
	// calls ("inventory"), or else by a method of that tier
	// ("inventory.GetStock", or a per-target key of one,
	// "inventory.GetStock@10.0.0.7"), or else Policies.Default (its zero
	// value is breaker.DefaultPolicy()). An override that names no call,
	// no called tier and no method of one is an error, and so are two
	// methods of one tier with different policies (a call of the scenario
	// is one breaker). The scenario document's candidate.policies is read
	// into it.
	Policies *breaker.GroupPolicy
	// Policy, if Overlay and Policies are not set, replaces the policy of
	// each call in Calls. The zero Policy means breaker.DefaultPolicy().
	Policy breaker.Policy
	// Calls names the calls ("orders->inventory") the candidate applies
	// to; empty means every call with a breaker.
	Calls []string
}

// policyOn is the candidate's policy for the call ref, whose own policy
// (or the scenario's) is own.
func (c *Candidate) policyOn(ref edgeRef, own breaker.Policy) (breaker.Policy, error) {
	switch {
	case c.Overlay != "":
		p := own
		err := p.UnmarshalJSON([]byte(c.Overlay))
		return p, err
	case c.Policies != nil:
		gp := *c.Policies
		for _, key := range []string{ref.name, ref.to} {
			if p, ok := gp.Overrides[key]; ok {
				return p, nil
			}
		}
		if methods := methodsOf(gp, ref.to); len(methods) > 0 {
			return gp.Overrides[methods[0]], nil
		}
		if gp.Default == (breaker.Policy{}) {
			return breaker.DefaultPolicy(), nil
		}
		return gp.Default, nil
	case c.Policy == (breaker.Policy{}):
		return breaker.DefaultPolicy(), nil
	}
	return c.Policy, nil
}

// methodsOf lists, in order, the keys of gp's overrides that name a
// method of tier ("tier.Method", or "tier.Method@target").
func methodsOf(gp breaker.GroupPolicy, tier string) []string {
	var out []string
	for k := range gp.Overrides {
		if m, _ := breaker.SplitKey(k); strings.HasPrefix(m, tier+".") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// appliesTo says whether the candidate applies to the call named name.
func (c *Candidate) appliesTo(name string) bool {
	return len(c.Calls) == 0 || contains(c.Calls, name)
}

// Limits that keep one run to a bounded amount of memory and time. A
// scenario beyond them is refused, not clamped.
const (
	MaxDuration    = time.Hour
	MaxRate        = 100_000          // entry requests per second
	MaxRequests    = 20_000_000       // entry requests per run
	MaxTiers       = 64               // tiers in a chain
	MaxCalls       = 16               // calls per tier
	MaxWorkers     = 100_000          // workers per tier
	MaxQueue       = 10_000_000       // queue bound per tier
	MaxFaultWindow = 10_000           // fault occurrences in all
	MaxLatency     = 10 * time.Minute // any single timeout, latency or service time

	// MaxCallsPerRequest bounds the downstream calls one entry request
	// can make through the chain, every call made and every retry tried:
	// a chain that fans out at each tier asks for a number of calls that
	// grows as a power of its depth.
	MaxCallsPerRequest = 10_000
	// MaxTierRequests bounds the requests one run simulates at all
	// tiers: the entry's requests (rate × duration) times one plus the
	// calls each can make.
	MaxTierRequests = 100_000_000
)

// lognormalMaxRatio bounds P99/Mean: a lognormal with mean m has a 99th
// percentile of at most m·e^(z²/2), z = 2.326, whatever its shape.
var lognormalMaxRatio = math.Exp(z99 * z99 / 2)

const z99 = 2.3263478740408408 // the standard normal's 99th percentile

// policy is the scenario's policy with the zero value read as the default.
func (s *Scenario) policy() breaker.Policy {
	if s.Policy == (breaker.Policy{}) {
		return breaker.DefaultPolicy()
	}
	return s.Policy
}

// edgeRef is a call with its place in the chain.
type edgeRef struct {
	name     string // "orders->inventory"
	from, to string
	tier     int // index of the calling tier
	call     Call
}

// calls lists every call of the chain in tier order.
func (s *Scenario) calls() []edgeRef {
	var out []edgeRef
	for i, t := range s.Tiers {
		for _, c := range t.Calls {
			out = append(out, edgeRef{name: t.Name + "->" + c.To, from: t.Name, to: c.To, tier: i, call: c})
		}
	}
	return out
}

// window is one occurrence of a fault.
type window struct{ start, end time.Duration }

func (f Fault) windows() []window {
	n := max(f.Repeat, 1)
	out := make([]window, 0, n)
	for k := 0; k < n; k++ {
		start := f.Start + time.Duration(k)*f.Every
		out = append(out, window{start, start + f.Duration})
	}
	return out
}

// FaultWindows returns every occurrence of every fault, clipped to the
// scenario, in order of start.
func (s *Scenario) FaultWindows() []Window {
	var out []Window
	for i, f := range s.Faults {
		for _, w := range f.windows() {
			if w.start >= s.Duration {
				continue
			}
			out = append(out, Window{Start: w.start, End: min(w.end, s.Duration), Tier: f.Tier, Fault: i})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out
}

// Window is one occurrence of a fault: [Start, End) on Tier.
type Window struct {
	Start, End time.Duration
	Tier       string
	Fault      int // index in Scenario.Faults
}

// Summary describes the fault in a few words, for chart subtitles.
func (f Fault) Summary() string {
	var parts []string
	switch f.Outage {
	case OutageHang:
		parts = append(parts, "outage (no answer)")
	case OutageRefuse:
		parts = append(parts, "outage (refused)")
	}
	if f.ErrorRate > 0 {
		parts = append(parts, fmt.Sprintf("%s errors", percent(f.ErrorRate)))
	}
	if f.SlowFraction > 0 {
		parts = append(parts, fmt.Sprintf("%s slow (+%v)", percent(f.SlowFraction), f.SlowLatency))
	}
	if f.AddedLatency > 0 {
		parts = append(parts, fmt.Sprintf("+%v latency", f.AddedLatency))
	}
	if f.CapacityLoss > 0 {
		parts = append(parts, fmt.Sprintf("%s of workers out", percent(f.CapacityLoss)))
	}
	if f.ColdStart {
		parts = append(parts, "cold start")
	}
	s := f.Tier + ": " + strings.Join(parts, ", ")
	if f.Repeat > 1 {
		s += fmt.Sprintf(", %v every %v ×%d", f.Duration, f.Every, f.Repeat)
	} else {
		s += fmt.Sprintf(" for %v", f.Duration)
	}
	return s
}

func percent(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", f*100), "0"), ".") + "%"
}
