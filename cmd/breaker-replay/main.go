// Command breaker-replay tries breaker policies against injected faults in
// a simulated call chain, starting from the replay of the incident behind
// the breaker's defaults.
//
// With no flags it runs that scenario, seeds000 (inventory fails 40% of
// calls and slows 20% for 20 s under a constant 1200 req/s) without and
// with the default policy, prints the comparison for the scenario's seed,
// then each headline figure as median and range over five seeds (-seeds),
// and writes the chart of the scenario's seed to replay.svg:
//
//	go run ./cmd/breaker-replay
//
// Try another shipped scenario, or your own file, and a candidate policy:
// a policy document, laid over the policy each call runs under, or the
// group policy document that breaker-check and a breaker.Group read
// (its overrides keyed by call, "orders->inventory", or by called tier):
//
//	go run ./cmd/breaker-replay -list
//	go run ./cmd/breaker-replay -scenario flapping
//	go run ./cmd/breaker-replay -scenario my-chain.json -policy candidate.json -svg out.svg
//
// Or replay traffic recorded with package github.com/govkit/breaker/calltrace
// through a candidate policy:
//
//	go run ./cmd/breaker-replay -trace calls.jsonl -policy candidate.json
//
// The trace report begins with its self-check: the share of the recorded
// refusals that a replay of the policy that ran (-active, by default the
// default policy) reproduces. A flag that does not apply to what the
// command is asked to do (-scenario with -trace, -policy with -choose) is
// refused by name, with exit status 2, as is any other bad input.
//
// How the default scenario's figures move with the parameters that were
// chosen rather than taken from the incident (see docs/replay.md):
//
//	go run ./cmd/breaker-replay -sensitivity
//
// Which protection suits which kind of fault: no protection, the breaker,
// client-side throttling, or both, on four scenarios over ten seeds,
// printed as Markdown (docs/replay.md, "Choosing a protection"):
//
//	go run ./cmd/breaker-replay -choose
//
// The scenario format is documented in package
// github.com/govkit/breaker/replay; -show prints a shipped scenario to
// start from. The simulation runs in virtual time: five simulated minutes
// take about a second a seed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/readlimit"
	"github.com/govkit/breaker/replay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the replay could not be written
	exitUsage = 2 // bad flags or a bad scenario or policy
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("breaker-replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		scenario = fs.String("scenario", replay.DefaultScenario, "a shipped scenario's `name` (see -list) or a scenario JSON file")
		policy   = fs.String("policy", "", "a policy JSON `file` to try as the candidate: a policy document, laid over the policy each call runs under, or a group policy document ({\"default\": ..., \"overrides\": ...}, keyed by call or called tier)")
		on       = fs.String("on", "", "comma-separated `calls` (\"orders->inventory\") the -policy candidate applies to; default every guarded call")
		svg      = fs.String("svg", "replay.svg", "write the chart to this `file`; empty for none")
		seed     = fs.Uint64("seed", 0, "override the scenario's seed (0 keeps it)")
		seeds    = fs.Int("seeds", defaultSeeds, "run this many seeds from the scenario's (or -seed) and print each headline figure as median and range; 1 for the one seed's report only")
		full     = fs.Bool("full", false, "print every second, without folding steady stretches")
		list     = fs.Bool("list", false, "list the shipped scenarios and exit")
		show     = fs.Bool("show", false, "print the scenario's JSON and exit")
		sens     = fs.Bool("sensitivity", false, "print how the default scenario's figures move with the parameters chosen rather than taken from the incident (the gateway queue, orders' timeout, the load), median and range over -seeds seeds")
		active   = fs.String("active", "", "with -trace: the policy `file` that ran when the trace was recorded (a policy or a group policy document), for the self-check; default the default policy")
		tracef   = fs.String("trace", "", "replay a recorded trace `file` (JSON lines, package github.com/govkit/breaker/calltrace) through the -policy candidate (a policy or a group policy document) instead of simulating")
		choose   = fs.Bool("choose", false, "compare the protections (none, breaker, throttle, both) on the partial-outage, hard-outage, overload and seeds000 scenarios (or -scenario's alone) over -seeds seeds (10 unless given), and print the table as Markdown")
		protect  = fs.String("protections", "", "with -choose: comma-separated `names` of the protections to compare; default all")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: breaker-replay [flags]\n\n")
		fmt.Fprintf(stderr, "Simulates a call chain under injected faults without and with breakers,\n")
		fmt.Fprintf(stderr, "prints the entry's goodput per second and writes a chart. With -trace,\n")
		fmt.Fprintf(stderr, "replays recorded calls through the -policy candidate instead.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "breaker-replay: unexpected argument %q (flags go before arguments; see -h)\n", fs.Arg(0))
		return exitUsage
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "breaker-replay: "+format+"\n", args...)
		return code
	}
	if err := checkFlags(fs); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *svg != "" {
		// Found before the work, not after it.
		if err := chartPath(*svg); err != nil {
			return fail(exitUsage, "-svg %s: %v", *svg, err)
		}
	}
	if *tracef != "" {
		return runTrace(*tracef, *policy, *active, *svg, stdout, stderr)
	}
	if *choose {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		var names []string
		if set["scenario"] {
			names = []string{*scenario}
		}
		n := chooseSeeds
		if set["seeds"] {
			n = *seeds
		}
		return runChoose(names, *seed, n, *protect, stdout, stderr)
	}
	if *list {
		if err := replay.WriteScenarioList(stdout); err != nil {
			return fail(exitError, "%v", err)
		}
		return exitOK
	}
	data, err := readScenario(*scenario)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *show {
		_, err := stdout.Write(data)
		if err != nil {
			return fail(exitError, "%v", err)
		}
		return exitOK
	}
	s, err := replay.ParseScenario(data)
	if err != nil {
		return fail(exitUsage, "%s: %v", *scenario, err)
	}
	if *seed != 0 {
		s.Seed = *seed
	}
	if runFor > 0 && runFor < s.Duration {
		s.Duration = runFor
	}
	if *seeds < 1 || *seeds > maxSeeds {
		return fail(exitUsage, "-seeds: must be in [1, %d], got %d", maxSeeds, *seeds)
	}
	if err := checkSeedRange(s.Seed, *seeds); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *sens {
		start := time.Now()
		if err := writeSensitivity(stdout, data, replay.Seeds(s.Seed, *seeds), knobs); err != nil {
			return fail(exitUsage, "%v", err)
		}
		fmt.Fprintf(stderr, "sensitivity table in %v wall time\n", time.Since(start).Round(time.Millisecond))
		return exitOK
	}
	if *policy != "" {
		c, err := candidate(*policy, *on)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		s.Candidate = c
		if err := s.Validate(); err != nil {
			if *on != "" {
				return fail(exitUsage, "-policy %s -on %s: %v", *policy, *on, err)
			}
			return fail(exitUsage, "-policy %s: %v", *policy, err)
		}
	} else if *on != "" {
		return fail(exitUsage, "-on applies to a -policy candidate; give -policy too")
	}

	start := time.Now()
	all, err := replay.RunSeeds(s, replay.Seeds(s.Seed, *seeds))
	if err != nil {
		return fail(exitError, "%v", err)
	}
	wall := time.Since(start)
	rep := all.Reports[0]
	if err := rep.WriteText(stdout, replay.TextOptions{Full: *full}); err != nil {
		return fail(exitError, "%v", err)
	}
	if *seeds > 1 {
		fmt.Fprintln(stdout)
		if err := all.WriteText(stdout); err != nil {
			return fail(exitError, "%v", err)
		}
	}
	var requests int64
	for _, rep := range all.Reports {
		for _, r := range rep.Runs {
			requests += r.Requests
		}
	}
	fmt.Fprintf(stderr, "simulated %d runs of %v for %d seeds (%s requests) in %v wall time\n",
		len(rep.Runs), s.Duration, *seeds, millions(requests), wall.Round(time.Millisecond))
	if *svg != "" {
		if err := writeSVG(rep, *svg); err != nil {
			return fail(exitError, "%v", err)
		}
		fmt.Fprintf(stderr, "chart written to %s\n", *svg)
	}
	return exitOK
}

// modes are the flags that choose what the command does, in the order it
// looks at them, each with the other flags that apply to it. The replay
// of a scenario, the mode without any of these, takes the flags in
// scenarioFlags. A flag that does not apply to the mode is refused by
// name, rather than ignored: a command line that says more than the
// command does is a mistake.
var modes = []struct {
	flag  string
	takes []string
}{
	{"trace", []string{"policy", "active", "svg"}},
	{"choose", []string{"scenario", "seed", "seeds", "protections"}},
	{"list", nil},
	{"show", []string{"scenario"}},
	{"sensitivity", []string{"scenario", "seed", "seeds"}},
}

var scenarioFlags = []string{"scenario", "policy", "on", "svg", "seed", "seeds", "full"}

// checkFlags refuses a flag given with a mode it does not apply to, and
// two modes at once. An -svg of "" (no chart) applies to every mode.
func checkFlags(fs *flag.FlagSet) error {
	set := map[string]bool{}
	var order []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "svg" && f.Value.String() == "" {
			return
		}
		set[f.Name] = true
		order = append(order, f.Name)
	})
	mode, takes := "", scenarioFlags
	for _, m := range modes {
		if set[m.flag] {
			mode, takes = m.flag, m.takes
			break
		}
	}
	if mode == "sensitivity" && (set["policy"] || set["on"]) {
		return errors.New("-sensitivity varies the scenario, not a candidate; leave out -policy and -on")
	}
	for _, name := range order {
		if name == mode || slices.Contains(takes, name) {
			continue
		}
		if mode == "" {
			return fmt.Errorf("-%s applies to %s only; leave it out", name, appliesTo(name))
		}
		return fmt.Errorf("-%s does not apply with -%s; leave it out", name, mode)
	}
	return nil
}

// appliesTo names the modes a flag that the replay of a scenario does not
// take applies to.
func appliesTo(name string) string {
	var in []string
	for _, m := range modes {
		if slices.Contains(m.takes, name) {
			in = append(in, "-"+m.flag)
		}
	}
	return strings.Join(in, " and ")
}

// checkSeedRange refuses seeds that run past the largest seed.
func checkSeedRange(first uint64, n int) error {
	if first > math.MaxUint64-uint64(n-1) {
		return fmt.Errorf("-seed: %d seeds from %d run past the largest seed, %d", n, first, uint64(math.MaxUint64))
	}
	return nil
}

// readScenario reads a scenario file, or a shipped scenario by name. A
// name with a path separator or a .json suffix is a file.
func readScenario(arg string) ([]byte, error) {
	if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, filepath.Separator) || strings.ContainsRune(arg, '/') {
		return readlimit.File("-scenario", arg, maxScenario)
	}
	data, err := replay.ScenarioJSON(arg)
	if err != nil {
		return nil, fmt.Errorf("-scenario: %w", err)
	}
	return data, nil
}

// maxScenario is the most the command reads of a scenario file: far
// beyond a chain of replay.MaxTiers tiers with a policy on every call, and
// a bound on what a path to a device or a runaway file costs.
const maxScenario = 16 << 20

// candidate reads the -policy document: a group policy document
// ({"default": ..., "overrides": ...}, the one breaker-check and a
// breaker.Group read), whose policy for each call's key runs in the
// candidate run, or a single policy document, laid over the policy each
// call runs under.
func candidate(path, on string) (*replay.Candidate, error) {
	data, err := readlimit.File("-policy", path, breaker.MaxPolicyDocumentSize)
	if err != nil {
		return nil, err
	}
	c := &replay.Candidate{Label: strings.TrimSuffix(filepath.Base(path), ".json")}
	if isGroupDocument(data) {
		gp, err := breaker.ParseGroupPolicy(data)
		if err != nil {
			return nil, fmt.Errorf("-policy %s: %w", path, err)
		}
		c.Policies = &gp
	} else {
		// Validated by the scenario's validation, over each call's
		// policy: a change such as {"window": "10s"} may be invalid over
		// the default policy and valid over a call's own.
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, fmt.Errorf("-policy %s: want a JSON object, got nothing", path)
		}
		c.Overlay = string(data)
	}
	for _, name := range strings.Split(on, ",") {
		if name = strings.TrimSpace(name); name != "" {
			c.Calls = append(c.Calls, name)
		}
	}
	return c, nil
}

// isGroupDocument says whether a policy document is a group's: its top
// level names "default", "overrides" or "candidate".
func isGroupDocument(data []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return false
	}
	for _, k := range []string{"default", "overrides", "candidate"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// defaultSeeds is how many seeds the command runs by default: enough for a
// median and a range, few enough that the default replay takes seconds.
// maxSeeds bounds -seeds.
const (
	defaultSeeds = 5
	maxSeeds     = 1000
)

// chartPath reports why the chart could not be written to path: a
// directory that does not exist or is not one, or a path that is a
// directory.
func chartPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

func writeSVG(rep *replay.Report, path string) error { return createFile(path, rep.WriteSVG) }

// createFile creates path and writes it with write, reporting the first
// error, the one of Close included.
func createFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return write(f)
}

func millions(n int64) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%d", n)
}

// runTrace replays a recorded trace through the candidate: the -policy
// document (a group policy document, {"default": ..., "overrides": ...},
// or a single policy laid over the policy each key ran under, -active's),
// or the default policy.
func runTrace(path, policy, active, svg string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "breaker-replay: "+format+"\n", args...)
		return code
	}
	var gp, ap breaker.GroupPolicy
	if active != "" {
		data, err := readlimit.File("-active", active, breaker.MaxPolicyDocumentSize)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		if ap, err = parseActive(data); err != nil {
			return fail(exitUsage, "-active %s: %v", active, err)
		}
	}
	if policy != "" {
		data, err := readlimit.File("-policy", policy, breaker.MaxPolicyDocumentSize)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		if gp, err = traceCandidate(data, ap); err != nil {
			return fail(exitUsage, "-policy %s: %v", policy, err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(exitUsage, "-trace: %v", err)
	}
	defer f.Close()
	start := time.Now()
	rep, err := replay.ReplayTraceWith(f, gp, replay.TraceOptions{Active: ap})
	if err != nil {
		return fail(exitUsage, "-trace %s: %v", path, err)
	}
	if rep.Calls == 0 {
		return fail(exitUsage, "-trace %s holds no calls", path)
	}
	if err := rep.WriteText(stdout); err != nil {
		return fail(exitError, "%v", err)
	}
	fmt.Fprintf(stderr, "replayed %d calls in %v wall time\n", rep.Calls, time.Since(start).Round(time.Millisecond))
	if svg != "" {
		if err := createFile(svg, rep.WriteSVG); err != nil {
			return fail(exitError, "%v", err)
		}
		fmt.Fprintf(stderr, "chart written to %s\n", svg)
	}
	return exitOK
}

// parseActive reads the -active document: a group policy document, or a
// single policy document as the group's default.
func parseActive(data []byte) (breaker.GroupPolicy, error) {
	if isGroupDocument(data) {
		return breaker.ParseGroupPolicy(data)
	}
	p, err := breaker.ParsePolicy(data)
	if err != nil {
		return breaker.GroupPolicy{}, err
	}
	return breaker.GroupPolicy{Default: p}, nil
}

// traceCandidate reads the -policy document of a trace replay: a group
// policy document as it is, or a single policy document laid over each
// policy of active (its default, the default policy if it has none, and
// each override), so that every key keeps the rest of the policy it ran
// under.
func traceCandidate(data []byte, active breaker.GroupPolicy) (breaker.GroupPolicy, error) {
	if isGroupDocument(data) {
		return breaker.ParseGroupPolicy(data)
	}
	def := active.Default
	if def == (breaker.Policy{}) {
		def = breaker.DefaultPolicy()
	}
	if err := def.UnmarshalJSON(data); err != nil {
		return breaker.GroupPolicy{}, err
	}
	gp := breaker.GroupPolicy{Default: def}
	keys := make([]string, 0, len(active.Overrides))
	for k := range active.Overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := active.Overrides[k]
		if err := p.UnmarshalJSON(data); err != nil {
			return breaker.GroupPolicy{}, fmt.Errorf("laid over -active's policy of %q: %w", k, err)
		}
		if gp.Overrides == nil {
			gp.Overrides = map[string]breaker.Policy{}
		}
		gp.Overrides[k] = p
	}
	return gp, nil
}
