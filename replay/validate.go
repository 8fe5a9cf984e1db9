package replay

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
)

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
	checkShows(p, "name", s.Name)

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
		case !checkShows(p, path+".name", t.Name): // reported by checkShows
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
	if s.checkCycles(p, index) {
		s.checkWork(p, index)
	}
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
	switch t.Deadlines {
	case "", DeadlinesQueue, DeadlinesIgnore, DeadlinesPropagate:
	default:
		p.add(path+".deadlines", `must be "queue", "ignore" or "propagate", got %q`, t.Deadlines)
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
		checkLatency(p, cp+".timeout", c.Timeout, false)
		if r := c.Retry; r != nil {
			rp := cp + ".retry"
			if r.Attempts < 2 || r.Attempts > MaxAttempts {
				p.add(rp+".attempts", "must be in [2, %d] (tries in all, the first one included), got %d", MaxAttempts, r.Attempts)
			}
			checkLatency(p, rp+".backoff", r.Backoff, false)
			if !(r.Budget >= 0 && r.Budget <= 1) {
				p.add(rp+".budget", "must be in [0, 1] (0 for no budget), got %v", r.Budget)
			}
		}
		if c.Policy != nil {
			if c.NoBreaker {
				p.add(cp+".policy", `is set but "breaker" is false`)
			}
			policyProblems(p, cp+".policy", *c.Policy)
		}
	}
}

// checkCycles refuses a chain in which a request could call itself: the
// simulation would then never finish a request it started. It reports
// whether the chain has no cycle.
func (s *Scenario) checkCycles(p *problems, index map[string]int) bool {
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
	return !reported
}

// checkWork refuses a scenario that asks for more work than a run does in
// minutes: more than MaxCallsPerRequest calls for one entry request, or
// more than MaxTierRequests requests at all tiers. The chain has no cycle.
func (s *Scenario) checkWork(p *problems, index map[string]int) {
	entry, ok := index[s.Entry.Tier]
	if !ok {
		return
	}
	calls := s.callsPerRequest(index)[entry]
	if calls > MaxCallsPerRequest {
		p.add(fmt.Sprintf("tiers[%d].calls", entry), "a request at %s can make %s downstream calls (every call made, every retry tried), more than the %d one request may make",
			s.Entry.Tier, countOrMore(calls), MaxCallsPerRequest)
		return
	}
	rate, d := s.Entry.Rate, s.Duration
	if !(rate > 0 && rate <= MaxRate) || d <= 0 || d > MaxDuration {
		return // their own problems say it
	}
	if total := rate * d.Seconds() * float64(1+calls); total > MaxTierRequests {
		p.add("entry.rate", "%v requests per second for %v, each making up to %d downstream calls, is %.0f requests at all tiers, more than the %d a run may simulate",
			rate, d, calls, total, MaxTierRequests)
	}
}

// callsPerRequest returns, for each tier, the most downstream calls one
// request at it can make: each of its calls, as many times as it may be
// tried, plus the calls of the tier called. The counts saturate at
// maxCount, so that a chain whose count does not fit in 64 bits is
// counted as asking for at least that many. The chain has no cycle.
func (s *Scenario) callsPerRequest(index map[string]int) []uint64 {
	counts := make([]uint64, len(s.Tiers))
	done := make([]bool, len(s.Tiers))
	var count func(i int) uint64
	count = func(i int) uint64 {
		if done[i] {
			return counts[i]
		}
		var n uint64
		for _, c := range s.Tiers[i].Calls {
			k, ok := index[c.To]
			if !ok || k == i {
				continue // its own problem
			}
			tries := uint64(1)
			if c.Retry != nil {
				tries = uint64(min(max(c.Retry.Attempts, 1), MaxAttempts))
			}
			n = satAdd(n, satMul(tries, satAdd(1, count(k))))
		}
		counts[i], done[i] = n, true
		return n
	}
	for i := range s.Tiers {
		count(i)
	}
	return counts
}

// maxCount is where call counts saturate: far above every bound, and
// small enough that the sum of two never overflows.
const maxCount = 1 << 62

func satAdd(a, b uint64) uint64 { return min(a+b, maxCount) }

func satMul(a, b uint64) uint64 {
	if a != 0 && b > maxCount/a {
		return maxCount
	}
	return min(a*b, maxCount)
}

func countOrMore(n uint64) string {
	if n >= maxCount {
		return fmt.Sprintf("at least %d", uint64(maxCount))
	}
	return fmt.Sprint(n)
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
		switch {
		case f.Duration <= 0:
			p.add(path+".duration", "must be positive, got %v", f.Duration)
		case f.Duration > MaxDuration:
			p.add(path+".duration", "must be at most %v, got %v", MaxDuration, f.Duration)
		}
		switch {
		case f.Repeat < 0 || f.Repeat > MaxFaultWindow:
			p.add(path+".repeat", "must be in [0, %d], got %d", MaxFaultWindow, f.Repeat)
		case f.Repeat > 1 && f.Every < f.Duration:
			p.add(path+".every", "must be at least duration (%v) when repeat is %d, got %v", f.Duration, f.Repeat, f.Every)
		case f.Repeat > 1 && f.Every > MaxDuration:
			p.add(path+".every", "must be at most %v, got %v", MaxDuration, f.Every)
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
		if !(f.CapacityLoss >= 0 && f.CapacityLoss < 1) {
			p.add(path+".capacity_loss", "must be in [0, 1) (the share of the tier's workers out of service; at least one is left), got %v", f.CapacityLoss)
		}
		switch f.Outage {
		case NoOutage:
			if f.ErrorRate == 0 && f.SlowFraction == 0 && f.AddedLatency == 0 && f.CapacityLoss == 0 && !f.ColdStart {
				p.add(path, "does nothing: set error_rate, slow_fraction, added_latency, capacity_loss, outage or cold_start")
			}
		case OutageHang, OutageRefuse:
			if f.ErrorRate != 0 || f.SlowFraction != 0 || f.AddedLatency != 0 || f.CapacityLoss != 0 {
				p.add(path+".outage", "excludes error_rate, slow_fraction, added_latency and capacity_loss: an unreachable tier answers nothing")
			}
		default:
			p.add(path+".outage", `must be "hang" or "refuse", got %q`, f.Outage)
		}
		if f.Start < 0 || f.Start > MaxDuration || f.Duration <= 0 || f.Duration > MaxDuration ||
			f.Repeat < 0 || f.Repeat > MaxFaultWindow || f.Every < 0 || f.Every > MaxDuration {
			continue // windows() would overflow; the problems are reported
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
	checkShows(p, "candidate.label", c.Label)
	given := 0
	for _, set := range []bool{c.Overlay != "", c.Policies != nil, c.Policy != (breaker.Policy{})} {
		if set {
			given++
		}
	}
	if given > 1 {
		p.add("candidate", "give one of policy (a change to each call's policy), policies (a group policy document) and, in Go, Policy")
		return
	}
	guarded := map[string]bool{}
	for _, e := range s.calls() {
		guarded[e.name] = !e.call.NoBreaker
	}
	s.checkCandidatePolicies(p)
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

// checkCandidatePolicies reports the policy problems of the candidate on
// each call it applies to: an overlay that does not decode, or makes a
// call's policy invalid (named with the calls it does so on, unless it
// does so on every one), a group document that is invalid or has an
// override for no call, a whole policy that is invalid.
func (s *Scenario) checkCandidatePolicies(p *problems) {
	c := s.Candidate
	switch {
	case c.Overlay != "":
	case c.Policies != nil:
		o := object{p: p}
		if err := c.Policies.Validate(); err != nil {
			o.policyProblems("candidate.policies", err)
			return
		}
		if c.Policies.Candidate != nil {
			p.add("candidate.policies.candidate", "the replay runs the document's own policies and not its candidate: leave the candidate out, or give the candidate's document")
		}
		names := map[string]bool{}
		for _, e := range s.calls() {
			names[e.name], names[e.to] = true, true
		}
		keys := make([]string, 0, len(c.Policies.Overrides))
		for k := range c.Policies.Overrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m, _ := breaker.SplitKey(k)
			tier, _, _ := strings.Cut(m, ".")
			if !names[k] && !(m != tier && names[tier]) {
				p.add(fmt.Sprintf("candidate.policies.overrides[%q]", ops.Printable(k)),
					"names no call, no called tier and no method of one (calls: %s)", s.callNames())
			}
		}
		seen := map[string]bool{}
		for _, e := range s.calls() {
			_, byCall := c.Policies.Overrides[e.name]
			_, byTier := c.Policies.Overrides[e.to]
			methods := methodsOf(*c.Policies, e.to)
			if byCall || byTier || seen[e.to] || len(methods) < 2 {
				continue
			}
			seen[e.to] = true
			for _, k := range methods[1:] {
				if c.Policies.Overrides[k] != c.Policies.Overrides[methods[0]] {
					p.add(fmt.Sprintf("candidate.policies.overrides[%q]", ops.Printable(k)),
						"a method of tier %s, as %q is, with another policy: a call of the scenario is one breaker; name the call (%q) or the tier", ops.Printable(e.to), ops.Printable(methods[0]), ops.Printable(e.name))
					break
				}
			}
		}
		return
	default:
		policyProblems(p, "candidate.policy", c.Policy)
		return
	}
	type problem struct{ field, text string }
	var order []problem
	on := map[problem][]string{}
	n := 0
	base := s.policy()
	for _, ref := range s.calls() {
		if ref.call.NoBreaker || !c.appliesTo(ref.name) {
			continue
		}
		n++
		own := base
		if ref.call.Policy != nil {
			own = *ref.call.Policy
		}
		_, err := c.policyOn(ref, own)
		if err == nil {
			continue
		}
		var q problems
		(object{p: &q}).policyProblems("candidate.policy", err)
		for _, fe := range q.list {
			k := problem{fe.Field, fe.Problem}
			if _, seen := on[k]; !seen {
				order = append(order, k)
			}
			on[k] = append(on[k], ops.Printable(ref.name))
		}
	}
	for _, k := range order {
		if calls := on[k]; len(calls) < n {
			p.add(k.field, "%s (laid over the policy of %s)", k.text, listNames(calls))
		} else {
			p.add(k.field, "%s", k.text)
		}
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

// checkLatency reports a duration that is negative, beyond MaxLatency, or
// zero when required. It returns whether d is usable.
func checkLatency(p *problems, field string, d time.Duration, required bool) bool {
	switch {
	case d == 0 && required:
		p.add(field, "required: a positive duration")
	case d < 0:
		p.add(field, "must not be negative, got %v", d)
	case d > MaxLatency:
		p.add(field, "must be at most %v, got %v", MaxLatency, d)
	default:
		return true
	}
	return false
}

// checkShows reports whether the name shows as it is, as the reports
// and charts write it: a right-to-left override (U+202E) would make it
// read reversed there, as another name, and a control character would
// make the chart XML that no browser reads. An empty name is left to the
// caller.
func checkShows(p *problems, field, name string) bool {
	if name == "" || ops.Printable(name) == name {
		return true
	}
	p.add(field, "must show as it is (no control, format or invisible characters), got %s", ops.Printable(name))
	return false
}

// tierNames lists the tiers for a message, each by ops.Printable: the
// names may be the ones at fault.
func (s *Scenario) tierNames() string {
	names := make([]string, len(s.Tiers))
	for i, t := range s.Tiers {
		names[i] = ops.Printable(t.Name)
	}
	return listNames(names)
}

func (s *Scenario) callNames() string {
	var names []string
	for _, e := range s.calls() {
		names = append(names, ops.Printable(e.name))
	}
	return listNames(names)
}

// listNames joins the first maxListed names, and says how many there are
// if there are more.
func listNames(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … (%d in all)", strings.Join(names[:maxListed], ", "), len(names))
}
