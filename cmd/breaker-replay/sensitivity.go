package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/govkit/breaker/replay"
)

// A knob is a parameter of seeds000 that was chosen rather than taken
// from the incident, with the values the sensitivity table tries. get and
// set find the parameter by the names of its tier and call, and say so
// when the scenario has no such tier or call.
type knob struct {
	name   string
	values []string
	get    func(s *replay.Scenario) (string, error)
	set    func(s *replay.Scenario, v string) error
}

// knobs are the chosen parameters of seeds000: the gateway's accept
// queue, orders' own timeout on inventory, and the load.
var knobs = []knob{
	{
		name:   "gateway queue (requests)",
		values: []string{"950", "980", "1000", "1010", "1020", "1040", "1080", "unbounded"},
		get: func(s *replay.Scenario) (string, error) {
			t, err := tierNamed(s, "gateway")
			if err != nil {
				return "", err
			}
			if t.Queue == replay.Unbounded {
				return "unbounded", nil
			}
			return fmt.Sprint(t.Queue), nil
		},
		set: func(s *replay.Scenario, v string) error {
			t, err := tierNamed(s, "gateway")
			if err != nil {
				return err
			}
			if v == "unbounded" {
				t.Queue = replay.Unbounded
				return nil
			}
			_, err = fmt.Sscan(v, &t.Queue)
			return err
		},
	},
	{
		name:   "orders' timeout on inventory",
		values: []string{"400ms", "500ms", "600ms", "700ms", "800ms"},
		get: func(s *replay.Scenario) (string, error) {
			c, err := callNamed(s, "orders", "inventory")
			if err != nil {
				return "", err
			}
			return c.Timeout.String(), nil
		},
		set: func(s *replay.Scenario, v string) error {
			c, err := callNamed(s, "orders", "inventory")
			if err != nil {
				return err
			}
			c.Timeout, err = time.ParseDuration(v)
			return err
		},
	},
	{
		name:   "load (req/s)",
		values: []string{"1100", "1150", "1200", "1250", "1300"},
		get:    func(s *replay.Scenario) (string, error) { return fmt.Sprint(s.Entry.Rate), nil },
		set: func(s *replay.Scenario, v string) error {
			_, err := fmt.Sscan(v, &s.Entry.Rate)
			return err
		},
	},
}

// tierNamed is the scenario's tier of that name.
func tierNamed(s *replay.Scenario, name string) (*replay.Tier, error) {
	for i := range s.Tiers {
		if s.Tiers[i].Name == name {
			return &s.Tiers[i], nil
		}
	}
	return nil, fmt.Errorf("-sensitivity varies the tier %s of %s, and scenario %q has no tier %s", name, replay.DefaultScenario, s.Name, name)
}

// callNamed is the call from tier from to tier to.
func callNamed(s *replay.Scenario, from, to string) (*replay.Call, error) {
	t, err := tierNamed(s, from)
	if err != nil {
		return nil, err
	}
	for i := range t.Calls {
		if t.Calls[i].To == to {
			return &t.Calls[i], nil
		}
	}
	return nil, fmt.Errorf("-sensitivity varies the call %s->%s of %s, and scenario %q has no such call", from, to, replay.DefaultScenario, s.Name)
}

// sensitivityRun is how long each run of the table lasts: the fault of
// seeds000 is over at 1:20, and both figures fall inside it. A variable
// so that the tests can run a table of a few seconds.
var sensitivityRun = 85 * time.Second

// runFor, when not zero, cuts the replay's runs at this length. The
// command leaves it zero; a variable so that the tests can run the
// default replay in a fraction of its five minutes.
var runFor time.Duration

// writeSensitivity runs seeds000 once per seed for each value of each
// knob, the others as shipped, and writes a table per knob: the median
// over the seeds of the no-breaker run's goodput in its worst second and
// of the default policy's worst drop, with their ranges. The shipped
// value is marked.
func writeSensitivity(w io.Writer, data []byte, seeds []uint64, knobs []knob) error {
	load := func() (*replay.Scenario, error) { return replay.ParseScenario(data) }
	s, err := load()
	if err != nil {
		return err
	}
	if s.Name != replay.DefaultScenario {
		return fmt.Errorf("-sensitivity varies the chosen parameters of %s; got scenario %q", replay.DefaultScenario, s.Name)
	}
	// Every knob finds its parameter before anything runs: a file named
	// seeds000 need not have seeds000's tiers.
	shipped := make([]string, len(knobs))
	for i, k := range knobs {
		if shipped[i], err = k.get(s); err != nil {
			return err
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "sensitivity of %s to the parameters chosen rather than taken from the incident\n", s.Name)
	var end time.Duration
	for _, w := range s.FaultWindows() {
		end = max(end, w.End)
	}
	fmt.Fprintf(bw, "each cell: median [least, greatest] over %d seeds (%s), runs cut at %s (the fault ends at %s)\n",
		len(seeds), seedRange(seeds), clockOf(sensitivityRun), clockOf(end))
	for i, k := range knobs {
		fmt.Fprintf(bw, "\n%s\n", k.name)
		rows := [][]string{{"value", "no breaker: worst second (req/s)", "default policy: worst drop"}}
		for _, v := range k.values {
			c, err := load()
			if err != nil {
				return err
			}
			c.Duration = sensitivityRun
			if err := k.set(c, v); err != nil {
				return fmt.Errorf("%s = %s: %w", k.name, v, err)
			}
			all, err := replay.RunSeeds(c, seeds)
			if err != nil {
				return fmt.Errorf("%s = %s: %w", k.name, v, err)
			}
			label := v
			if shipped[i] == v {
				label += " (shipped)"
			}
			g := all.Spread(replay.NoBreaker, replay.WorstGoodput)
			d := all.Spread(replay.WithBreaker, replay.WorstDrop)
			rows = append(rows, []string{label,
				fmt.Sprintf("%.0f [%.0f, %.0f]", g.Median, g.Min, g.Max),
				fmt.Sprintf("%.1f%% [%.1f%%, %.1f%%]", d.Median*100, d.Min*100, d.Max*100)})
		}
		writeTable(bw, rows)
	}
	return bw.Flush()
}

func seedRange(seeds []uint64) string {
	if len(seeds) == 1 {
		return fmt.Sprint(seeds[0])
	}
	return fmt.Sprintf("%d-%d", seeds[0], seeds[len(seeds)-1])
}

func clockOf(d time.Duration) string {
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// writeTable writes rows as columns three spaces apart.
func writeTable(w *bufio.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		for i, c := range r {
			if i > 0 {
				sb.WriteString("   ")
			}
			sb.WriteString(c + strings.Repeat(" ", widths[i]-len(c)))
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
}
