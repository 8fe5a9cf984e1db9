package replay

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// A SeedsReport is one scenario run once for each of several seeds. A
// scenario's figures depend on its seed, some of them a great deal (the
// trough of a collapse is the bottom of an oscillation, and a seed moves
// it), so a figure worth quoting is a median with its range.
type SeedsReport struct {
	// Scenario is the scenario as given; each seed ran a copy of it.
	Scenario *Scenario
	// Seeds are the seeds, in the order given; Reports holds one report
	// per seed, in the same order.
	Seeds   []uint64
	Reports []*Report
}

// Seeds returns n consecutive seeds from first: first, first+1, ...
func Seeds(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

// RunSeeds runs s once for each seed, each time on a copy of s with that
// seed. Seeds run in parallel on up to GOMAXPROCS goroutines (each [Run]
// has its own), all of which have returned when RunSeeds does; the report
// is the same for the same scenario and seeds. An empty list of seeds, a
// zero seed or an invalid scenario is an error.
func RunSeeds(s *Scenario, seeds []uint64) (*SeedsReport, error) {
	if err := checkSeeds(seeds); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	reps := make([]*Report, len(seeds))
	errs := make([]error, len(seeds))
	inParallel(len(seeds), func(i int) {
		c := *s
		c.Seed = seeds[i]
		reps[i], errs[i] = Run(&c)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return &SeedsReport{Scenario: s, Seeds: slices.Clone(seeds), Reports: reps}, nil
}

// Figure names a headline figure of a run.
type Figure int

const (
	// WorstGoodput is the entry's goodput in the run's worst second
	// (requests a second answered successfully in time).
	WorstGoodput Figure = iota
	// WorstDrop is the fraction of the baseline's goodput lost in that
	// second ([RunResult.WorstDrop]).
	WorstDrop
	// Amplification is the goodput amplification: the baseline's goodput
	// over the run's, in that second ([RunResult.Amplification]).
	Amplification
	// Unanswered is the number of entry requests answered with an error
	// or too late ([RunResult.Unanswered]).
	Unanswered
	// Recovery is how long after the fault full service came back, in
	// seconds; no value if it did not within the run.
	Recovery
	// FirstOpen is how long after the first fault began the run's first
	// breaker opened, in seconds; no value if none opened.
	FirstOpen
)

func (f Figure) String() string {
	switch f {
	case WorstGoodput:
		return "worst goodput"
	case WorstDrop:
		return "worst drop"
	case Amplification:
		return "goodput amplification"
	case Unanswered:
		return "unanswered"
	case Recovery:
		return "recovery"
	case FirstOpen:
		return "first open"
	}
	return "figure(?)"
}

// Of returns the figure for the run of kind k in rep, and false if the
// report has no such run or the figure has no value in it.
func (f Figure) Of(rep *Report, k RunKind) (float64, bool) {
	run := rep.Run(k)
	if run == nil {
		return 0, false
	}
	switch f {
	case WorstGoodput:
		return float64(run.Entry.Good[int(run.WorstAt/time.Second)]), true
	case WorstDrop:
		return run.WorstDrop, true
	case Amplification:
		return run.Amplification, true
	case Unanswered:
		return float64(run.Unanswered), true
	case Recovery:
		if !run.Recovered || rep.FaultEnd == 0 {
			return 0, false
		}
		return run.Recovery.Seconds(), true
	case FirstOpen:
		first, ok := time.Duration(0), false
		for i := range run.Calls {
			if at, opened := run.Calls[i].FirstOpen(); opened && (!ok || at < first) {
				first, ok = at, true
			}
		}
		if !ok {
			return 0, false
		}
		return (first - rep.FaultStart).Seconds(), true
	}
	return 0, false
}

// A Spread is a figure over seeds: its median, least and greatest value,
// over the N seeds in which it has a value (N may be fewer than the
// seeds: a breaker that never opens has no time to open).
type Spread struct {
	Median, Min, Max float64
	N                int
}

// Spread returns figure f of the runs of kind k over the seeds.
func (r *SeedsReport) Spread(k RunKind, f Figure) Spread {
	var vals []float64
	for _, rep := range r.Reports {
		if v, ok := f.Of(rep, k); ok {
			vals = append(vals, v)
		}
	}
	return spreadOf(vals)
}

func spreadOf(vals []float64) Spread {
	if len(vals) == 0 {
		return Spread{}
	}
	slices.Sort(vals)
	n := len(vals)
	med := vals[n/2]
	if n%2 == 0 {
		lo, hi := vals[n/2-1], vals[n/2]
		med = lo + (hi-lo)/2
		if math.IsInf(hi, 1) {
			med = hi
		}
	}
	return Spread{Median: med, Min: vals[0], Max: vals[n-1], N: n}
}

// WriteText prints the spread of each headline figure of each faulted run
// over the seeds: median [least, greatest].
func (r *SeedsReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	first := r.Reports[0]
	runs := first.faulted()
	fmt.Fprintf(bw, "over %d seeds (%s): median [least, greatest]\n", len(r.Seeds), seedList(r.Seeds))
	rows := [][]string{{""}}
	for _, run := range runs {
		rows[0] = append(rows[0], run.Label)
	}
	row := func(name string, f Figure, format func(float64) string) {
		cells := []string{name}
		for _, run := range runs {
			s := r.Spread(run.Kind, f)
			switch {
			case s.N == 0:
				cells = append(cells, "-")
			default:
				cell := fmt.Sprintf("%s [%s, %s]", format(s.Median), format(s.Min), format(s.Max))
				if s.N < len(r.Seeds) {
					cell += fmt.Sprintf(" in %d", s.N)
				}
				cells = append(cells, cell)
			}
		}
		rows = append(rows, cells)
	}
	row("entry goodput, worst second (req/s)", WorstGoodput, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	row("  drop vs baseline", WorstDrop, func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) })
	row("  goodput amplification *", Amplification, amplificationShort)
	row("requests lost (error or no answer in time)", Unanswered, func(v float64) string { return thousands(int64(v)) })
	if first.FaultEnd > 0 {
		row("full service back after the fault (s)", Recovery, func(v float64) string { return fmt.Sprintf("+%.1f", v) })
		row("first breaker opens, into the fault (s)", FirstOpen, func(v float64) string { return fmt.Sprintf("%+.1f", v) })
	}
	writeColumns(bw, rows)
	fmt.Fprintln(bw, amplificationNote)
	fmt.Fprintln(bw, `"in N": the figure has a value in N of the seeds only (full service not back, or no breaker opened, in the others)`)
	return bw.Flush()
}

// seedList writes seeds as ranges: "1-10", "1, 3, 7-9".
func seedList(seeds []uint64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", seeds[i], seeds[j]))
		} else {
			parts = append(parts, fmt.Sprintf("%d", seeds[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// writeColumns writes rows as left-aligned columns three spaces apart.
func writeColumns(w *bufio.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, c := range cells {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, cells := range rows {
		var sb strings.Builder
		for i, c := range cells {
			if i > 0 {
				sb.WriteString("   ")
			}
			sb.WriteString(c)
			sb.WriteString(strings.Repeat(" ", widths[i]-len(c)))
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
}
