package replay

import (
	"encoding/json"
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
	// Queue bounds the requests waiting for a worker; a request that
	// finds it full is refused at once. Unbounded (the JSON default)
	// leaves it unbounded. 0 means no queue. Either way a waiting request
	// whose caller has given up leaves the queue: a request that cannot
	// get a worker within its caller's timeout fails.
	Queue int
	// Service is the distribution of the tier's own work per request.
	Service Service
	// Calls are the downstream calls each request makes, in order.
	Calls []Call
}

// Unbounded is the Tier.Queue of a queue without a bound.
const Unbounded = -1

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
	// Timeout is how long the caller waits for an answer. With a breaker
	// whose policy sets a shorter Timeout, that one applies, as it would
	// through the context the breaker hands out.
	Timeout time.Duration
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

// Candidate is a second policy to try in its own run.
type Candidate struct {
	// Label names the run in reports; default "candidate".
	Label string
	// Policy replaces the policy of the calls in Calls.
	Policy breaker.Policy
	// Calls names the calls ("orders->inventory") the candidate applies
	// to; empty means every call with a breaker.
	Calls []string
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
	maxLatency     = 10 * time.Minute // any single timeout, latency or service time
)

// lognormalMaxRatio bounds P99/Mean: a lognormal with mean m has a 99th
// percentile of at most m·e^(z²/2), z = 2.326, whatever its shape.
var lognormalMaxRatio = math.Exp(z99 * z99 / 2)

const z99 = 2.3263478740408408 // the standard normal's 99th percentile

// ParseScenario decodes a JSON scenario and validates it. Decoding is
// strict: unknown fields and values of the wrong type are errors. The error,
// if any, is a *[ScenarioError] naming every bad field by its path.
func ParseScenario(data []byte) (*Scenario, error) {
	var p problems
	s := decodeScenario(&p, data)
	if err := p.err(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func decodeScenario(p *problems, data []byte) *Scenario {
	s := &Scenario{Seed: 1, Policy: breaker.DefaultPolicy()}
	o, ok := newObject(p, "", data)
	if !ok {
		return s
	}
	o.str("name", &s.Name)
	o.str("description", &s.Description)
	o.duration("duration", &s.Duration)
	o.uint64("seed", &s.Seed)
	// The scenario's policy comes first: calls and the candidate overlay
	// their documents onto it.
	o.policy("policy", &s.Policy)
	if raw := o.take("entry"); raw != nil {
		if eo, ok := newObject(p, "entry", raw); ok {
			s.Entry = decodeEntry(eo)
		}
	} else {
		p.add("entry", "required")
	}
	if items, ok := o.array("tiers"); ok {
		for i, raw := range items {
			if to, ok := newObject(p, fmt.Sprintf("tiers[%d]", i), raw); ok {
				s.Tiers = append(s.Tiers, decodeTier(to, s.Policy))
			} else {
				s.Tiers = append(s.Tiers, Tier{})
			}
		}
	}
	if items, ok := o.array("faults"); ok {
		for i, raw := range items {
			if fo, ok := newObject(p, fmt.Sprintf("faults[%d]", i), raw); ok {
				s.Faults = append(s.Faults, decodeFault(fo))
			} else {
				s.Faults = append(s.Faults, Fault{})
			}
		}
	}
	if raw := o.take("candidate"); raw != nil {
		if co, ok := newObject(p, "candidate", raw); ok {
			s.Candidate = decodeCandidate(co, s.Policy)
		}
	}
	o.done()
	return s
}

func decodeEntry(o object) Entry {
	e := Entry{Arrivals: Poisson}
	o.str("tier", &e.Tier)
	o.number("rate", &e.Rate)
	var a string
	if o.str("arrivals", &a) {
		e.Arrivals = Arrivals(a)
	}
	o.duration("timeout", &e.Timeout)
	o.done()
	return e
}

func decodeTier(o object, base breaker.Policy) Tier {
	t := Tier{Queue: Unbounded}
	o.str("name", &t.Name)
	o.integer("workers", &t.Workers)
	o.integer("queue", &t.Queue)
	if raw := o.take("service"); raw != nil {
		if so, ok := newObject(o.p, o.field("service"), raw); ok {
			t.Service = decodeService(so)
		}
	}
	if items, ok := o.array("calls"); ok {
		for i, raw := range items {
			if co, ok := newObject(o.p, fmt.Sprintf("%s[%d]", o.field("calls"), i), raw); ok {
				t.Calls = append(t.Calls, decodeCall(co, base))
			} else {
				t.Calls = append(t.Calls, Call{Probability: 1})
			}
		}
	}
	o.done()
	return t
}

func decodeService(o object) Service {
	s := Service{Dist: Exponential}
	var d string
	if o.str("dist", &d) {
		s.Dist = Dist(d)
	}
	o.duration("mean", &s.Mean)
	o.duration("p99", &s.P99)
	o.done()
	return s
}

func decodeCall(o object, base breaker.Policy) Call {
	c := Call{Probability: 1}
	o.str("to", &c.To)
	o.number("probability", &c.Probability)
	o.duration("timeout", &c.Timeout)
	o.boolean("fallback", &c.Fallback)
	on := true
	o.boolean("breaker", &on)
	c.NoBreaker = !on
	if o.has("policy") {
		if !on {
			o.p.add(o.field("policy"), `is set but "breaker" is false`)
		}
		q := base
		if o.policy("policy", &q) {
			c.Policy = &q
		}
	}
	o.done()
	return c
}

func decodeFault(o object) Fault {
	var f Fault
	o.str("tier", &f.Tier)
	o.duration("start", &f.Start)
	o.duration("duration", &f.Duration)
	o.duration("every", &f.Every)
	o.integer("repeat", &f.Repeat)
	o.number("error_rate", &f.ErrorRate)
	o.number("slow_fraction", &f.SlowFraction)
	o.duration("slow_latency", &f.SlowLatency)
	o.duration("added_latency", &f.AddedLatency)
	var out string
	if o.str("outage", &out) {
		f.Outage = Outage(out)
	}
	o.boolean("cold_start", &f.ColdStart)
	o.done()
	return f
}

func decodeCandidate(o object, base breaker.Policy) *Candidate {
	c := &Candidate{Policy: base}
	o.str("label", &c.Label)
	o.policy("policy", &c.Policy)
	if items, ok := o.array("calls"); ok {
		for i, raw := range items {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				o.p.add(fmt.Sprintf("%s[%d]", o.field("calls"), i), `want a call name such as "orders->inventory", got %s`, short(raw))
				continue
			}
			c.Calls = append(c.Calls, name)
		}
	}
	o.done()
	return c
}

// Validate reports every problem of s by the JSON path of its field, as a
// *[ScenarioError], or nil.
func (s *Scenario) Validate() error {
	var p problems
	s.check(&p)
	return p.err()
}

func (s *Scenario) check(p *problems) {
	switch {
	case s.Duration <= 0:
		p.add("duration", "must be positive, got %v", s.Duration)
	case s.Duration > MaxDuration:
		p.add("duration", "must be at most %v, got %v", MaxDuration, s.Duration)
	}
	policyProblems(p, "policy", s.policy())

	index := make(map[string]int, len(s.Tiers))
	switch {
	case len(s.Tiers) == 0:
		p.add("tiers", "required: at least one tier")
	case len(s.Tiers) > MaxTiers:
		p.add("tiers", "at most %d tiers, got %d", MaxTiers, len(s.Tiers))
	}
	for i, t := range s.Tiers {
		path := fmt.Sprintf("tiers[%d]", i)
		switch {
		case t.Name == "":
			p.add(path+".name", "required")
		case strings.Contains(t.Name, "->") || strings.ContainsAny(t.Name, " \t\n"):
			p.add(path+".name", `must not contain "->" or spaces, got %q`, t.Name)
		default:
			if j, dup := index[t.Name]; dup {
				p.add(path+".name", "%q is already the name of tiers[%d]", t.Name, j)
			} else {
				index[t.Name] = i
			}
		}
	}
	s.checkEntry(p, index)
	for i, t := range s.Tiers {
		s.checkTier(p, fmt.Sprintf("tiers[%d]", i), t, index)
	}
	s.checkCycles(p, index)
	s.checkFaults(p, index)
	s.checkCandidate(p)
}

func (s *Scenario) checkEntry(p *problems, index map[string]int) {
	e := s.Entry
	if e.Tier == "" {
		p.add("entry.tier", "required")
	} else if _, ok := index[e.Tier]; !ok {
		p.add("entry.tier", "no tier is named %q (tiers: %s)", e.Tier, s.tierNames())
	}
	switch {
	case !(e.Rate > 0) || math.IsInf(e.Rate, 0):
		p.add("entry.rate", "must be a positive number of requests per second, got %v", e.Rate)
	case e.Rate > MaxRate:
		p.add("entry.rate", "must be at most %d requests per second, got %v", MaxRate, e.Rate)
	case s.Duration > 0 && e.Rate*s.Duration.Seconds() > MaxRequests:
		p.add("entry.rate", "%v requests per second for %v is more than %d requests", e.Rate, s.Duration, MaxRequests)
	}
	switch e.Arrivals {
	case "", Poisson, Uniform:
	default:
		p.add("entry.arrivals", `must be "poisson" or "uniform", got %q`, e.Arrivals)
	}
	checkLatency(p, "entry.timeout", e.Timeout, true)
}

func (s *Scenario) checkTier(p *problems, path string, t Tier, index map[string]int) {
	if t.Workers < 1 || t.Workers > MaxWorkers {
		p.add(path+".workers", "must be in [1, %d], got %d", MaxWorkers, t.Workers)
	}
	if t.Queue < Unbounded || t.Queue > MaxQueue {
		p.add(path+".queue", "must be in [0, %d] (leave it out for an unbounded queue), got %d", MaxQueue, t.Queue)
	}
	sp := path + ".service"
	switch t.Service.Dist {
	case "", Exponential, Constant:
		if t.Service.P99 != 0 {
			p.add(sp+".p99", "applies to a lognormal distribution only")
		}
	case Lognormal:
	default:
		p.add(sp+".dist", `must be "exponential", "lognormal" or "constant", got %q`, t.Service.Dist)
	}
	if checkLatency(p, sp+".mean", t.Service.Mean, true) && t.Service.Dist == Lognormal && t.Service.P99 != 0 {
		lo, hi := t.Service.Mean, time.Duration(float64(t.Service.Mean)*lognormalMaxRatio)
		if t.Service.P99 <= lo || t.Service.P99 > hi {
			p.add(sp+".p99", "must be above the mean (%v) and at most %v (14.9 × mean) for a lognormal, got %v", lo, hi, t.Service.P99)
		}
	}
	if len(t.Calls) > MaxCalls {
		p.add(path+".calls", "at most %d calls, got %d", MaxCalls, len(t.Calls))
	}
	seen := map[string]int{}
	for j, c := range t.Calls {
		cp := fmt.Sprintf("%s.calls[%d]", path, j)
		switch _, ok := index[c.To]; {
		case c.To == "":
			p.add(cp+".to", "required")
		case !ok:
			p.add(cp+".to", "no tier is named %q (tiers: %s)", c.To, s.tierNames())
		case c.To == t.Name:
			p.add(cp+".to", "a tier cannot call itself")
		default:
			if k, dup := seen[c.To]; dup {
				p.add(cp+".to", "%s already calls %s in calls[%d]", t.Name, c.To, k)
			}
			seen[c.To] = j
		}
		if !(c.Probability > 0 && c.Probability <= 1) {
			p.add(cp+".probability", "must be in (0, 1], got %v", c.Probability)
		}
		checkLatency(p, cp+".timeout", c.Timeout, true)
		if c.Policy != nil {
			if c.NoBreaker {
				p.add(cp+".policy", `is set but "breaker" is false`)
			}
			policyProblems(p, cp+".policy", *c.Policy)
		}
	}
}

// checkCycles refuses a chain in which a request could call itself: the
// simulation would then never finish a request it started.
func (s *Scenario) checkCycles(p *problems, index map[string]int) {
	const (
		unseen = iota
		active
		finished
	)
	mark := make([]int, len(s.Tiers))
	var stack []string
	reported := false
	var visit func(i int)
	visit = func(i int) {
		mark[i] = active
		stack = append(stack, s.Tiers[i].Name)
		for j, c := range s.Tiers[i].Calls {
			k, ok := index[c.To]
			if !ok || k == i || reported {
				continue
			}
			switch mark[k] {
			case active:
				from := 0
				for stack[from] != c.To {
					from++
				}
				cycle := append(append([]string(nil), stack[from:]...), c.To)
				p.add(fmt.Sprintf("tiers[%d].calls[%d].to", i, j), "makes a cycle: %s", strings.Join(cycle, " -> "))
				reported = true
			case unseen:
				visit(k)
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = finished
	}
	for i := range s.Tiers {
		if mark[i] == unseen && !reported {
			visit(i)
		}
	}
}

func (s *Scenario) checkFaults(p *problems, index map[string]int) {
	type occurrence struct {
		start, end time.Duration
		fault      int
	}
	byTier := map[string][]occurrence{}
	windows := 0
	for i, f := range s.Faults {
		path := fmt.Sprintf("faults[%d]", i)
		if f.Tier == "" {
			p.add(path+".tier", "required")
		} else if _, ok := index[f.Tier]; !ok {
			p.add(path+".tier", "no tier is named %q (tiers: %s)", f.Tier, s.tierNames())
		}
		if f.Start < 0 || (s.Duration > 0 && f.Start >= s.Duration) {
			p.add(path+".start", "must be in [0, duration (%v)), got %v", s.Duration, f.Start)
		}
		if f.Duration <= 0 {
			p.add(path+".duration", "must be positive, got %v", f.Duration)
		}
		switch {
		case f.Repeat < 0 || f.Repeat > MaxFaultWindow:
			p.add(path+".repeat", "must be in [0, %d], got %d", MaxFaultWindow, f.Repeat)
		case f.Repeat > 1 && f.Every < f.Duration:
			p.add(path+".every", "must be at least duration (%v) when repeat is %d, got %v", f.Duration, f.Repeat, f.Every)
		case f.Repeat <= 1 && f.Every != 0:
			p.add(path+".every", "is set but repeat is %d; set repeat to make the fault recur", f.Repeat)
		}
		okErr := checkFraction(p, path+".error_rate", f.ErrorRate)
		okSlow := checkFraction(p, path+".slow_fraction", f.SlowFraction)
		if okErr && okSlow && f.ErrorRate+f.SlowFraction > 1 {
			p.add(path+".slow_fraction", "error_rate + slow_fraction must be at most 1, got %v + %v", f.ErrorRate, f.SlowFraction)
		}
		switch {
		case f.SlowFraction > 0:
			checkLatency(p, path+".slow_latency", f.SlowLatency, true)
		case f.SlowLatency != 0:
			p.add(path+".slow_latency", "is set but slow_fraction is 0")
		}
		checkLatency(p, path+".added_latency", f.AddedLatency, false)
		switch f.Outage {
		case NoOutage:
			if f.ErrorRate == 0 && f.SlowFraction == 0 && f.AddedLatency == 0 && !f.ColdStart {
				p.add(path, "does nothing: set error_rate, slow_fraction, added_latency, outage or cold_start")
			}
		case OutageHang, OutageRefuse:
			if f.ErrorRate != 0 || f.SlowFraction != 0 || f.AddedLatency != 0 {
				p.add(path+".outage", "excludes error_rate, slow_fraction and added_latency: an unreachable tier answers nothing")
			}
		default:
			p.add(path+".outage", `must be "hang" or "refuse", got %q`, f.Outage)
		}
		if f.Duration <= 0 || f.Repeat < 0 || f.Repeat > MaxFaultWindow {
			continue
		}
		for _, w := range f.windows() {
			windows++
			if windows <= MaxFaultWindow {
				byTier[f.Tier] = append(byTier[f.Tier], occurrence{w.start, w.end, i})
			}
		}
	}
	if windows > MaxFaultWindow {
		p.add("faults", "at most %d fault occurrences in all, got %d", MaxFaultWindow, windows)
	}
	tiers := make([]string, 0, len(byTier))
	for t := range byTier {
		tiers = append(tiers, t)
	}
	sort.Strings(tiers)
	for _, t := range tiers {
		occ := byTier[t]
		sort.SliceStable(occ, func(a, b int) bool { return occ[a].start < occ[b].start })
		for k := 1; k < len(occ); k++ {
			if occ[k].start < occ[k-1].end {
				a, b := occ[k-1].fault, occ[k].fault
				if a > b {
					a, b = b, a
				}
				p.add(fmt.Sprintf("faults[%d]", b), "overlaps faults[%d] on tier %s at %v; one fault at a time per tier", a, t, occ[k].start)
				break
			}
		}
	}
}

func (s *Scenario) checkCandidate(p *problems) {
	c := s.Candidate
	if c == nil {
		return
	}
	policyProblems(p, "candidate.policy", c.Policy)
	guarded := map[string]bool{}
	for _, e := range s.calls() {
		guarded[e.name] = !e.call.NoBreaker
	}
	for i, name := range c.Calls {
		on, ok := guarded[name]
		switch {
		case !ok:
			p.add(fmt.Sprintf("candidate.calls[%d]", i), "no call is named %q (calls: %s)", name, s.callNames())
		case !on:
			p.add(fmt.Sprintf("candidate.calls[%d]", i), "%s has no breaker", name)
		}
	}
	someGuarded := false
	for _, on := range guarded {
		someGuarded = someGuarded || on
	}
	if !someGuarded {
		p.add("candidate", "no call has a breaker to try it on")
	}
}

func policyProblems(p *problems, prefix string, pol breaker.Policy) {
	o := object{p: p}
	if err := pol.Validate(); err != nil {
		o.policyProblems(prefix, err)
	}
}

func checkFraction(p *problems, field string, f float64) bool {
	if !(f >= 0 && f <= 1) {
		p.add(field, "must be in [0, 1], got %v", f)
		return false
	}
	return true
}

// checkLatency reports a duration that is negative, beyond maxLatency, or
// zero when required. It returns whether d is usable.
func checkLatency(p *problems, field string, d time.Duration, required bool) bool {
	switch {
	case d == 0 && required:
		p.add(field, "required: a positive duration")
	case d < 0:
		p.add(field, "must not be negative, got %v", d)
	case d > maxLatency:
		p.add(field, "must be at most %v, got %v", maxLatency, d)
	default:
		return true
	}
	return false
}

func (s *Scenario) tierNames() string {
	names := make([]string, len(s.Tiers))
	for i, t := range s.Tiers {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

func (s *Scenario) callNames() string {
	var names []string
	for _, e := range s.calls() {
		names = append(names, e.name)
	}
	return strings.Join(names, ", ")
}

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
