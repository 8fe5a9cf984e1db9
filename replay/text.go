package replay

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// TextOptions adjusts [Report.WriteText].
type TextOptions struct {
	// Full prints every second. By default, stretches of seconds in
	// which every run is within 5% of the baseline and every breaker is
	// closed are folded into one line.
	Full bool
}

// quietBand is how close to the baseline a second must be, in every run,
// to be folded into a steady stretch of the table.
const quietBand = 0.05

// WriteText writes the report for a terminal: the scenario, a summary per
// run, each breaker's timeline, and the entry's goodput per second. The
// output depends only on the report, so it is the same for the same
// scenario and seed.
func (r *Report) WriteText(w io.Writer, opt TextOptions) error {
	bw := bufio.NewWriter(w)
	r.writeHeader(bw)
	r.writeSummary(bw)
	r.writeBreakers(bw)
	r.writeTable(bw, opt.Full)
	return bw.Flush()
}

func (r *Report) writeHeader(w *bufio.Writer) {
	s := r.Scenario
	fmt.Fprintf(w, "scenario  %s\n", s.Name)
	if s.Description != "" {
		for _, line := range wrap(s.Description, 70) {
			fmt.Fprintf(w, "          %s\n", line)
		}
	}
	fmt.Fprintf(w, "chain     %s\n", r.chain())
	fmt.Fprintf(w, "entry     %s req/s (%s) at %s, client timeout %v; %v simulated, seed %d\n",
		trimFloat(s.Entry.Rate), arrivals(s.Entry.Arrivals), s.Entry.Tier, s.Entry.Timeout, s.Duration, s.Seed)
	for i, f := range s.Faults {
		label := "fault"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "%-9s %s from %s\n", label, f.Summary(), clock(f.Start))
	}
	for _, run := range r.Runs {
		if run.Kind < WithBreaker {
			continue
		}
		for _, line := range policyLines(run) {
			fmt.Fprintf(w, "%-9s %s\n", "", line)
		}
	}
	fmt.Fprintln(w)
}

// chain describes the tiers in the order a request meets them.
func (r *Report) chain() string {
	s := r.Scenario
	var parts []string
	for _, t := range s.Tiers {
		desc := fmt.Sprintf("%s[%d workers, %v %s", t.Name, t.Workers, t.Service.Mean, dist(t.Service.Dist))
		if t.Queue != Unbounded {
			desc += fmt.Sprintf(", queue %d", t.Queue)
		}
		if t.Deadlines != "" && t.Deadlines != DeadlinesQueue {
			desc += ", deadlines " + string(t.Deadlines)
		}
		desc += "]"
		var calls []string
		for _, c := range t.Calls {
			timeout := "no timeout"
			if c.Timeout > 0 {
				timeout = c.Timeout.String()
			}
			call := fmt.Sprintf("->%s %s", c.To, timeout)
			if c.Probability < 1 {
				call += " " + percent(c.Probability)
			}
			if c.Fallback {
				call += " fallback"
			}
			if r := c.Retry; r != nil {
				call += fmt.Sprintf(" retry %dx", r.Attempts)
				if r.Backoff > 0 {
					call += " backoff " + r.Backoff.String()
				}
				if r.Budget > 0 {
					call += " budget " + percent(r.Budget)
				}
			}
			calls = append(calls, call)
		}
		if len(calls) > 0 {
			desc += " " + strings.Join(calls, ", ")
		}
		parts = append(parts, desc)
	}
	return strings.Join(parts, "\n          ")
}

// policyLines lists the policies of a run, one line per distinct policy.
func policyLines(run *RunResult) []string {
	type group struct {
		p     breaker.Policy
		calls []string
	}
	var groups []group
	for _, c := range run.Calls {
		if !c.Breaker {
			continue
		}
		found := false
		for i := range groups {
			if groups[i].p == c.Policy {
				groups[i].calls = append(groups[i].calls, c.Name)
				found = true
			}
		}
		if !found {
			groups = append(groups, group{p: c.Policy, calls: []string{c.Name}})
		}
	}
	var out []string
	for _, g := range groups {
		out = append(out, fmt.Sprintf("%s: %s on %s", run.Label, describePolicy(g.p), strings.Join(g.calls, ", ")))
	}
	if len(out) == 0 {
		out = append(out, run.Label+": no call has a breaker")
	}
	return out
}

// describePolicy names the policy's fields that differ from the default.
func describePolicy(p breaker.Policy) string {
	d := breaker.DefaultPolicy()
	if p == d {
		return "default policy"
	}
	var diff []string
	add := func(name string, v, def any) {
		if v != def {
			diff = append(diff, fmt.Sprintf("%s=%v", name, v))
		}
	}
	add("window", p.Window, d.Window)
	add("buckets", p.Buckets, d.Buckets)
	add("min_requests", p.MinRequests, d.MinRequests)
	add("error_ratio", p.ErrorRatio, d.ErrorRatio)
	add("error_count", p.ErrorCount, d.ErrorCount)
	add("slow_call", p.SlowCall, d.SlowCall)
	add("slow_ratio", p.SlowRatio, d.SlowRatio)
	add("consecutive_failures", p.ConsecutiveFailures, d.ConsecutiveFailures)
	add("call_timeout", p.CallTimeout, d.CallTimeout)
	a, da := p.AdaptiveTimeout, d.AdaptiveTimeout
	add("adaptive_timeout.enabled", a.Enabled, da.Enabled)
	add("adaptive_timeout.quantile", a.Quantile, da.Quantile)
	add("adaptive_timeout.factor", a.Factor, da.Factor)
	add("adaptive_timeout.base", a.Base, da.Base)
	add("adaptive_timeout.min", a.Min, da.Min)
	add("adaptive_timeout.max", a.Max, da.Max)
	add("open_for", p.OpenFor, d.OpenFor)
	add("max_open_for", p.MaxOpenFor, d.MaxOpenFor)
	add("jitter", p.Jitter, d.Jitter)
	add("probes", p.Probes, d.Probes)
	add("warmup", p.Warmup, d.Warmup)
	add("strict_probes", p.StrictProbes, d.StrictProbes)
	th, dth := p.Throttle, d.Throttle
	add("throttle.enabled", th.Enabled, dth.Enabled)
	add("throttle.k", th.K, dth.K)
	add("throttle.min_requests", th.MinRequests, dth.MinRequests)
	return "default policy with " + strings.Join(diff, " ")
}

func (r *Report) faulted() []*RunResult {
	var out []*RunResult
	for _, run := range r.Runs {
		if run.Kind != Baseline {
			out = append(out, run)
		}
	}
	return out
}

func (r *Report) writeSummary(w *bufio.Writer) {
	runs := r.faulted()
	base := r.Run(Baseline)
	var rows [][]string
	row := func(name string, cell func(*RunResult) string) {
		cells := []string{name}
		for _, run := range runs {
			cells = append(cells, cell(run))
		}
		rows = append(rows, cells)
	}
	row("", func(run *RunResult) string { return run.Label })
	fullRef := base.Entry.Full()
	row("entry full answers, worst second", func(run *RunResult) string {
		sec := int(run.FullWorstAt / time.Second)
		return fmt.Sprintf("%d -> %d/s at %s", fullRef[sec], run.Entry.Full()[sec], clockSec(sec))
	})
	row("  drop vs baseline", func(run *RunResult) string { return fmt.Sprintf("-%.1f%%", run.FullWorstDrop*100) })
	row("entry goodput (full + degraded), worst second", func(run *RunResult) string {
		sec := int(run.WorstAt / time.Second)
		return fmt.Sprintf("%d -> %d/s at %s", base.Entry.Good[sec], run.Entry.Good[sec], clockSec(sec))
	})
	row("  drop vs baseline", func(run *RunResult) string { return fmt.Sprintf("-%.1f%%", run.WorstDrop*100) })
	row("  goodput amplification *", func(run *RunResult) string { return amplification(run.Amplification) })
	row("degraded answers (fallback)", func(run *RunResult) string { return thousands(int64(sum(run.Entry.Degraded))) })
	row("requests lost (error or no answer in time)", func(run *RunResult) string { return thousands(int64(run.Unanswered)) })
	row("  failed / timed out", func(run *RunResult) string {
		return thousands(int64(sum(run.Entry.Failed))) + " / " + thousands(int64(sum(run.Entry.TimedOut)))
	})
	if r.FaultEnd > 0 {
		row("full service back after the fault", func(run *RunResult) string {
			if !run.Recovered {
				return "not within the run"
			}
			return "+" + span(run.Recovery)
		})
	}
	for i := range base.Tiers {
		row(fmt.Sprintf("%s pool full (s)", base.Tiers[i].Name), func(run *RunResult) string {
			return strconv.Itoa(run.Tiers[i].FullSeconds())
		})
	}
	row("work for callers gone", func(run *RunResult) string {
		var n int64
		for _, t := range run.Tiers {
			n += t.Abandoned
		}
		return thousands(n)
	})
	writeColumns(w, rows)
	fmt.Fprintln(w, amplificationNote)
	if r.FaultEnd > 0 {
		fmt.Fprintf(w, "full service back: full answers within %d%% of the baseline for %d s from then on\n",
			int(math.Round((1-recoveryLevel)*100)), recoveryHold)
	}
	fmt.Fprintln(w)
}

func (r *Report) writeBreakers(w *bufio.Writer) {
	for _, run := range r.Runs {
		if run.Kind < WithBreaker {
			continue
		}
		fmt.Fprintf(w, "breakers, %s run\n", run.Label)
		for i := range run.Calls {
			c := &run.Calls[i]
			if !c.Breaker {
				continue
			}
			fmt.Fprintf(w, "  %s\n", c.Name)
			r.writeTimeline(w, c)
			fmt.Fprintf(w, "      probes %d, rejected %s, failed or timed out %s (%s of caller workers), window peak %d\n",
				c.Probes, thousands(c.Rejected), thousands(c.Wasted()), span(c.WastedWork), c.PeakWindow)
			if c.Retries > 0 || c.RetriesDenied > 0 {
				fmt.Fprintf(w, "      retries %s, refused by the retry budget %s\n", thousands(c.Retries), thousands(c.RetriesDenied))
			}
		}
		fmt.Fprintln(w)
	}
}

// maxTimeline bounds the transitions listed per breaker; a flapping
// breaker's full list is in the report value.
const maxTimeline = 12

func (r *Report) writeTimeline(w *bufio.Writer, c *CallResult) {
	if len(c.Transitions) == 0 {
		fmt.Fprintf(w, "      never opened\n")
		return
	}
	for i, t := range c.Transitions {
		if i == maxTimeline {
			fmt.Fprintf(w, "      ... %d more transitions, %d opens in all\n", len(c.Transitions)-maxTimeline, c.Opens())
			break
		}
		line := fmt.Sprintf("%s  %-9s", clock(t.At), t.To)
		switch {
		case t.To == breaker.Open && t.From == breaker.Closed:
			line += " " + t.Trip.String() // the evidence of the rule that tripped
		default:
			line += " " + string(t.Reason)
		}
		if t.To == breaker.Open {
			line += fmt.Sprintf("; cooldown %s", span(t.Cooldown))
		}
		line += r.relative(t.At)
		fmt.Fprintf(w, "      %s\n", line)
	}
}

// relative places an instant against the nearest fault window before it:
// "(+4.0s into the fault)", "(+19.3s after the fault)".
func (r *Report) relative(t time.Duration) string {
	var last *Window
	for _, w := range r.Scenario.FaultWindows() {
		if w.Start > t {
			break
		}
		if last == nil || w.Start >= last.Start {
			last = &w
		}
	}
	switch {
	case last == nil && r.FaultEnd == 0:
		return ""
	case last == nil:
		return fmt.Sprintf("  (%s before the fault)", span(r.FaultStart-t))
	case t < last.End:
		return fmt.Sprintf("  (+%s into the fault)", span(t-last.Start))
	default:
		return fmt.Sprintf("  (+%s after the fault)", span(t-last.End))
	}
}

// minFold is the shortest stretch of quiet seconds the table folds into
// one line; shorter ones are printed as they are.
const minFold = 3

func (r *Report) writeTable(w *bufio.Writer, full bool) {
	runs := r.faulted()
	base := r.Run(Baseline)
	n := len(base.Entry.Good)
	widths := make([]int, len(runs))
	fmt.Fprintf(w, "entry goodput per second (good = answered in time; degr = of them, degraded by a fallback; full = good - degr)\n")
	fmt.Fprintf(w, "%-7s %8s", "time", "baseline")
	for i, run := range runs {
		widths[i] = max(len(run.Label), 6)
		fmt.Fprintf(w, " | %*s %5s", widths[i], run.Label, "degr")
	}
	fmt.Fprintf(w, " | breakers\n")
	var guarded []*RunResult
	for _, run := range runs {
		if run.Kind >= WithBreaker {
			guarded = append(guarded, run)
		}
	}
	row := func(sec int) {
		fmt.Fprintf(w, "%-7s %8d", clockSec(sec), base.Entry.Good[sec])
		for i, run := range runs {
			fmt.Fprintf(w, " | %*d %5d", widths[i], run.Entry.Good[sec], run.Entry.Degraded[sec])
		}
		fmt.Fprintf(w, " | ")
		for i, run := range guarded {
			if i > 0 {
				fmt.Fprint(w, " ")
			}
			fmt.Fprint(w, states(run, sec))
		}
		fmt.Fprintln(w)
	}
	for sec := 0; sec < n; {
		end := sec
		for !full && end < n && r.quiet(end, runs) {
			end++
		}
		if end-sec >= minFold {
			good := base.Entry.Good[sec:end]
			fmt.Fprintf(w, "%s-%s  steady: every run within %d%% of the baseline (%d-%d/s), breakers closed\n",
				clockSec(sec), clockSec(end-1), int(quietBand*100), minOf(good), maxOf(good))
			sec = end
			continue
		}
		for end = max(end, sec+1); sec < end; sec++ {
			row(sec)
		}
	}
	if len(guarded) > 0 {
		fmt.Fprintf(w, "breakers: one letter per guarded call (")
		for i, run := range guarded {
			if i > 0 {
				fmt.Fprint(w, "; ")
			}
			var names []string
			for _, c := range run.Calls {
				if c.Breaker {
					names = append(names, c.Name)
				}
			}
			fmt.Fprintf(w, "%s: %s", run.Label, strings.Join(names, " "))
		}
		fmt.Fprintf(w, ") at the end of the second: . closed, O open, h half-open\n")
	}
}

// quiet reports whether a second can be folded into a steady stretch.
func (r *Report) quiet(sec int, runs []*RunResult) bool {
	ref := float64(r.Run(Baseline).Entry.Good[sec])
	for _, run := range runs {
		if math.Abs(float64(run.Entry.Good[sec])-ref) > quietBand*ref || run.Entry.Degraded[sec] > 0 {
			return false
		}
		for i := range run.Calls {
			c := &run.Calls[i]
			if c.Breaker && c.StateAt(time.Duration(sec+1)*time.Second-1) != breaker.Closed {
				return false
			}
		}
	}
	return true
}
