package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/govkit/breaker/replay"
)

// chooseSeeds is how many seeds -choose runs unless -seeds says: enough
// for a median and a range that a table of recommendations can rest on.
const chooseSeeds = 10

// runChoose compares the protections on each scenario (the compared
// scenarios if names is empty) over n seeds from first (1 if 0), and
// prints the tables as Markdown. A protection whose policy the breaker
// refuses is reported by name with its policy, and makes the exit status
// exitError once every table is printed.
func runChoose(names []string, first uint64, n int, only string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "breaker-replay: "+format+"\n", args...)
		return code
	}
	if n < 1 || n > maxSeeds {
		return fail(exitUsage, "-seeds: must be in [1, %d], got %d", maxSeeds, n)
	}
	if first == 0 {
		first = 1
	}
	if err := checkSeedRange(first, n); err != nil {
		return fail(exitUsage, "%v", err)
	}
	protections := replay.Protections()
	if only != "" {
		var picked []replay.Protection
		for _, name := range strings.Split(only, ",") {
			name = strings.TrimSpace(name)
			i := slices.IndexFunc(protections, func(p replay.Protection) bool { return p.Name == name })
			if i < 0 {
				var all []string
				for _, p := range protections {
					all = append(all, p.Name)
				}
				return fail(exitUsage, "-protections: no protection %q (have %s)", name, strings.Join(all, ", "))
			}
			if slices.ContainsFunc(picked, func(p replay.Protection) bool { return p.Name == name }) {
				return fail(exitUsage, "-protections: %q is named twice", name)
			}
			picked = append(picked, protections[i])
		}
		protections = picked
	}
	if len(names) == 0 {
		names = replay.ComparedScenarios()
	}
	var scenarios []*replay.Scenario
	for _, name := range names {
		data, err := readScenario(name)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		s, err := replay.ParseScenario(data)
		if err != nil {
			return fail(exitUsage, "%s: %v", name, err)
		}
		scenarios = append(scenarios, s)
	}
	seeds := replay.Seeds(first, n)
	start := time.Now()
	fmt.Fprintf(stdout, "%s\n", replay.ComparisonLegend)
	refused := map[string]error{}
	for _, s := range scenarios {
		c, err := replay.Compare(s, seeds, protections)
		if err != nil {
			return fail(exitError, "%s: %v", s.Name, err)
		}
		fmt.Fprintln(stdout)
		if err := c.WriteMarkdown(stdout); err != nil {
			return fail(exitError, "%v", err)
		}
		for p, err := range c.Refused {
			if err != nil && refused[c.Protections[p].Name] == nil {
				refused[c.Protections[p].Name] = err
			}
		}
	}
	fmt.Fprintf(stderr, "compared %d protections on %d scenarios over %d seeds in %v wall time\n",
		len(protections), len(scenarios), n, time.Since(start).Round(time.Millisecond))
	if len(refused) > 0 {
		for _, p := range protections {
			if err := refused[p.Name]; err != nil {
				fmt.Fprintf(stderr, "breaker-replay: %v\n", err)
			}
		}
		return exitError
	}
	return exitOK
}
