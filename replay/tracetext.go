package replay

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
)

// WriteText prints the report: per key, the counterfactual accounting,
// when the recorded breaker refused calls and when the candidate opened
// and closed, and a per-second chart in which quiet stretches (no
// failure and no refusal on either side) fold into one line. Keys, which
// came with requests, are written by [ops.Printable].
func (r *TraceReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	for _, line := range r.selfCheck() {
		p("%s\n", line)
	}
	p("trace     %s calls from %s, %s, %d keys\n", thousands(int64(r.Calls)), r.Start.Format(time.RFC3339), span(r.Length), len(r.Keys))
	for _, k := range r.Keys {
		p("\n%s\n", ops.Printable(k.Key))
		p("  policy     %s\n", describePolicy(k.Policy))
		p("  recorded   %s calls, %s failed or timed out, %s refused%s, %d probes\n",
			thousands(int64(k.Calls)), thousands(int64(k.Failed)), thousands(int64(k.Refused)), byThrottle(k.Throttled, "the"), k.Probes)
		p("  candidate  refuses %s%s: failures avoided %s, successes lost %s, ignored %s\n",
			thousands(int64(k.FailuresAvoided+k.SuccessesLost+k.IgnoredRefused+k.BothRefused)), byThrottle(k.CandidateThrottled, "its"),
			thousands(int64(k.FailuresAvoided)), thousands(int64(k.SuccessesLost)), thousands(int64(k.IgnoredRefused)))
		p("             refused by both %s; unknown %s (refused in the recording, admitted by the candidate)\n",
			thousands(int64(k.BothRefused)), thousands(int64(k.Unknown)))
		switch {
		case len(k.Recorded) == 0 && k.Throttled == 0:
			p("  really     never refused a call\n")
		case len(k.Recorded) == 0:
			p("  really     never open\n")
		}
		for _, s := range k.Recorded {
			p("  really     refused calls from %s to %s (%s)\n", clock(s.From), clock(s.To), span(s.To-s.From))
		}
		if k.Throttled > 0 {
			first, last := k.throttledSpan()
			p("  really     throttled %s calls, closed, from %s to %s\n", thousands(int64(k.Throttled)), clockSec(first), clockSec(last+1))
		}
		if len(k.Transitions) == 0 {
			p("  candidate  never opened\n")
		}
		for _, t := range k.Transitions {
			line := fmt.Sprintf("  candidate  %s  %-9s %s", clock(t.At), t.To, t.Reason)
			switch {
			case t.Trip.Reason != "": // a trip: the evidence of its rule
				line = fmt.Sprintf("  candidate  %s  %-9s %s; cooldown %s", clock(t.At), t.To, t.Trip.String(), span(t.Cooldown))
			case t.To == breaker.Open:
				line += fmt.Sprintf("; cooldown %s", span(t.Cooldown))
			}
			p("%s\n", line)
		}
		p("  time     calls  failed | refused: really  candidate | states (really, candidate)\n")
		quiet := -1
		flush := func(to int) {
			if quiet >= 0 {
				p("  %s-%s  quiet: no failure, no refusal; %s\n", clockSec(quiet), clockSec(to-1), statePair(k, quiet, to-1))
				quiet = -1
			}
		}
		for sec, s := range k.Seconds {
			if s.Failed == 0 && s.Refused == 0 && s.CandidateRefused == 0 && k.stateAt(sec) == "." && k.recordedAt(sec) == "." {
				if quiet < 0 {
					quiet = sec
				}
				continue
			}
			flush(sec)
			p("  %-7s %6d %7d | %15d %10d | %s%s\n", clockSec(sec), s.Calls, s.Failed, s.Refused, s.CandidateRefused, k.recordedAt(sec), k.stateAt(sec))
		}
		flush(len(k.Seconds))
	}
	p("\nstates: . closed (or admitting), t closed and throttling (refusing some calls), O open (refusing), h half-open; really is read from the recorded refusals\n")
	return bw.Flush()
}

// selfCheck says how well a replay of the policy that ran reproduces the
// recorded refusals, and what the trace held to make it so: the number
// worth reading before any other, since every counterfactual rests on it.
func (r *TraceReport) selfCheck() []string {
	active := "the default policy"
	if r.Active.Default != (breaker.Policy{}) || len(r.Active.Overrides) > 0 {
		active = "the given active policy"
	}
	var out []string
	if r.Refused == 0 {
		out = append(out, "self-check  the recorded breakers refused no call: no refusal to reproduce")
	} else {
		out = append(out, fmt.Sprintf("self-check  replaying the policy that ran (%s) refuses %.1f%% of the calls the recorded breakers refused (%s of %s), and %s calls they admitted",
			active, 100*float64(r.Reproduced)/float64(r.Refused), thousands(int64(r.Reproduced)), thousands(int64(r.Refused)), thousands(int64(r.Extra))))
		if r.Throttled > 0 {
			out = append(out, fmt.Sprintf("            %s of the recorded refusals were a throttle's, the breaker closed: that replay follows the recorded throttle's decisions, a candidate draws its own", thousands(int64(r.Throttled))))
		}
	}
	held := fmt.Sprintf("holds the breakers' %d transitions with their cooldowns", r.Transitions)
	if r.Transitions == 0 {
		held = "holds no transition of the breakers (the replay draws cooldowns of its own)"
	}
	origin := "their time origin"
	if r.Origin.IsZero() {
		origin = "no time origin (the replay aligns the buckets on the first call)"
	}
	out = append(out, fmt.Sprintf("            the trace %s and %s", held, origin))
	return out
}

func statePair(k *KeyReport, from, to int) string {
	return "states " + k.recordedAt(to) + k.stateAt(to)
}

// byThrottle says how many of the refusals were whose throttle's, if any.
func byThrottle(n int, whose string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s by %s throttle)", thousands(int64(n)), whose)
}

// throttledSpan is the first and last second in which the recorded
// throttle refused a call.
func (k *KeyReport) throttledSpan() (first, last int) {
	first = -1
	for sec, s := range k.Seconds {
		if s.Throttled > 0 {
			if first < 0 {
				first = sec
			}
			last = sec
		}
	}
	return max(first, 0), last
}

// stateAt is the candidate's state at the end of second sec, as a letter:
// t if it was closed and its throttle refused calls in that second.
func (k *KeyReport) stateAt(sec int) string {
	st := breaker.Closed
	end := time.Duration(sec+1) * time.Second
	for _, t := range k.Transitions {
		if t.At >= end {
			break
		}
		st = t.To
	}
	switch st {
	case breaker.Open:
		return "O"
	case breaker.HalfOpen:
		return "h"
	}
	if k.Seconds[sec].CandidateThrottled > 0 {
		return "t"
	}
	return "."
}

// recordedAt is the recorded breaker's state at the end of second sec:
// O inside a span of refusals, t if it was closed and its throttle
// refused calls in that second.
func (k *KeyReport) recordedAt(sec int) string {
	end := time.Duration(sec+1) * time.Second
	for _, s := range k.Recorded {
		if s.From < end && end <= s.To {
			return "O"
		}
	}
	if k.Seconds[sec].Throttled > 0 {
		return "t"
	}
	return "."
}
