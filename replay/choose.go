package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// A Protection is one way of guarding the calls of a scenario, one column
// of a [Comparison]. Every protection but the unguarded one is data: a
// policy document, so that a protection the breaker cannot yet run is
// refused by name rather than needing code.
type Protection struct {
	// Name labels the protection in reports.
	Name string
	// Unguarded leaves every call without a breaker, whatever the
	// scenario's policies: the no-breaker run.
	Unguarded bool
	// Overlay is a breaker policy document laid over the policy of every
	// guarded call (its own, or the scenario's), as a candidate's is.
	// Empty keeps the scenario's policies.
	Overlay string
}

// Protections returns the protections compared by default: none, the
// breaker (the scenario's policies), client-side throttling alone (the
// ratio rule off) and both: throttling first, and the ratio rule at 0.8,
// above where throttling starts (1 - 1/K), for a failure that turns hard.
func Protections() []Protection {
	return []Protection{
		{Name: "none", Unguarded: true},
		{Name: "breaker"},
		{Name: "throttle", Overlay: `{"error_ratio": 0, "throttle": {"enabled": true}}`},
		{Name: "both", Overlay: `{"error_ratio": 0.8, "throttle": {"enabled": true}}`},
	}
}

// ComparedScenarios returns the shipped scenarios the comparison of
// protections runs by default, one per kind of fault: a share of calls
// failing fast, a downstream unreachable, an overload that feeds on its
// own load, and the incident behind the defaults.
func ComparedScenarios() []string {
	return []string{"partial-outage", "hard-outage", "overload", "seeds000"}
}

// A ProtectionError is a protection whose policy document the breaker
// refused when laid over the policy of a call.
type ProtectionError struct {
	Protection string
	Overlay    string
	Call       string // "orders->inventory"
	Err        error
}

func (e *ProtectionError) Error() string {
	return fmt.Sprintf("replay: protection %s: policy %s on %s: %v", e.Protection, e.Overlay, e.Call, e.Err)
}

func (e *ProtectionError) Unwrap() error { return e.Err }

// AfterFault is how long after the last fault the comparison's goodput
// still counts: long enough for a breaker's first cooldown to end.
const AfterFault = 30 * time.Second

// A Comparison is one scenario run under several protections, once per
// seed, each run compared with the baseline of its seed.
type Comparison struct {
	Scenario    *Scenario
	Seeds       []uint64
	Protections []Protection
	// Refused holds, per protection, the *ProtectionError that kept it
	// from running, or nil.
	Refused []error
	// Runs[p][k] is protection p's run with Seeds[k]; nil if refused.
	// Baselines[k] is the baseline run with Seeds[k].
	Runs      [][]*RunResult
	Baselines []*RunResult
	// FaultStart and FaultEnd bound the scenario's fault windows.
	FaultStart, FaultEnd time.Duration
}

// Compare runs s once per seed without faults, and once per seed and
// protection with them. Runs go in parallel on up to GOMAXPROCS
// goroutines, all of which have returned when Compare does; the result is
// the same for the same scenario, seeds and protections. A protection
// whose policy is refused does not run: its error is in Refused. An
// invalid scenario, no seeds or a zero seed is an error.
func Compare(s *Scenario, seeds []uint64, protections []Protection) (*Comparison, error) {
	if err := checkSeeds(seeds); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &Comparison{
		Scenario:    s,
		Seeds:       slices.Clone(seeds),
		Protections: slices.Clone(protections),
		Refused:     make([]error, len(protections)),
		Runs:        make([][]*RunResult, len(protections)),
		Baselines:   make([]*RunResult, len(seeds)),
	}
	c.FaultStart, c.FaultEnd = s.faultSpan()
	specs := make([]*runSpec, len(protections))
	for p, pr := range protections {
		spec, err := s.protectionSpec(pr)
		if err != nil {
			c.Refused[p] = err
			continue
		}
		specs[p] = &spec
		c.Runs[p] = make([]*RunResult, len(seeds))
	}

	type job struct {
		p, k int // protection (-1: baseline), seed
	}
	var jobs []job
	for k := range seeds {
		jobs = append(jobs, job{-1, k})
		for p := range protections {
			if specs[p] != nil {
				jobs = append(jobs, job{p, k})
			}
		}
	}
	base := s.specs()[0]
	errs := make([]error, len(jobs))
	inParallel(len(jobs), func(i int) {
		jb := jobs[i]
		sc := *s
		sc.Seed = seeds[jb.k]
		spec := base
		if jb.p >= 0 {
			spec = *specs[jb.p]
		}
		sm, err := newSim(&sc, spec)
		if err != nil {
			errs[i] = err
			return
		}
		if jb.p < 0 {
			c.Baselines[jb.k] = sm.run()
		} else {
			c.Runs[jb.p][jb.k] = sm.run()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep := &Report{Scenario: s, FaultStart: c.FaultStart, FaultEnd: c.FaultEnd}
	for _, runs := range c.Runs {
		for k, run := range runs {
			rep.compare(run, c.Baselines[k])
		}
	}
	return c, nil
}

// protectionSpec is the run of s under protection pr.
func (s *Scenario) protectionSpec(pr Protection) (runSpec, error) {
	specs := s.specs()
	none, with := specs[1], specs[2]
	if pr.Unguarded {
		none.label = pr.Name
		return none, nil
	}
	spec := runSpec{kind: WithBreaker, label: pr.Name, faults: true, policies: make([]*breaker.Policy, len(with.policies))}
	if pr.Overlay != "" {
		spec.kind = CandidateRun
	}
	edges := s.calls()
	for e, pol := range with.policies {
		if pol == nil {
			continue
		}
		p := *pol
		if pr.Overlay != "" {
			if err := p.UnmarshalJSON([]byte(pr.Overlay)); err != nil {
				return runSpec{}, &ProtectionError{Protection: pr.Name, Overlay: pr.Overlay, Call: edges[e].name, Err: err}
			}
			if err := p.Validate(); err != nil {
				return runSpec{}, &ProtectionError{Protection: pr.Name, Overlay: pr.Overlay, Call: edges[e].name, Err: err}
			}
		}
		spec.policies[e] = &p
	}
	return spec, nil
}

// Measure names a figure of the comparison of protections.
type Measure int

const (
	// GoodputKept is the entry's good answers (degraded ones included)
	// from the first fault's start to AfterFault after the last one's
	// end, as a fraction of the baseline's in the same seconds.
	GoodputKept Measure = iota
	// WorstSecond is the entry's goodput in the run's worst second, as a
	// fraction of the baseline's in that second: 1 − [RunResult.WorstDrop].
	WorstSecond
	// FallbacksServed is the number of degraded answers the entry gave
	// in time, over the whole run.
	FallbacksServed
	// FaultLoad is the mean number of requests a second sent to the
	// faulty tier while its fault lasted ([TierSeries.Offered] over
	// every fault window, in whole seconds).
	FaultLoad
	// RecoverySeconds is [RunResult.Recovery] in seconds: how long after
	// the last fault full service came back. No value if it did not
	// within the run.
	RecoverySeconds
	// Openings is the number of times the breakers of the calls to a
	// faulty tier tripped from closed, over the whole run: how often a
	// protection opened on the fault (a throttle that holds its breaker
	// closed has none).
	Openings
)

func (m Measure) String() string {
	switch m {
	case GoodputKept:
		return "goodput kept"
	case WorstSecond:
		return "worst second"
	case FallbacksServed:
		return "fallbacks served"
	case FaultLoad:
		return "load on the faulty tier"
	case RecoverySeconds:
		return "full service back"
	case Openings:
		return "openings"
	}
	return "measure(?)"
}

// Of returns measure m of run, whose seed's baseline is base, and false
// if it has no value.
func (c *Comparison) Of(m Measure, run, base *RunResult) (float64, bool) {
	switch m {
	case GoodputKept:
		from := int(c.FaultStart / time.Second)
		to := min(len(run.Entry.Good), int((c.FaultEnd+AfterFault+time.Second-1)/time.Second))
		got, ref := 0, 0
		for sec := from; sec < to; sec++ {
			got += run.Entry.Good[sec]
			ref += base.Entry.Good[sec]
		}
		if ref == 0 {
			return 0, false
		}
		return float64(got) / float64(ref), true
	case WorstSecond:
		return 1 - run.WorstDrop, true
	case FallbacksServed:
		return float64(sum(run.Entry.Degraded)), true
	case FaultLoad:
		return c.faultLoad(run)
	case RecoverySeconds:
		if !run.Recovered || c.FaultEnd == 0 {
			return 0, false
		}
		return run.Recovery.Seconds(), true
	case Openings:
		return float64(c.openings(run)), true
	}
	return 0, false
}

// openings counts the trips from closed of the breakers guarding calls to
// a faulty tier in run.
func (c *Comparison) openings(run *RunResult) int {
	faulty := map[string]bool{}
	for _, f := range c.Scenario.Faults {
		faulty[f.Tier] = true
	}
	n := 0
	for _, call := range run.Calls {
		if !faulty[call.To] {
			continue
		}
		for _, t := range call.Transitions {
			if t.From == breaker.Closed && t.To == breaker.Open {
				n++
			}
		}
	}
	return n
}

func (c *Comparison) faultLoad(run *RunResult) (float64, bool) {
	tiers := map[string]int{}
	for i, t := range run.Tiers {
		tiers[t.Name] = i
	}
	sent, secs := 0, 0
	for _, w := range c.Scenario.FaultWindows() {
		offered := run.Tiers[tiers[w.Tier]].Offered
		for sec := int(w.Start / time.Second); sec < min(len(offered), int((w.End+time.Second-1)/time.Second)); sec++ {
			sent += offered[sec]
			secs++
		}
	}
	if secs == 0 {
		return 0, false
	}
	return float64(sent) / float64(secs), true
}

// Spread returns measure m of protection p over the seeds; N is 0 if the
// protection was refused.
func (c *Comparison) Spread(p int, m Measure) Spread {
	var vals []float64
	for k, run := range c.Runs[p] {
		if v, ok := c.Of(m, run, c.Baselines[k]); ok {
			vals = append(vals, v)
		}
	}
	return spreadOf(vals)
}

// BaselineLoad returns the baseline's FaultLoad over the seeds: what the
// faulty tier is sent when nothing is wrong.
func (c *Comparison) BaselineLoad() Spread {
	var vals []float64
	for _, run := range c.Baselines {
		if v, ok := c.faultLoad(run); ok {
			vals = append(vals, v)
		}
	}
	return spreadOf(vals)
}

// faultyTiers names the tiers the scenario's faults are on.
func (c *Comparison) faultyTiers() string {
	var names []string
	for _, f := range c.Scenario.Faults {
		if !slices.Contains(names, f.Tier) {
			names = append(names, f.Tier)
		}
	}
	return strings.Join(names, ", ")
}

// ComparisonLegend defines the columns of [Comparison.WriteMarkdown].
const ComparisonLegend = `Each cell is the median [least, greatest] over the seeds. ` +
	`**goodput kept**: the entry's good answers (fallbacks included) from the fault's start to 30 s after its end, as a share of the baseline's in the same seconds. ` +
	`**worst second**: the entry's goodput in its worst second, as a share of the baseline's in that second. ` +
	`**fallbacks**: degraded answers the entry gave in time, over the whole run. ` +
	`**load**: requests a second sent to the faulty tier while the fault lasts, retries included. ` +
	`**back after**: how long after the fault's end the entry's full (not degraded) answers are back within 5% of the baseline's for 5 s; "in N" when that happens within the run for N seeds only. ` +
	`**openings**: how many times the breakers of the calls to the faulty tier tripped from closed.`

// WriteMarkdown writes the comparison as a Markdown section: a heading,
// the fault, and a row per protection. A refused protection's row says
// so, and the policy and the error follow the table.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	s := c.Scenario
	fmt.Fprintf(bw, "### %s\n\n", s.Name)
	var faults []string
	for _, f := range s.Faults {
		faults = append(faults, fmt.Sprintf("%s from %s", f.Summary(), clock(f.Start)))
	}
	bl := c.BaselineLoad()
	fmt.Fprintf(bw, "%s; %s req/s entry, seeds %s. Without the fault, %s is sent %.0f req/s.\n\n",
		strings.Join(faults, "; "), trimFloat(s.Entry.Rate), seedList(c.Seeds), c.faultyTiers(), bl.Median)
	fmt.Fprintf(bw, "| protection | goodput kept | worst second | fallbacks | load (req/s) | back after (s) | openings |\n")
	fmt.Fprintf(bw, "|---|---|---|---|---|---|---|\n")
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }
	count := func(v float64) string { return thousands(int64(v)) }
	rate := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	secs := func(v float64) string { return fmt.Sprintf("+%.0f", v) }
	var notes []string
	for p, pr := range c.Protections {
		if c.Refused[p] != nil {
			fmt.Fprintf(bw, "| %s | not run: policy refused (below) | | | | | |\n", pr.Name)
			notes = append(notes, fmt.Sprintf("%s: %v", pr.Name, c.Refused[p]))
			continue
		}
		cells := []string{pr.Name}
		for _, col := range []struct {
			m      Measure
			format func(float64) string
		}{{GoodputKept, pct}, {WorstSecond, pct}, {FallbacksServed, count}, {FaultLoad, rate}, {RecoverySeconds, secs}, {Openings, count}} {
			sp := c.Spread(p, col.m)
			switch {
			case sp.N == 0:
				cells = append(cells, "not back")
			case sp.Min == sp.Max:
				cells = append(cells, col.format(sp.Median))
			default:
				cells = append(cells, fmt.Sprintf("%s [%s, %s]", col.format(sp.Median), col.format(sp.Min), col.format(sp.Max)))
			}
			if sp.N > 0 && sp.N < len(c.Seeds) {
				cells[len(cells)-1] += fmt.Sprintf(" in %d", sp.N)
			}
		}
		fmt.Fprintf(bw, "| %s |\n", strings.Join(cells, " | "))
	}
	for _, n := range notes {
		fmt.Fprintf(bw, "\n%s\n", n)
	}
	return bw.Flush()
}
