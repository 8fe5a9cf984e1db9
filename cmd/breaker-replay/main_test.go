package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runCmd runs the command with args and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testutil.RunCommand(t, run, args...)
}

// long says whether to run the long variants of the tests: the
// README's command exactly as written (five seeds of five simulated
// minutes) rather than with one seed cut after the fault. scripts/stress.sh
// sets it.
var long = os.Getenv("BREAKER_LONG") != ""

// TestNoFlags is the README's command: the replay of the incident behind
// the breaker's defaults on the default policy, the comparison on stdout
// with each headline figure over five seeds, the chart in replay.svg. The
// suite runs it with one seed, cut at 1:25, after the fault (the shipped
// seed's report up to there is the same, as TestCalibration_Seeds000 in
// package replay checks under BREAKER_LONG); BREAKER_LONG=1 runs it as
// written.
func TestNoFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full default replay")
	}
	dir := t.TempDir()
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	defer func() { require.NoError(t, os.Chdir(wd)) }()

	var args []string
	seeds, simulated := defaultSeeds, "5m0s"
	if !long {
		args, seeds, simulated = []string{"-seeds", "1"}, 1, "1m25s"
		defer func(d time.Duration) { runFor = d }(runFor)
		runFor = 85 * time.Second
	}
	code, stdout, stderr := runCmd(t, args...)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "scenario  seeds000")
	assert.Contains(t, stdout, "no breaker")
	assert.Contains(t, stdout, "with breaker: default policy on gateway->orders, orders->inventory")
	assert.Contains(t, stdout, simulated+" simulated, seed 1\n")
	assert.Regexp(t, fmt.Sprintf(`simulated 3 runs of %s for %d seeds \(\d+(\.\dM)? requests\) in .* wall time`, simulated, seeds), stderr)
	if long {
		assert.Contains(t, stdout, "over 5 seeds (1-5): median [least, greatest]")
		assert.Regexp(t, `(?m)^entry goodput, worst second \(req/s\) +\d+ \[\d+, \d+\] +\d+ \[\d+, \d+\]$`, stdout)
	} else {
		assert.NotContains(t, stdout, "median")
	}
	assert.Contains(t, stderr, "chart written to replay.svg")
	svg, err := os.ReadFile(filepath.Join(dir, "replay.svg"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(svg, []byte("<svg ")))
	assert.Contains(t, string(svg), "seeds000: entry goodput")
}

// -seeds runs the scenario once per seed from the scenario's (or -seed),
// prints the first seed's report, then each headline figure as median
// [least, greatest].
func TestSeeds(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-seeds", "3", "-seed", "4")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "5m0s simulated, seed 4\n")
	assert.Contains(t, stdout, "over 3 seeds (4-6): median [least, greatest]\n")
	assert.Regexp(t, `(?m)^  goodput amplification \* +inf \[inf, inf\] `, stdout, "nothing answered in the worst second")
	assert.Regexp(t, `(?m)^requests lost \(error or no answer in time\) +360 \[360, 360\] +360 \[360, 360\] +\d+ \[\d+, \d+\]$`, stdout)
	assert.Contains(t, stdout, "* goodput amplification = baseline goodput / the run's goodput, in the run's worst second of goodput")
	assert.Contains(t, stderr, "simulated 4 runs of 5m0s for 3 seeds")

	code, one, _ := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-seeds", "1", "-seed", "4")
	require.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(stdout, one), "the first seed's report, as -seeds 1 prints it")
	assert.NotContains(t, one, "median")

	for _, v := range []string{"0", "-2", "1001"} {
		code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-seeds", v)
		assert.Equal(t, exitUsage, code, v)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "-seeds: must be in [1, 1000], got "+v)
	}
}

func TestScenarioByName(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "low.svg")
	code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-svg", svg)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "scenario  low-traffic")
	assert.Contains(t, stdout, "min_requests 5: default policy with min_requests=5 on reconcile->ledger")
	_, err := os.Stat(svg)
	assert.NoError(t, err)
}

func TestOutputIsDeterministic(t *testing.T) {
	_, first, _ := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-full")
	code, second, stderr := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-full")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, first, second)
	assert.NotContains(t, stderr, "chart written", "-svg '' writes no chart")
	_, third, _ := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-full", "-seed", "99")
	assert.Contains(t, third, "seed 99")
}

func TestScenarioFile(t *testing.T) {
	data, err := replay.ScenarioJSON("low-traffic")
	require.NoError(t, err)
	path := testutil.WriteFile(t, "mine.json", strings.Replace(string(data), `"rate": 3,`, `"rate": 2,`, 1))
	code, stdout, stderr := runCmd(t, "-scenario", path, "-svg", "")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "2 req/s (uniform) at reconcile")
}

func TestCandidatePolicy(t *testing.T) {
	path := testutil.WriteFile(t, "eager.json", `{"min_requests": 5, "open_for": "10s"}`)
	code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-policy", path, "-on", "reconcile->ledger", "-svg", "")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "eager: default policy with min_requests=5 open_for=10s on reconcile->ledger")
	assert.Contains(t, stdout, "breakers, eager run")
}

// -policy takes the group policy document that breaker-check and a
// breaker.Group read, so that a team's breakers.json runs as it is. It
// refused it ("default: unknown field; overrides: unknown field"), and a
// single policy was laid over the scenario's policy rather than over each
// call's own.
func TestCandidatePolicy_GroupDocument(t *testing.T) {
	group := testutil.WriteFile(t, "breakers.json", `{"default": {"open_for": "10s"}, "overrides": {"ledger": {"min_requests": 5}}}`)
	code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-policy", group, "-svg", "", "-seeds", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "breakers: default policy with min_requests=5 open_for=10s on reconcile->ledger", "the override for the called tier, over the document's default")

	// A single policy is laid over each call's own: seeds000's calls keep
	// what the scenario gives them.
	data := strings.Replace(mustJSON(t, "low-traffic"), `"to": "ledger",`, `"to": "ledger", "policy": {"probes": 5},`, 1)
	require.Contains(t, data, `"probes": 5`)
	scen := testutil.WriteFile(t, "own.json", data)
	change := testutil.WriteFile(t, "window.json", `{"window": "10s"}`)
	code, stdout, stderr = runCmd(t, "-scenario", scen, "-policy", change, "-svg", "", "-seeds", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "window: default policy with window=10s probes=5 on reconcile->ledger")
}

// With -trace, a single -policy is laid over the policy each key ran
// under (-active's), not over the default policy.
func TestTrace_SinglePolicyIsLaidOverTheActiveOnes(t *testing.T) {
	active := breaker.GroupPolicy{Default: breaker.DefaultPolicy(), Overrides: map[string]breaker.Policy{}}
	pricing := breaker.DefaultPolicy()
	pricing.CallTimeout, pricing.Probes = 250*time.Millisecond, 5
	active.Overrides["pricing"] = pricing
	gp, err := traceCandidate([]byte(`{"window": "10s"}`), active)
	require.NoError(t, err)
	want := pricing
	want.Window = 10 * time.Second
	assert.Equal(t, want, gp.Overrides["pricing"])
	def := breaker.DefaultPolicy()
	def.Window = 10 * time.Second
	assert.Equal(t, def, gp.Default)

	gp, err = traceCandidate([]byte(`{"overrides": {"pricing": {"probes": 2}}}`), active)
	require.NoError(t, err)
	assert.Equal(t, 2, gp.Overrides["pricing"].Probes, "a group document is taken as it is")
	assert.Equal(t, breaker.DefaultPolicy().CallTimeout, gp.Overrides["pricing"].CallTimeout)

	pricing.OpenFor = 100 * time.Second
	pricing.MaxOpenFor = 200 * time.Second
	active.Overrides["pricing"] = pricing
	_, err = traceCandidate([]byte(`{"max_open_for": "90s"}`), active)
	assert.ErrorContains(t, err, `laid over -active's policy of "pricing"`)
}

// A throttling policy document replays: the run is named by its throttle,
// and its throttled calls are counted apart from the breaker's refusals.
func TestCandidatePolicy_Throttling(t *testing.T) {
	path := testutil.WriteFile(t, "throttled.json", `{"error_ratio": 0.8, "throttle": {"enabled": true, "k": 1.5}}`)
	defer func(d time.Duration) { runFor = d }(runFor)
	runFor = 20 * time.Second // the fault begins at 0:10
	code, stdout, stderr := runCmd(t, "-scenario", "overload", "-policy", path, "-svg", "", "-seeds", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "throttled: default policy with error_ratio=0.8 throttle.enabled=true throttle.k=1.5")
}

// TestBadInput: every kind of bad input ends in an exit code of 2 and a
// message that names what is wrong; none panics.
func TestBadInput(t *testing.T) {
	good := testutil.WriteFile(t, "good.json", `{"min_requests": 5}`)
	tests := []struct {
		name string
		args func(t *testing.T) []string
		want string
	}{
		{"unknown scenario", func(*testing.T) []string { return []string{"-scenario", "seeds-000"} },
			`no shipped scenario "seeds-000" (have cold-start, drift, flapping, hard-outage, low-traffic, no-call-timeout, overload, partial-outage, seeds000, slow-only)`},
		{"missing file", func(*testing.T) []string { return []string{"-scenario", "nope.json"} }, "nope.json: no such file"},
		{"bad field", func(t *testing.T) []string {
			return []string{"-scenario", testutil.WriteFile(t, "s.json", strings.Replace(mustJSON(t, "seeds000"), `"workers": 200`, `"workers": 0`, 1))}
		}, "tiers[0].workers: must be in [1, 100000], got 0"},
		{"unknown field", func(t *testing.T) []string {
			return []string{"-scenario", testutil.WriteFile(t, "s.json", strings.Replace(mustJSON(t, "seeds000"), `"seed": 1`, `"sead": 1`, 1))}
		}, "sead: unknown field"},
		{"malformed", func(t *testing.T) []string {
			return []string{"-scenario", testutil.WriteFile(t, "s.json", "{\n  \"name\": \"x\",\n  \"duration\": 5m\n}")}
		}, "malformed JSON at line 3, column 16"},
		{"binary", func(t *testing.T) []string {
			return []string{"-scenario", testutil.WriteFile(t, "s.json", "\x00\xff\xfe")}
		}, "(document): want a JSON object"},
		{"empty", func(t *testing.T) []string { return []string{"-scenario", testutil.WriteFile(t, "s.json", "")} },
			"(document): want a JSON object, got nothing"},
		{"huge rate", func(t *testing.T) []string {
			return []string{"-scenario", testutil.WriteFile(t, "s.json", strings.Replace(mustJSON(t, "seeds000"), `"rate": 1200`, `"rate": 1e300`, 1))}
		}, "entry.rate: must be at most 100000"},
		{"bad policy", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "p.json", `{"window": "5s", "buckets": 7}`)}
		}, "buckets: must divide window"},
		{"policy unknown field", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "p.json", `{"windw": "5s"}`)}
		}, "windw: unknown field"},
		{"policy on unknown call", func(*testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", good, "-on", "reconcile->ledgr"}
		}, `candidate.calls[0]: no call is named "reconcile->ledgr"`},
		{"-on without -policy", func(*testing.T) []string { return []string{"-on", "orders->inventory"} }, "give -policy too"},
		{"stray argument", func(*testing.T) []string { return []string{"seeds000"} }, `unexpected argument "seeds000"`},
		{"-sensitivity on a seeds000 of one tier", func(t *testing.T) []string {
			return []string{"-sensitivity", "-scenario", oneTierSeeds000(t)}
		}, `-sensitivity varies the tier gateway of seeds000, and scenario "seeds000" has no tier gateway`},
		{"-sensitivity on a seeds000 without orders->inventory", func(t *testing.T) []string {
			data := strings.Replace(mustJSON(t, "seeds000"), `"to": "inventory"`, `"to": "orders-db"`, 1)
			data = strings.Replace(data, `"name": "inventory"`, `"name": "orders-db"`, 1)
			data = strings.ReplaceAll(data, `"tier": "inventory"`, `"tier": "orders-db"`)
			return []string{"-sensitivity", "-scenario", testutil.WriteFile(t, "seeds000", data)}
		}, `-sensitivity varies the call orders->inventory of seeds000, and scenario "seeds000" has no such call`},
		{"seeds past the largest", func(*testing.T) []string {
			return []string{"-scenario", "low-traffic", "-seed", "18446744073709551615", "-seeds", "2"}
		}, "-seed: 2 seeds from 18446744073709551615 run past the largest seed"},
		{"-choose seeds past the largest", func(*testing.T) []string {
			return []string{"-choose", "-scenario", "low-traffic", "-seed", "18446744073709551614", "-seeds", "3"}
		}, "-seed: 3 seeds from 18446744073709551614 run past the largest seed"},
		{"-trace with -scenario", func(t *testing.T) []string {
			return []string{"-trace", testutil.WriteFile(t, "t.jsonl", "\n"), "-scenario", "flapping"}
		}, "-scenario does not apply with -trace; leave it out"},
		{"-trace with -choose", func(t *testing.T) []string {
			return []string{"-trace", testutil.WriteFile(t, "t.jsonl", "\n"), "-choose"}
		}, "-choose does not apply with -trace; leave it out"},
		{"-choose with -policy", func(*testing.T) []string { return []string{"-choose", "-policy", good} },
			"-policy does not apply with -choose; leave it out"},
		{"-list with -scenario", func(*testing.T) []string { return []string{"-list", "-scenario", "flapping"} },
			"-scenario does not apply with -list; leave it out"},
		{"-show with -seed", func(*testing.T) []string { return []string{"-show", "-seed", "3"} },
			"-seed does not apply with -show; leave it out"},
		{"-active without -trace", func(*testing.T) []string { return []string{"-active", good} },
			"-active applies to -trace only; leave it out"},
		{"-protections without -choose", func(*testing.T) []string { return []string{"-protections", "none"} },
			"-protections applies to -choose only; leave it out"},
		{"-sensitivity with -full", func(*testing.T) []string { return []string{"-sensitivity", "-full"} },
			"-full does not apply with -sensitivity; leave it out"},
		{"group document with an override for no call", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "g.json", `{"overrides": {"payments": {"min_requests": 5}}}`)}
		}, `candidate.policies.overrides["payments"]: names no call, no called tier and no method of one (calls: reconcile->ledger)`},
		{"group document with a bad override", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "g.json", `{"overrides": {"ledger": {"min_requests": -5}}}`)}
		}, `overrides["ledger"].min_requests`},
		{"malformed policy", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "p.json", `{"window": `)}
		}, "-policy "},
		{"policy not an object", func(t *testing.T) []string {
			return []string{"-scenario", "low-traffic", "-policy", testutil.WriteFile(t, "p.json", `[1, 2]`)}
		}, "-policy "},
		{"unknown flag", func(*testing.T) []string { return []string{"-scenaro", "x"} }, "flag provided but not defined"},
	}
	// A chart asked of a mode that draws none: the table's runs end in
	// -svg "", which every mode takes.
	code, stdout, stderr := runCmd(t, "-sensitivity", "-svg", "x.svg")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "-svg does not apply with -sensitivity; leave it out")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, append(tt.args(t), "-svg", "")...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

// oneTierSeeds000 writes a scenario file named seeds000, whose scenario
// is named seeds000 too, with one tier.
func oneTierSeeds000(t *testing.T) string {
	return testutil.WriteFile(t, "seeds000", `{"name": "seeds000", "duration": "10s",
  "entry": {"tier": "api", "rate": 10, "timeout": "1s"},
  "tiers": [{"name": "api", "workers": 10, "service": {"mean": "1ms"}}]}`)
}

// -sensitivity varies seeds000's gateway queue, orders' timeout on
// inventory and the load. Given a file named seeds000 whose scenario is
// named seeds000 and has one tier, it panicked (index out of range); it
// now refuses the file, naming the tier it lacks, before it runs.
func TestSensitivity_ScenarioWithoutSeeds000sTiersIsRefused(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-sensitivity", "-seeds", "1", "-scenario", oneTierSeeds000(t))
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "breaker-replay: -sensitivity varies the tier gateway of seeds000, and scenario \"seeds000\" has no tier gateway\n", stderr)
}

func mustJSON(t *testing.T, name string) string {
	t.Helper()
	data, err := replay.ScenarioJSON(name)
	require.NoError(t, err)
	return string(data)
}

func TestList(t *testing.T) {
	code, stdout, _ := runCmd(t, "-list")
	require.Equal(t, exitOK, code)
	for _, name := range replay.ScenarioNames() {
		assert.Regexp(t, `(?m)^`+name+` +\S`, stdout)
	}
}

func TestShow(t *testing.T) {
	code, stdout, _ := runCmd(t, "-show", "-scenario", "flapping")
	require.Equal(t, exitOK, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &m), "-show prints the scenario's JSON")
	assert.Equal(t, "flapping", m["name"])
}

func TestHelp(t *testing.T) {
	code, _, stderr := runCmd(t, "-h")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stderr, "-scenario name")
}

func TestRun_Trace(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "calls.jsonl")
	var lines strings.Builder
	for i := 0; i < 40; i++ {
		o := "success"
		if i >= 20 {
			o = "failure"
		}
		fmt.Fprintf(&lines, `{"t":%d,"k":"inventory.GetStock","d":1000,"o":"%s"}`+"\n", 1764504000000000+i*10000, o)
	}
	lines.WriteString(`{"t":1764504001000000,"k":"inventory.GetStock","d":1000,"o":"success"}` + "\n")
	require.NoError(t, os.WriteFile(tr, []byte(lines.String()), 0o644))
	pol := filepath.Join(dir, "cand.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"min_requests": 10}`), 0o644))

	var out, errb bytes.Buffer
	chart := filepath.Join(dir, "trace.svg")
	require.Equal(t, exitOK, run([]string{"-trace", tr, "-policy", pol, "-svg", chart}, &out, &errb), errb.String())
	svgData, err := os.ReadFile(chart)
	require.NoError(t, err)
	assert.Contains(t, string(svgData), "inventory.GetStock")
	assert.Contains(t, out.String(), "inventory.GetStock")
	assert.Contains(t, out.String(), "successes lost 1")
	assert.Contains(t, out.String(), "candidate  0:00.4  open")
	assert.True(t, strings.HasPrefix(out.String(), "self-check  the recorded breakers refused no call: no refusal to reproduce\n"), "the report leads with its self-check")

	// A recorded refusal: the default policy, open by then, reproduces
	// it; a policy that could not have opened does not.
	refused := filepath.Join(dir, "refused.jsonl")
	require.NoError(t, os.WriteFile(refused, []byte(lines.String()+`{"t":1764504001100000,"k":"inventory.GetStock","refused":true}`+"\n"), 0o644))
	var sc bytes.Buffer
	require.Equal(t, exitOK, run([]string{"-trace", refused, "-svg", ""}, &sc, &errb), errb.String())
	assert.True(t, strings.HasPrefix(sc.String(), "self-check  replaying the policy that ran (the default policy) refuses 100.0% of the calls the recorded breakers refused (1 of 1)"), sc.String())
	never := testutil.WriteFile(t, "never.json", `{"min_requests": 1000}`)
	sc.Reset()
	require.Equal(t, exitOK, run([]string{"-trace", refused, "-active", never, "-svg", ""}, &sc, &errb), errb.String())
	assert.True(t, strings.HasPrefix(sc.String(), "self-check  replaying the policy that ran (the given active policy) refuses 0.0% of the calls the recorded breakers refused (0 of 1)"), sc.String())
	errb.Reset()
	assert.Equal(t, exitUsage, run([]string{"-trace", refused, "-active", bad(t), "-svg", ""}, &sc, &errb))
	assert.Contains(t, errb.String(), "-active ")

	group := filepath.Join(dir, "group.json")
	require.NoError(t, os.WriteFile(group, []byte(`{"overrides": {"inventory.GetStock": {"min_requests": 10}}}`), 0o644))
	var gout bytes.Buffer
	require.Equal(t, exitOK, run([]string{"-trace", tr, "-policy", group, "-svg", ""}, &gout, &errb), errb.String())
	assert.Equal(t, out.String(), gout.String(), "a group policy document with an override for the key")

	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(lines.String()+`{"t":1,"k":"x","d":1,"o":"maybe"}`+"\n"), 0o644))
	out.Reset()
	errb.Reset()
	assert.Equal(t, exitUsage, run([]string{"-trace", bad}, &out, &errb))
	assert.Contains(t, errb.String(), `line 42: field "o"`)
}

// The numeric flag refuses what is not a seed with exit 2 and a message
// that names it.
func TestNumericFlags_BadValuesAreRefused(t *testing.T) {
	for _, v := range []string{"-1", "18446744073709551616", "1.5", "NaN", "Inf", "x"} {
		code, stdout, stderr := runCmd(t, "-scenario", "low-traffic", "-svg", "", "-seed="+v)
		assert.Equal(t, exitUsage, code, v)
		assert.Empty(t, stdout)
		assert.Contains(t, testutil.FirstLine(stderr), "-seed", v)
	}
}

// A scenario that asks for hours of work (15 layers of 4 tiers, each
// calling the 4 of the next) is refused at once, with what it asks for and
// the bound.
func TestScenario_BeyondTheWorkBoundIsRefused(t *testing.T) {
	var tiers []string
	for l := range 15 {
		for w := range 4 {
			var calls []string
			if l < 14 {
				for v := range 4 {
					calls = append(calls, fmt.Sprintf(`{"to": "l%dt%d", "timeout": "100ms"}`, l+1, v))
				}
			}
			tiers = append(tiers, fmt.Sprintf(`{"name": "l%dt%d", "workers": 100, "service": {"mean": "1ms"}, "calls": [%s]}`, l, w, strings.Join(calls, ", ")))
		}
	}
	s := testutil.WriteFile(t, "layered.json", `{"duration": "10s", "entry": {"tier": "l0t0", "rate": 1, "timeout": "1s"}, "tiers": [`+strings.Join(tiers, ",\n")+`]}`)
	start := time.Now()
	code, stdout, stderr := runCmd(t, "-scenario", s, "-svg", "")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "tiers[0].calls: a request at l0t0 can make 357913940 downstream calls (every call made, every retry tried), more than the 10000 one request may make")
}

// A file given to the command is read only so far: a path to a device
// that never ends is refused, not read into memory.
func TestInputFiles_AreReadOnlySoFar(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "/dev/zero"}, "-scenario /dev/zero: more than 16777216 bytes"},
		{[]string{"-scenario", "low-traffic", "-policy", "/dev/zero"}, "-policy /dev/zero: more than 1048576 bytes"},
		{[]string{"-trace", "/dev/zero"}, "longer than 65536 bytes"},
		{[]string{"-trace", testutil.WriteFile(t, "t.jsonl", "\n"), "-policy", "/dev/zero"}, "-policy /dev/zero: more than 1048576 bytes"},
	} {
		code, _, stderr := runCmd(t, append(c.args, "-svg", "")...)
		assert.Equal(t, exitUsage, code, c.args)
		assert.Contains(t, stderr, c.want, c.args)
	}
}

// -sensitivity varies each chosen parameter of seeds000 in turn, the
// others as shipped, and prints per value the medians and ranges over the
// seeds, marking the shipped value. The test runs a table of two values
// on a seeds000 whose fault starts at 0:05, cut at 0:14.
func TestSensitivity(t *testing.T) {
	data := strings.Replace(mustJSON(t, "seeds000"), `"start": "1m"`, `"start": "5s"`, 1)
	require.Contains(t, data, `"start": "5s"`)
	defer func(d time.Duration) { sensitivityRun = d }(sensitivityRun)
	sensitivityRun = 14 * time.Second
	var out bytes.Buffer
	grid := []knob{knobs[1]}
	grid[0].values = []string{"600ms", "800ms"}
	require.NoError(t, writeSensitivity(&out, []byte(data), []uint64{1, 2}, grid))
	got := out.String()
	assert.Contains(t, got, "each cell: median [least, greatest] over 2 seeds (1-2), runs cut at 0:14 (the fault ends at 0:25)\n\norders' timeout on inventory\n")
	assert.Regexp(t, `(?m)^600ms \(shipped\) +\d+ \[\d+, \d+\] +\d+\.\d% \[\d+\.\d%, \d+\.\d%\]$`, got)
	assert.Regexp(t, `(?m)^800ms +0 \[0, 0\] `, got, "with an 800 ms timeout the entry answers nothing in time")

	err := writeSensitivity(&out, []byte(mustJSON(t, "slow-only")), []uint64{1}, grid)
	assert.ErrorContains(t, err, `-sensitivity varies the chosen parameters of seeds000; got scenario "slow-only"`)
	code, stdout, stderr := runCmd(t, "-sensitivity", "-policy", "x.json", "-svg", "")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "leave out -policy and -on")
}

func bad(t *testing.T) string {
	return testutil.WriteFile(t, "bad.json", `{"windw": "5s"}`)
}

// A breaker opened by the slow-call rule is reported with the slow calls
// that tripped it, in the words breaker.Trip uses. Regression: the report
// said "slow_ratio: 3/2025 failed, 3 timeouts".
func TestReport_ASlowTripLeadsWithItsSlowCalls(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "slow.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"slow_call":"200ms","slow_ratio":0.5}`), 0o600))
	code, stdout, stderr := runCmd(t, "-scenario", "slow-only", "-policy", pol)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `open +slow_ratio: \d+ of \d+ calls slower than 200ms \(\d+ failed\); cooldown`, stdout)
	assert.NotRegexp(t, `slow_ratio: \d+/\d+ failed`, stdout)
}
