package check

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/govkit/breaker/ops"
)

// WriteText writes the report for people: per key, a line with its
// traffic and policy, then its findings of severity min and above, and
// a closing count. Keys are written by [ops.Printable].
func (r *Report) WriteText(w io.Writer, min Severity) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "checked %s against a fault of %s; false-trip threshold %s a day\n",
		plural(len(r.Keys), "key"), r.Fault, num(r.MaxFalseTripsPerDay))
	byKey := map[string][]Finding{}
	var order []string
	for _, f := range r.Findings {
		if f.Severity < min {
			continue
		}
		if _, ok := byKey[f.Key]; !ok {
			order = append(order, f.Key)
		}
		byKey[f.Key] = append(byKey[f.Key], f)
	}
	head := map[string]KeyReport{}
	for _, k := range r.Keys {
		head[k.Key] = k
	}
	for _, k := range order {
		// Keys come from request data through a service's snapshot:
		// ops.Printable shows one that holds a character that does not
		// show as itself (a right-to-left override) as what it holds.
		fmt.Fprintf(bw, "\n%s", ops.Printable(k))
		if kr, ok := head[k]; ok {
			fmt.Fprintf(bw, "  (%s; policy %s)", describe(kr.Traffic), ops.Printable(kr.Source))
		}
		fmt.Fprintln(bw)
		for _, f := range byKey[k] {
			fmt.Fprintf(bw, "  %-7s  %-22s  %s\n", f.Severity, f.Check, f.Message)
		}
	}
	fmt.Fprintf(bw, "\n%s, %s, %s\n", plural(r.Count(Error), "error"), plural(r.Count(Warning), "warning"), plural(r.Count(Info), "note"))
	// What the numbers shown rest on, once per source.
	for _, src := range []string{SourceAnalytic, SourceSimulated, SourceTrace} {
		for _, f := range r.Findings {
			if f.Severity >= min && f.Source == src && r.Assumptions[src] != "" {
				fmt.Fprintf(bw, "%s numbers assume: %s\n", src, r.Assumptions[src])
				break
			}
		}
	}
	return bw.Flush()
}

// describe sums up a key's traffic in a few words.
func describe(t Traffic) string {
	parts := []string{num(t.Rate) + " calls/s"}
	if t.Targets > 1 {
		parts[0] += " per target"
	}
	if t.P50 > 0 {
		parts = append(parts, fmt.Sprintf("p50 %v, p99 %v", t.P50, t.P99))
	}
	parts = append(parts, pct(t.ErrorRatio)+" errors")
	if t.Deadline > 0 {
		parts = append(parts, fmt.Sprintf("deadline %v", t.Deadline))
	}
	if t.RTT > 0 {
		parts = append(parts, fmt.Sprintf("rtt %v", t.RTT))
	}
	return strings.Join(parts, ", ")
}

// plural is "1 key", "2 keys".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
