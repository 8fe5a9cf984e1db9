package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/check"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runCmd runs the command with args and returns its exit code and output.
// Its checks simulate with a small budget (-sim-calls), which the race
// detector would otherwise make the bulk of these tests' time; runFull
// runs the command as given.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testutil.RunCommand(t, run, append([]string{"-sim-calls", "20000"}, args...)...)
}

func runFull(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testutil.RunCommand(t, run, args...)
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update)
}

// TestServicePolicy is the example of docs/checking-policies.md: the example
// service's policy document (testdata/service-policy.json is a copy of
// the one in examples/service) against a description of its traffic.
func TestServicePolicy(t *testing.T) {
	code, stdout, stderr := runFull(t, "-policy", "testdata/service-policy.json", "-traffic", "testdata/service-traffic.json")
	require.Equal(t, exitOK, code, stderr)
	golden(t, "service.golden", stdout)
	assert.Contains(t, stdout, "timeout_below_p99")
}

func TestExitCodes(t *testing.T) {
	quiet := testutil.WriteFile(t, "quiet.json", `{"keys": {"reports.Export": {"rate": 1, "deadline": "1s"}}}`)
	busy := testutil.WriteFile(t, "busy.json", `{"keys": {"orders.Create": {"rate": 300, "p50": "10ms", "p99": "50ms", "deadline": "1s", "instances": 3}}}`)
	noJitter := testutil.WriteFile(t, "nojitter.json", `{"default": {"jitter": 0}}`)
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)

	code, stdout, _ := runCmd(t, "-policy", def, "-traffic", quiet)
	assert.Equal(t, exitFindings, code, "a key that can never trip is an error")
	assert.Contains(t, stdout, "error    never_trips")

	code, _, stderr := runCmd(t, "-policy", def, "-traffic", busy)
	assert.Equal(t, exitOK, code, stderr)

	code, stdout, _ = runCmd(t, "-policy", noJitter, "-traffic", busy)
	assert.Equal(t, exitOK, code, "a warning passes by default")
	assert.Contains(t, stdout, "no_jitter")
	code, _, _ = runCmd(t, "-policy", noJitter, "-traffic", busy, "-fail-on", "warning")
	assert.Equal(t, exitFindings, code, "-fail-on warning fails on it")

	code, stdout, _ = runCmd(t, "-policy", noJitter, "-traffic", busy, "-min-severity", "warning")
	assert.Equal(t, exitOK, code)
	assert.NotContains(t, stdout, "probe_pass", "info findings are hidden")
	assert.Contains(t, stdout, "no_jitter")
}

func TestBadInput(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	traffic := testutil.WriteFile(t, "traffic.json", `{"keys": {"a": {"rate": 1}}}`)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no traffic", []string{"-policy", def}, "give -traffic, -snapshot, both, or -trace"},
		{"no policy", []string{"-traffic", traffic}, "give -policy, or -snapshot"},
		{"bad policy", []string{"-policy", testutil.WriteFile(t, "p.json", `{"default": {"window": "-1s"}}`), "-traffic", traffic}, "default.window: must be positive"},
		{"bad traffic", []string{"-policy", def, "-traffic", testutil.WriteFile(t, "t.json", `{"keys": {"a": {"p99": "soon"}}}`)}, `keys["a"].p99: must be a duration string`},
		{"missing file", []string{"-policy", "nope.json", "-traffic", traffic}, "nope.json"},
		{"bad severity", []string{"-policy", def, "-traffic", traffic, "-fail-on", "loud"}, "-fail-on: want info, warning or error"},
		{"bad fault", []string{"-policy", def, "-traffic", traffic, "-fault-errors", "0.9"}, "add up to at most 1"},
		{"no fault", []string{"-policy", def, "-traffic", traffic, "-fault-errors", "0", "-fault-timeouts", "0"}, "no fault to judge"},
		{"argument", []string{"-policy", def, "-traffic", traffic, "extra"}, `unexpected argument "extra"`},
		{"bad sim calls", []string{"-policy", def, "-traffic", traffic, "-sim-calls", "0"}, "-sim-calls must be positive, or -1 for no simulation, got 0"},
		{"bad trace", []string{"-policy", def, "-trace", testutil.WriteFile(t, "bad.jsonl", "{\"t\":1}\n")}, "line 1"},
		{"unknown key", []string{"-policy", def, "-traffic", traffic, "-suggest", "-key", "b"}, `-key: "b" has no traffic described`},
		{"bad snapshot", []string{"-snapshot", testutil.WriteFile(t, "s.json", `[1]`)}, "not a /breakers snapshot"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, c.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, c.want)
		})
	}
}

func TestJSON(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-policy", "testdata/service-policy.json", "-traffic", "testdata/service-traffic.json", "-json")
	require.Equal(t, exitOK, code, stderr)
	var out struct {
		Keys     []check.KeyReport `json:"keys"`
		Findings []check.Finding   `json:"findings"`
		Errors   int               `json:"errors"`
		Warnings int               `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	assert.Len(t, out.Keys, 2)
	assert.Equal(t, 0, out.Errors)
	assert.Equal(t, 1, out.Warnings)
	var found bool
	for _, f := range out.Findings {
		if f.Check == check.CheckTimeoutBelowP99 {
			found = true
			assert.Equal(t, "pricing.GetPrice", f.Key)
			assert.Equal(t, check.Warning, f.Severity)
			assert.InDelta(t, 0.3, f.Numbers["timeout_s"], 1e-9)
		}
	}
	assert.True(t, found, stdout)
}

// TestSnapshotURL measures the traffic from a service's /breakers, as
// examples/service serves it, and checks the policies its breakers run.
func TestSnapshotURL(t *testing.T) {
	gp, err := breaker.ParseGroupPolicy([]byte(`{"default": {"min_requests": 50}}`))
	require.NoError(t, err)
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: gp})
	require.NoError(t, err)
	// Two calls in the window: about 0.4 calls a second, far from 50.
	for i := 0; i < 2; i++ {
		require.NoError(t, g.Do(context.Background(), "ledger.Post", func(context.Context) error { return nil }))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /breakers", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(ops.Snapshot(g, ops.Thresholds{}, nil))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	latency := testutil.WriteFile(t, "latency.json", `{"defaults": {"p50": "5ms", "p99": "20ms", "deadline": "1s"}}`)

	code, stdout, stderr := runCmd(t, "-snapshot", srv.URL+"/breakers", "-traffic", latency)
	assert.Equal(t, exitFindings, code, stderr)
	assert.Contains(t, stdout, "ledger.Post  (0.421 calls/s, p50 5ms, p99 20ms, 0% errors, deadline 1s; policy ledger.Post)")
	assert.Contains(t, stdout, "min_requests 50 > 0.421 calls/s")

	code, _, stderr = runCmd(t, "-snapshot", srv.URL+"/missing", "-traffic", latency)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "answered 404")
}

// Scenario: a key of a service's snapshot, taken from request data,
// held a right-to-left override (U+202E), and the report and the
// suggestions wrote it as it is, so that the terminal showed it reversed,
// as the name of another breaker. Keys are written by ops.Printable, on
// standard output and in the messages on standard error.
func TestSnapshotKeysThatDoNotShowAsThemselvesAreEscaped(t *testing.T) {
	const poser = "ledger.Post@\u202e7.0.0.01"
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		require.NoError(t, g.Do(context.Background(), poser, func(context.Context) error { return nil }))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /breakers", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(ops.Snapshot(g, ops.Thresholds{}, nil))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	latency := testutil.WriteFile(t, "latency.json", `{"defaults": {"p50": "5ms", "p99": "20ms", "deadline": "1s"}}`)

	code, stdout, stderr := runCmd(t, "-snapshot", srv.URL+"/breakers", "-traffic", latency, "-suggest", "-top", "1")
	require.Equal(t, exitFindings, code, stderr)
	assert.NotContains(t, stdout, "\u202e")
	assert.Contains(t, stdout, "\n\"ledger.Post@\\u202e7.0.0.01\"  (")
	assert.Contains(t, stdout, "; policy default)")
	assert.Contains(t, stdout, "\nsuggestions for \"ledger.Post@\\u202e7.0.0.01\": ")

	_, err = g.Get("idle\u200b") // no calls: no traffic to replay
	require.NoError(t, err)
	code, _, stderr = runCmd(t, "-snapshot", srv.URL+"/breakers", "-traffic", latency, "-suggest")
	require.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `breaker-check: -suggest "idle\u200b": the key has no traffic`)
}

// TestSuggest_DeterministicAndQuick: -suggest gives the same answer for
// the same seed, and replays the example service's two keys well within
// ten seconds.
func TestSuggest_DeterministicAndQuick(t *testing.T) {
	args := []string{"-policy", "testdata/service-policy.json", "-traffic", "testdata/service-traffic.json", "-suggest", "-min-severity", "error"}
	start := time.Now()
	code, first, stderr := runCmd(t, args...)
	took := time.Since(start)
	require.Equal(t, exitOK, code, stderr)
	t.Logf("suggestions in %v", took)
	if !testutil.RaceEnabled {
		assert.Less(t, took, 10*time.Second)
	}
	golden(t, "suggest.golden", first)
	assert.Contains(t, first, "suggestions for inventory.GetStock")
	assert.Contains(t, first, "suggestions for pricing.GetPrice")

	// Same seed, same suggestions, to the last figure; another seed,
	// another replay. One key is enough to show both.
	seed2 := suggestInventory(t, "2")
	_, again, _ := runCmd(t, suggestInventoryArgs("2")...)
	assert.Equal(t, seed2, again, "same seed, same suggestions")
	lost := func(stdout string) []float64 {
		var l []float64
		for _, c := range parseSuggestions(t, stdout)[0].Best {
			l = append(l, c.Lost)
		}
		return l
	}
	assert.NotEqual(t, lost(suggestInventory(t, "1")), lost(seed2), "another seed, another replay")
}

// suggestInventoryArgs are the arguments of -suggest for the key
// inventory.GetStock alone, as JSON, with the top two candidates.
func suggestInventoryArgs(seed string) []string {
	return []string{"-policy", "testdata/service-policy.json", "-traffic", "testdata/service-traffic.json",
		"-suggest", "-key", "inventory.GetStock", "-top", "2", "-json", "-seed", seed}
}

// suggestInventory returns the output of the command with
// suggestInventoryArgs. Each seed's replays take seconds under the race
// detector, so the tests that read one seed's output share a single run.
func suggestInventory(t *testing.T, seed string) string {
	t.Helper()
	suggestMu.Lock()
	defer suggestMu.Unlock()
	if out, ok := suggestRuns[seed]; ok {
		return out
	}
	code, stdout, stderr := runCmd(t, suggestInventoryArgs(seed)...)
	require.Equal(t, exitOK, code, stderr)
	suggestRuns[seed] = stdout
	return stdout
}

var (
	suggestMu   sync.Mutex
	suggestRuns = map[string]string{}
)

func parseSuggestions(t *testing.T, stdout string) []keySuggestions {
	t.Helper()
	var out struct {
		Suggestions []keySuggestions `json:"suggestions"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	require.NotEmpty(t, out.Suggestions)
	return out.Suggestions
}

func TestSuggest_JSON(t *testing.T) {
	sug := parseSuggestions(t, suggestInventory(t, "1"))
	require.Len(t, sug, 1)
	s := sug[0]
	assert.Equal(t, "inventory.GetStock", s.Key)
	assert.Len(t, s.Best, 2, "-top 2")
	assert.Greater(t, s.Tried, 5)
	for _, c := range s.Best {
		assert.NoError(t, c.Policy.Validate())
		assert.True(t, c.Opens.InFault, "a suggestion opens during the fault")
	}
	assert.True(t, strings.HasPrefix(s.Fault, "40% errors + 20% timeouts for 20s"), s.Fault)
}

func TestGrid_AroundCurrent(t *testing.T) {
	p := breaker.DefaultPolicy()
	tr := check.Traffic{Rate: 2, P50: 5 * time.Millisecond, P99: 30 * time.Millisecond, RTT: time.Millisecond, Deadline: time.Second}
	cands := grid(p, tr)
	assert.Equal(t, p, cands[0])
	var changes []string
	for _, c := range cands[1:] {
		require.NoError(t, c.Validate())
		d := diff(p, c)
		require.NotEmpty(t, d)
		changes = append(changes, strings.Join(d, ", "))
	}
	assert.Contains(t, changes, "min_requests 20 → 10")
	assert.Contains(t, changes, "min_requests 20 → 5", "a key that can never trip gets a min_requests it can reach")
	assert.Contains(t, changes, "call_timeout 0s → 61ms")
	assert.Contains(t, changes, "open_for 30s → 1m0s")
	assert.Contains(t, changes, "window 5s → 2.5s")
}

// TestDocsShowRealOutput: the example output of the command's page in
// docs/ is the command's, as the golden file holds it.
func TestDocsShowRealOutput(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "service.golden"))
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	var shown []string
	for _, p := range append(pages, filepath.Join("..", "..", "README.md")) {
		doc, err := os.ReadFile(p)
		require.NoError(t, err)
		if strings.Contains(string(doc), "```\n"+string(want)+"```\n") {
			shown = append(shown, p)
		}
	}
	assert.NotEmpty(t, shown, "no page of docs/ shows the output of testdata/service.golden (the example of the breaker-check command)")
}

// Every numeric flag refuses NaN, infinities, negative numbers and
// numbers beyond its type or its range with exit 2 and a message that
// names it, before any work is done.
func TestNumericFlags_BadValuesAreRefused(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	traffic := testutil.WriteFile(t, "traffic.json", `{"keys": {"a": {"rate": 300, "p50": "10ms", "p99": "50ms", "deadline": "1s"}}}`)
	for flag, bad := range map[string][]string{
		"-fault-errors":    {"NaN", "Inf", "-Inf", "-0.1", "1.5", "1e400", "x"},
		"-fault-timeouts":  {"NaN", "Inf", "-Inf", "-0.1", "1.5", "1e400", "x"},
		"-max-false-trips": {"NaN", "Inf", "+Inf", "-Inf", "-1", "0", "1e400", "x"},
		"-top":             {"-1", "0", "99999999999999999999", "1.5", "x"},
		"-seed":            {"-1", "18446744073709551616", "1.5", "x"},
		"-fault-for":       {"-1s", "0s", "11m", "2562048h", "NaN", "x"},
	} {
		for _, v := range bad {
			t.Run(flag+"="+v, func(t *testing.T) {
				code, stdout, stderr := runCmd(t, "-policy", def, "-traffic", traffic, flag+"="+v)
				assert.Equal(t, exitUsage, code)
				assert.Empty(t, stdout, "nothing is checked")
				assert.Contains(t, testutil.FirstLine(stderr), flag)
			})
		}
	}
}

// -max-false-trips NaN was accepted, and no expected count is above NaN:
// a policy expected to trip falsely 768 times a day passed -fail-on
// warning.
func TestMaxFalseTripsNaNIsRefused(t *testing.T) {
	pol := testutil.WriteFile(t, "p.json", `{"default": {"error_ratio": 0.05}}`)
	traffic := testutil.WriteFile(t, "t.json", `{"keys": {"orders.Create": {"rate": 300, "p50": "10ms", "p99": "50ms", "error_ratio": 0.035, "deadline": "1s", "instances": 3}}}`)
	code, stdout, _ := runCmd(t, "-policy", pol, "-traffic", traffic, "-fail-on", "warning")
	assert.Equal(t, exitFindings, code)
	assert.Contains(t, stdout, "warning  false_trips")
	code, _, stderr := runCmd(t, "-policy", pol, "-traffic", traffic, "-fail-on", "warning", "-max-false-trips", "NaN")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "breaker-check: -max-false-trips must be a positive number, got NaN", testutil.FirstLine(stderr))
}

// A worker count too large for the replay's arithmetic was accepted and
// overflowed to a pool of 8; it is refused with its path.
func TestSuggest_HugeWorkerCountIsRefused(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	traffic := testutil.WriteFile(t, "t.json", `{"keys": {"a": {"rate": 40, "p50": "4ms", "p99": "25ms", "workers": 9223372036854775807}}}`)
	code, _, stderr := runCmd(t, "-policy", def, "-traffic", traffic, "-suggest")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `keys["a"].workers: must be in [0, 100000], got 9223372036854775807`)
}

// A key whose traffic or policy a replay cannot hold gets a message in
// the key's own terms, not in those of the scenario built for it.
func TestSuggest_UnreplayableKeyIsNamedInItsOwnTerms(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	slow := testutil.WriteFile(t, "slow.json", `{"keys": {"batch.Run": {"rate": 3, "p50": "20m", "p99": "40m", "deadline": "1h"}}}`)
	code, _, stderr := runCmd(t, "-policy", def, "-traffic", slow, "-suggest")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "breaker-check: -suggest batch.Run: the key's deadline (1h0m0s) is longer than a replayed call may take (10m0s)", testutil.FirstLine(stderr))

	long := testutil.WriteFile(t, "long.json", `{"default": {"window": "1h", "buckets": 10}}`)
	code, _, stderr = runCmd(t, "-policy", long, "-traffic", "testdata/service-traffic.json", "-suggest", "-key", "inventory.GetStock")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, testutil.FirstLine(stderr), "the policy's window (1h0m0s) and cooldowns need a replay of 2h")
}

// -suggest replays each key for seconds: past maxSuggestKeys it asks for
// -key rather than run for hours.
func TestSuggest_KeysAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"defaults": {"rate": 5}, "keys": {`)
	for i := range maxSuggestKeys + 1 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"k%d": {}`, i)
	}
	b.WriteString("}}")
	traffic := testutil.WriteFile(t, "many.json", b.String())
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	code, _, stderr := runCmd(t, "-policy", def, "-traffic", traffic, "-suggest")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, testutil.FirstLine(stderr), "101 keys are more than the 100 it takes at a time: name some with -key")
}

// A file given to the command is read only so far: a path to a device
// that never ends (or a runaway file) is refused, not read into memory.
func TestInputFiles_AreReadOnlySoFar(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	traffic := testutil.WriteFile(t, "traffic.json", `{"keys": {"a": {"rate": 1}}}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-policy", "/dev/zero", "-traffic", traffic}, "-policy /dev/zero: more than 1048576 bytes"},
		{[]string{"-policy", def, "-traffic", "/dev/zero"}, "-traffic /dev/zero: more than 67108864 bytes"},
		{[]string{"-snapshot", "/dev/zero"}, "-snapshot /dev/zero: more than 67108864 bytes"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, testutil.FirstLine(stderr), c.want)
	}
}

// -trace runs the real breaker over a recorded trace: the recorded fault
// is caught, with its time to trip, and the numbers are said to come from
// the trace.
func TestTrace_JudgesAPolicyAgainstRecordedCalls(t *testing.T) {
	var sb strings.Builder
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 40*120; i++ { // 40 calls/s for two minutes, every call failing in the second;
		// the window holds 200 healthy calls when the fault begins, so
		// half of it fails 2.5 s in
		at := time.Duration(i) * time.Second / 40
		o := breaker.Success
		if at >= time.Minute {
			o = breaker.Failure
		}
		sb.Write(calltrace.Record{Time: t0.Add(at), Key: "inventory.GetStock", Duration: time.Millisecond, Outcome: o}.AppendJSON(nil))
		sb.WriteByte('\n')
	}
	trace := testutil.WriteFile(t, "trace.jsonl", sb.String())
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	code, stdout, stderr := runFull(t, "-policy", def, "-trace", trace)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "numbers from the trace")
	assert.Contains(t, stdout, "false trips 0")
	assert.Contains(t, stdout, "faults 1 (seconds failing at error_ratio or more), caught 1; time to trip median 2.476s")

	code, _, stderr = runFull(t, "-trace", trace)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-trace needs -policy")
}

// traceOf writes a trace of n seconds of healthy calls to key at rate.
func traceOf(t *testing.T, key string, rate float64, n int) string {
	t.Helper()
	var sb strings.Builder
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < int(rate)*n; i++ {
		at := time.Duration(float64(i) / rate * float64(time.Second))
		sb.Write(calltrace.Record{Time: t0.Add(at), Key: key, Duration: time.Millisecond, Outcome: breaker.Success}.AppendJSON(nil))
		sb.WriteByte('\n')
	}
	return testutil.WriteFile(t, "trace.jsonl", sb.String())
}

// Scenario: -policy p -traffic t exited 1 (never_trips); adding -trace
// calls.jsonl exited 0, running the trace alone and dropping -traffic,
// -snapshot, -fail-on and -suggest without a word, so that a CI gate
// passed by adding a flag. With -traffic or -snapshot the checks run
// beside the trace and set the exit code; with a trace alone, a flag of
// the checks is refused, naming it.
func TestTrace_DoesNotDropTheChecks(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	quiet := testutil.WriteFile(t, "quiet.json", `{"keys": {"reports.Export": {"rate": 1, "deadline": "1s"}}}`)
	trace := traceOf(t, "reports.Export", 1, 60)

	code, stdout, stderr := runFull(t, "-policy", def, "-traffic", quiet, "-trace", trace)
	assert.Equal(t, exitFindings, code, stderr)
	assert.Contains(t, stdout, "error    never_trips", "the checks ran")
	assert.Contains(t, stdout, "ran the real breaker over "+trace, "and so did the trace")
	assert.Contains(t, stdout, "reports.Export  (60 calls over 59s, 0 failed, 0 refused when recorded)")

	code, stdout, stderr = runFull(t, "-policy", def, "-traffic", quiet, "-trace", trace, "-json")
	assert.Equal(t, exitFindings, code, stderr)
	var doc struct {
		Errors int `json:"errors"`
		Trace  struct {
			Source string           `json:"source"`
			Keys   []check.TraceKey `json:"keys"`
		} `json:"trace"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, 1, doc.Errors)
	assert.Equal(t, check.SourceTrace, doc.Trace.Source)
	require.Len(t, doc.Trace.Keys, 1)
	assert.Equal(t, 60, doc.Trace.Keys[0].Calls)

	// -fail-on with the checks: a warning fails the gate, trace or not.
	noJitter := testutil.WriteFile(t, "nojitter.json", `{"default": {"jitter": 0}}`)
	busy := testutil.WriteFile(t, "busy.json", `{"keys": {"reports.Export": {"rate": 300, "p50": "10ms", "p99": "50ms", "deadline": "1s", "instances": 3}}}`)
	code, _, stderr = runFull(t, "-policy", noJitter, "-traffic", busy, "-trace", trace, "-fail-on", "warning")
	assert.Equal(t, exitFindings, code, stderr)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-fail-on", "warning"}, "-trace alone runs no checks, so -fail-on would do nothing"},
		{[]string{"-suggest"}, "-trace alone runs no checks, so -suggest would do nothing"},
		{[]string{"-suggest", "-key", "reports.Export", "-fail-on", "warning"}, "so -fail-on, -key, -suggest would do nothing: add -traffic or -snapshot to run the checks and the trace together, or leave them out"},
	} {
		code, stdout, stderr := runFull(t, append([]string{"-policy", def, "-trace", trace}, c.args...)...)
		assert.Equal(t, exitUsage, code, c.args)
		assert.Empty(t, stdout)
		assert.Contains(t, testutil.FirstLine(stderr), c.want)
	}
}

// Scenario: 10,000 keys (the documented maximum) of bursty traffic, every
// value in range, ran for hours (about six of work). The check estimates
// its work before it simulates and refuses beyond its bound, exit 2 with
// the figure and the bound.
func TestMaximumWorkload_AnswersAtOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"defaults": {"rate": 10000000, "p50": "5ms", "p99": "50ms", "error_ratio": 0.3, "deadline": "1s",
		"bursts": {"per_day": 86400, "length": "500ms", "error_ratio": 0.9}}, "keys": {`)
	for i := range check.MaxKeys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"svc.Method%d": {}`, i)
	}
	b.WriteString("}}")
	traffic := testutil.WriteFile(t, "max.json", b.String())
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	code, stdout, stderr := runFull(t, "-policy", def, "-traffic", traffic)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, testutil.FirstLine(stderr), "breaker-check: check: the formulas would take about 5e+09 steps for these 10000 keys")
	assert.Contains(t, testutil.FirstLine(stderr), "more than the 2.4e+08 a check takes (about 2m0s): check fewer keys at a time")
}

// Scenario: for one key and fault, -suggest said "opened after 3.8s" (its
// replay's one draw of the fault) while the check said "opens in 17.1s
// (median; p90 46s)". The time to open of every candidate is now the
// check's figure for that policy, from the same model, with its source
// and interval: for the current policy, the check's own finding.
func TestSuggest_OpensIsTheChecksFigure(t *testing.T) {
	def := testutil.WriteFile(t, "p.json", `{"default": {"min_requests": 10}}`)
	quiet := testutil.WriteFile(t, "t.json", `{"keys": {"reports.Export": {"rate": 3, "p50": "5ms", "p99": "30ms", "deadline": "1s"}}}`)
	code, stdout, stderr := runCmd(t, "-policy", def, "-traffic", quiet, "-suggest", "-json")
	require.Equal(t, exitOK, code, stderr)
	var out struct {
		Findings    []check.Finding  `json:"findings"`
		Suggestions []keySuggestions `json:"suggestions"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	var fault check.Finding
	for _, f := range out.Findings {
		if f.Check == check.CheckFaultTimeToTrip {
			fault = f
		}
	}
	require.Equal(t, check.SourceSimulated, fault.Source, "a quiet key's time to trip is simulated")
	require.Len(t, out.Suggestions, 1)
	s := out.Suggestions[0]
	cur := s.Current.Opens
	assert.Equal(t, fault.Source, cur.Source)
	assert.Equal(t, fault.Numbers["time_to_trip_s"], cur.Median)
	assert.Equal(t, fault.Numbers["time_to_trip_p90_s"], cur.P90)
	assert.Equal(t, fault.Numbers["time_to_trip_low_s"], cur.Low)
	assert.Equal(t, fault.Numbers["time_to_trip_high_s"], cur.High)
	assert.Equal(t, fault.Message, cur.Message)

	opt := check.Options{Fault: check.DefaultFault, SimCalls: 20000, Seed: 1}
	tr := check.Traffic{Rate: 3, P50: 5 * time.Millisecond, P99: 30 * time.Millisecond, Deadline: time.Second}
	for _, c := range s.Best {
		f, err := check.FaultTimeToTrip("reports.Export", c.Policy, tr, opt)
		require.NoError(t, err)
		assert.Equal(t, f.Numbers["time_to_trip_s"], c.Opens.Median, c.Changes)
		assert.Equal(t, f.Source, c.Opens.Source, c.Changes)
	}
}

// Scenario: with fallback: true every candidate lost nothing, so all tied
// on goodput and false trips and the ranking said nothing: the current
// policy came first on fewest changes. Ties are now broken on what still
// differs: the calls sent into the fault that failed, then how long the
// breaker stayed open after it.
func TestSuggest_FallbackTiesAreBrokenByWhatDiffers(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-policy", "testdata/service-policy.json", "-traffic", "testdata/service-traffic.json",
		"-suggest", "-key", "pricing.GetPrice", "-json", "-top", "3")
	require.Equal(t, exitOK, code, stderr)
	s := parseSuggestions(t, stdout)[0]
	tie := ties{lost: s.Tie, falseTrips: 0.01 * check.DefaultMaxFalseTripsPerDay, openAfter: time.Second}
	for _, c := range append(s.Best, s.Current) {
		assert.InDelta(t, s.Current.Lost, c.Lost, s.Tie, "with a fallback, goodput ties")
	}
	best := s.Best[0]
	assert.NotEmpty(t, best.Changes, "the current policy is not first by default")
	assert.True(t, better(best, s.Current, tie))
	assert.Less(t, best.Wasted, s.Current.Wasted-s.Tie, "the first sends fewer calls into the fault")
	for i := 1; i < len(s.Best); i++ {
		assert.False(t, better(s.Best[i], s.Best[i-1], tie), "ranked in order")
	}
}

// Inputs that give the command nothing to judge, and flags that the
// chosen mode does not use, are refused, naming them: a CI gate must not
// pass on them. Regressions: a snapshot file holding null, a traffic
// description with no keys and an empty trace each exited 0 ("checked 0
// keys"), and -key, -top and -fault-for without -suggest were dropped
// without a word.
func TestBadInput_NothingToJudgeAndUnusedFlags(t *testing.T) {
	def := testutil.WriteFile(t, "default.json", `{"default": {}}`)
	traffic := testutil.WriteFile(t, "traffic.json", `{"keys": {"a": {"rate": 1}}}`)
	empty := testutil.WriteFile(t, "empty.jsonl", "")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"null snapshot", []string{"-policy", def, "-snapshot", testutil.WriteFile(t, "null.json", "null")}, "not a /breakers snapshot: null"},
		{"no keys", []string{"-policy", def, "-traffic", testutil.WriteFile(t, "none.json", `{"keys": {}}`)}, "no keys to check"},
		{"empty trace", []string{"-policy", def, "-trace", empty}, "holds no calls"},
		{"empty trace with checks", []string{"-policy", def, "-traffic", traffic, "-trace", empty}, "holds no calls"},
		{"key without suggest", []string{"-policy", def, "-traffic", traffic, "-key", "a"}, "-key"},
		{"top without suggest", []string{"-policy", def, "-traffic", traffic, "-top", "5"}, "-top"},
		{"fault-for without suggest", []string{"-policy", def, "-traffic", traffic, "-fault-for", "5s"}, "-fault-for"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, c.args...)
			assert.Equal(t, exitUsage, code, stderr)
			assert.Contains(t, stderr, c.want)
		})
	}
}
