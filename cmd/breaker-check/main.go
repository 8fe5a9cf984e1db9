// Command breaker-check judges a group's breaker policies against the
// traffic they will see, so that CI can stop a policy change that cannot
// work before it ships.
//
// Give it the group's policy document and a traffic description per key:
//
//	breaker-check -policy policies.json -traffic traffic.json
//
// or measure the traffic from a running service's /breakers snapshot
// (ops.Snapshot as JSON), with a traffic file for what a snapshot cannot
// tell (latency, the client's deadline, the network round trip):
//
//	breaker-check -policy policies.json -snapshot http://127.0.0.1:8080/breakers -traffic latency.json
//
// Without -policy, the policies the snapshot's breakers run are checked.
// -trace runs the real breaker under each key's policy over recorded
// calls; with -traffic or -snapshot it runs beside the checks, which set
// the exit code, and alone it takes none of the checks' flags.
// It prints one block per key with its findings (-json for a document)
// and exits 1 when a finding is at the -fail-on severity (error by
// default), 2 on bad flags or input.
//
// With -suggest it also replays the described traffic through a fault
// (by default 40% errors and 20% slow calls for 20 s) for a small grid of
// candidate policies around each key's current one, and prints the best
// few, ranked by goodput lost, false trips, the calls sent into the fault
// and the time open after it, each with its changes and the check's own
// time to trip for it.
//
// The checks and their formulas are in docs/checking-policies.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/check"
	"github.com/govkit/breaker/internal/readlimit"
	"github.com/govkit/breaker/ops"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // a finding at the -fail-on severity
	exitUsage    = 2 // bad flags or bad input
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("breaker-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		policyFile  = fs.String("policy", "", "the group policy document (`file`) to check")
		trafficFile = fs.String("traffic", "", "the traffic description (`file`): rate, latency, errors, deadline, RTT per key")
		snapshot    = fs.String("snapshot", "", "a /breakers snapshot, as a `file` or an http(s) URL, to measure rates and error ratios from")
		asJSON      = fs.Bool("json", false, "print the findings (and suggestions) as JSON")
		minSev      = fs.String("min-severity", "info", "print findings of this `severity` and above: info, warning or error")
		failOn      = fs.String("fail-on", "error", "exit 1 when a finding has this `severity` or above: error, warning or info")
		faultErr    = fs.Float64("fault-errors", check.DefaultFault.Errors, "share of calls that fail at once in the fault to judge")
		faultTO     = fs.Float64("fault-timeouts", check.DefaultFault.Timeouts, "share of calls that hang (and time out) in the fault to judge")
		maxFalse    = fs.Float64("max-false-trips", check.DefaultMaxFalseTripsPerDay, "expected false trips a day above which a key gets a warning")
		suggest     = fs.Bool("suggest", false, "replay candidate policies around each key's through the fault and print the best")
		keys        = fs.String("key", "", "comma-separated `keys` to suggest for; default every key")
		top         = fs.Int("top", 3, "how many candidates -suggest prints per key")
		seed        = fs.Uint64("seed", 1, "the replay's seed; the same seed gives the same suggestions")
		faultFor    = fs.Duration("fault-for", 20*time.Second, "how long the fault lasts in the -suggest replay")
		traceFile   = fs.String("trace", "", "a recorded trace (`file`, calltrace JSON lines): run the real breaker under each key's policy over it and count its trips")
		simCalls    = fs.Int("sim-calls", check.DefaultSimCalls, "the most calls one simulated estimate makes; -1 turns simulation off")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: breaker-check -policy file (-traffic file | -snapshot file-or-url) [-trace file] [flags]\n")
		fmt.Fprintf(stderr, "       breaker-check -policy file -trace file [-json]\n\n")
		fmt.Fprintf(stderr, "Checks a group's breaker policies against the traffic of each key.\n")
		fmt.Fprintf(stderr, "Exits 1 on a finding at the -fail-on severity, 2 on bad input.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "breaker-check: "+format+"\n", args...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (flags go before arguments; see -h)", fs.Arg(0))
	}
	var show, gate check.Severity
	if err := show.UnmarshalText([]byte(*minSev)); err != nil {
		return fail("-min-severity: want info, warning or error, got %q", *minSev)
	}
	if err := gate.UnmarshalText([]byte(*failOn)); err != nil {
		return fail("-fail-on: want info, warning or error, got %q", *failOn)
	}
	if *traceFile != "" && *trafficFile == "" && *snapshot == "" {
		if *policyFile == "" {
			return fail("-trace needs -policy, the policies to run over the trace")
		}
		// A trace alone makes no findings: a flag of the checks would be
		// dropped without a word, and a CI gate would pass by adding it.
		dropped := given(fs, checkOnly)
		if len(dropped) > 0 {
			return fail("-trace alone runs no checks, so %s would do nothing: add -traffic or -snapshot to run the checks and the trace together, or leave %s out",
				strings.Join(dropped, ", "), plural(len(dropped), "it", "them"))
		}
		gp, code := readPolicy(*policyFile, fail)
		if code != exitOK {
			return code
		}
		tr, err := traceKeys(*traceFile, gp)
		if err != nil {
			return fail("%v", err)
		}
		if *asJSON {
			if err := writeJSON(stdout, traceDoc{check.SourceTrace, tr.keys}); err != nil {
				return fail("%v", err)
			}
			return exitOK
		}
		if err := tr.writeText(stdout); err != nil {
			return fail("%v", err)
		}
		return exitOK
	}
	if *trafficFile == "" && *snapshot == "" {
		return fail("give -traffic, -snapshot, both, or -trace (see -h)")
	}
	if *policyFile == "" && *snapshot == "" {
		return fail("give -policy, or -snapshot to check the policies a service runs (see -h)")
	}
	if *top < 1 {
		return fail("-top must be at least 1, got %d", *top)
	}
	if !*suggest {
		unused := given(fs, suggestOnly)
		if len(unused) > 0 {
			return fail("%s %s only with -suggest: add -suggest, or leave %s out",
				strings.Join(unused, ", "), plural(len(unused), "applies", "apply"), plural(len(unused), "it", "them"))
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"-fault-errors", *faultErr}, {"-fault-timeouts", *faultTO}} {
		if !(f.v >= 0 && f.v <= 1) {
			return fail("%s must be a share of calls in [0, 1], got %v", f.name, f.v)
		}
	}
	if *faultErr+*faultTO > 1 {
		return fail("-fault-errors and -fault-timeouts must add up to at most 1, got %v + %v", *faultErr, *faultTO)
	}
	if !(*maxFalse > 0) || math.IsInf(*maxFalse, 1) {
		return fail("-max-false-trips must be a positive number, got %v", *maxFalse)
	}
	if *faultFor <= 0 || *faultFor > maxFaultFor {
		return fail("-fault-for must be in (0, %v], got %v", maxFaultFor, *faultFor)
	}

	var w check.Workload
	if *trafficFile != "" {
		data, err := readlimit.File("-traffic", *trafficFile, maxInput)
		if err != nil {
			return fail("%v", err)
		}
		if w, err = check.ParseWorkload(data); err != nil {
			return fail("%s: %v", *trafficFile, err)
		}
	}
	var gp breaker.GroupPolicy
	if *snapshot != "" {
		snap, err := readSnapshot(*snapshot)
		if err != nil {
			return fail("%v", err)
		}
		w = check.FromSnapshot(snap, w)
		gp = check.PoliciesFromSnapshot(snap)
	}
	if len(w.Keys) == 0 {
		return fail("no keys to check: %s", describeNone(*trafficFile, *snapshot))
	}
	if *policyFile != "" {
		var code int
		if gp, code = readPolicy(*policyFile, fail); code != exitOK {
			return code
		}
	}
	if *simCalls == 0 || *simCalls < -1 {
		return fail("-sim-calls must be positive, or -1 for no simulation, got %d", *simCalls)
	}
	opt := check.Options{Fault: check.Fault{Errors: *faultErr, Timeouts: *faultTO}, MaxFalseTripsPerDay: *maxFalse, SimCalls: *simCalls, Seed: *seed}
	if opt.Fault == (check.Fault{}) {
		return fail("-fault-errors and -fault-timeouts are both 0: there is no fault to judge")
	}
	if *suggest {
		// Refused before the check, which may simulate every key.
		n := len(w.Keys)
		if *keys != "" {
			n = len(strings.Split(*keys, ","))
		}
		if n > maxSuggestKeys {
			return fail("-suggest replays each key for seconds, and %d keys are more than the %d it takes at a time: name some with -key", n, maxSuggestKeys)
		}
	}
	// With the checks, a trace runs under the same policies, and its
	// section follows theirs; the exit code is the checks'.
	var tr *traceRun
	if *traceFile != "" {
		var err error
		if tr, err = traceKeys(*traceFile, gp); err != nil {
			return fail("%v", err)
		}
	}
	rep, err := check.Group(gp, w, opt)
	if err != nil {
		return fail("%v", err)
	}

	var sugg []keySuggestions
	if *suggest {
		cfg := suggestConfig{fault: opt.Fault, faultFor: *faultFor, seed: *seed, maxFalse: *maxFalse, top: *top, simCalls: *simCalls}
		want, err := pickKeys(rep, *keys)
		if err != nil {
			return fail("%v", err)
		}
		if len(want) > maxSuggestKeys {
			return fail("-suggest replays each key for seconds, and %d keys are more than the %d it takes at a time: name some with -key", len(want), maxSuggestKeys)
		}
		start := time.Now()
		for _, kr := range want {
			var current *check.Finding
			for i, f := range rep.Findings {
				if f.Key == kr.Key && f.Check == check.CheckFaultTimeToTrip {
					current = &rep.Findings[i]
				}
			}
			s, err := suggestFor(kr, current, cfg)
			if err != nil {
				return fail("-suggest %s: %v", ops.Printable(kr.Key), err)
			}
			sugg = append(sugg, s)
		}
		fmt.Fprintf(stderr, "breaker-check: suggestions for %d of %d keys replayed in %v wall time\n", len(want), len(rep.Keys), time.Since(start).Round(10*time.Millisecond))
	}

	shown := *rep
	shown.Findings = nil
	for _, f := range rep.Findings {
		if f.Severity >= show {
			shown.Findings = append(shown.Findings, f)
		}
	}
	if *asJSON {
		out := struct {
			*check.Report
			Errors      int              `json:"errors"`
			Warnings    int              `json:"warnings"`
			Suggestions []keySuggestions `json:"suggestions,omitempty"`
			Trace       *traceDoc        `json:"trace,omitempty"`
		}{&shown, rep.Count(check.Error), rep.Count(check.Warning), sugg, nil}
		if shown.Findings == nil {
			shown.Findings = []check.Finding{}
		}
		if tr != nil {
			out.Trace = &traceDoc{check.SourceTrace, tr.keys}
		}
		if err := writeJSON(stdout, out); err != nil {
			return fail("%v", err)
		}
	} else {
		if err := rep.WriteText(stdout, show); err != nil {
			return fail("%v", err)
		}
		for _, s := range sugg {
			if err := s.writeText(stdout); err != nil {
				return fail("%v", err)
			}
		}
		if tr != nil {
			fmt.Fprintln(stdout)
			if err := tr.writeText(stdout); err != nil {
				return fail("%v", err)
			}
		}
	}
	for _, f := range rep.Findings {
		if f.Severity >= gate {
			return exitFindings
		}
	}
	return exitOK
}

// maxTrace is the most the command reads of a trace.
const maxTrace = 4 << 30

// checkOnly are the flags that choose what the checks and suggestions
// judge, report or fail on: with -trace and neither -traffic nor
// -snapshot there are no checks for them to act on. -seed and -sim-calls
// only tune the models' numbers and are taken.
// suggestOnly are the flags that only -suggest reads.
var suggestOnly = map[string]bool{"key": true, "top": true, "fault-for": true}

// given returns the flags of names that were set on the command line, as
// "-name", in the order fs visits them.
func given(fs *flag.FlagSet, names map[string]bool) []string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if names[f.Name] {
			set = append(set, "-"+f.Name)
		}
	})
	return set
}

// describeNone says which inputs described no key.
func describeNone(traffic, snapshot string) string {
	switch {
	case traffic != "" && snapshot != "":
		return fmt.Sprintf("neither %s nor the snapshot %s describes any", traffic, snapshot)
	case snapshot != "":
		return fmt.Sprintf("the snapshot %s holds no breakers", snapshot)
	}
	return fmt.Sprintf("%s describes no keys", traffic)
}

var checkOnly = map[string]bool{
	"fail-on": true, "min-severity": true, "suggest": true, "key": true, "top": true,
	"fault-errors": true, "fault-timeouts": true, "fault-for": true, "max-false-trips": true,
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// readPolicy reads and parses the group policy document.
func readPolicy(path string, fail func(string, ...any) int) (breaker.GroupPolicy, int) {
	data, err := readlimit.File("-policy", path, breaker.MaxPolicyDocumentSize)
	if err != nil {
		return breaker.GroupPolicy{}, fail("%v", err)
	}
	gp, err := breaker.ParseGroupPolicy(data)
	if err != nil {
		return breaker.GroupPolicy{}, fail("%s: %v", path, err)
	}
	return gp, exitOK
}

// traceRun is the real breaker run over a recorded trace under each
// key's policy: no model.
type traceRun struct {
	file string
	keys []check.TraceKey
}

// traceDoc is a trace run as JSON.
type traceDoc struct {
	Source string           `json:"source"`
	Keys   []check.TraceKey `json:"keys"`
}

// traceKeys runs the policies of gp over the trace in file.
func traceKeys(file string, gp breaker.GroupPolicy) (*traceRun, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("-trace: %v", err)
	}
	defer f.Close()
	keys, err := check.Trace(io.LimitReader(f, maxTrace), gp)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("-trace: %s holds no calls", file)
	}
	return &traceRun{file, keys}, nil
}

func (tr *traceRun) writeText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "ran the real breaker over %s (numbers from the trace: no model; calls the recorded breaker refused are told to the policy as ignored)\n", tr.file)
	for _, k := range tr.keys {
		fmt.Fprintf(bw, "\n%s  (%d calls over %v, %d failed, %d refused when recorded)\n", ops.Printable(k.Key), k.Calls, k.Span.Round(time.Second), k.Failures, k.Unknown)
		fmt.Fprintf(bw, "  trips %d, false trips %d (%s a day)\n", k.Trips, k.FalseTrips, fmtNum(k.FalseTripsPerDay()))
		fmt.Fprintf(bw, "  faults %d (seconds failing at error_ratio or more), caught %d", k.Faults, k.Caught)
		if len(k.TimesToTrip) > 0 {
			ts := append([]time.Duration(nil), k.TimesToTrip...)
			sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
			fmt.Fprintf(bw, "; time to trip median %v, p90 %v, max %v", ts[(len(ts)-1)/2].Round(time.Millisecond),
				ts[min(len(ts)-1, int(math.Ceil(0.9*float64(len(ts))))-1)].Round(time.Millisecond), ts[len(ts)-1].Round(time.Millisecond))
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// maxInput is the most the command reads of a traffic document or a
// snapshot: far beyond a workload of check.MaxKeys keys, and a bound on
// what a path to a device or a runaway file costs.
const maxInput = 64 << 20

// readSnapshot reads an ops.GroupSnapshot from a file or an http(s) URL.
// Fields the checker does not know (a newer service's) are skipped.
func readSnapshot(src string) (ops.GroupSnapshot, error) {
	var data []byte
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return ops.GroupSnapshot{}, fmt.Errorf("-snapshot: %v", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ops.GroupSnapshot{}, fmt.Errorf("-snapshot: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return ops.GroupSnapshot{}, fmt.Errorf("-snapshot: %s answered %s", src, resp.Status)
		}
		if data, err = io.ReadAll(io.LimitReader(resp.Body, maxInput+1)); err != nil {
			return ops.GroupSnapshot{}, fmt.Errorf("-snapshot: %v", err)
		}
		if len(data) > maxInput {
			return ops.GroupSnapshot{}, fmt.Errorf("-snapshot: %s answered more than %d bytes, the most it reads", src, maxInput)
		}
	} else {
		var err error
		if data, err = readlimit.File("-snapshot", src, maxInput); err != nil {
			return ops.GroupSnapshot{}, err
		}
	}
	var snap ops.GroupSnapshot
	if string(bytes.TrimSpace(data)) == "null" {
		return ops.GroupSnapshot{}, fmt.Errorf("%s: not a /breakers snapshot: null", src)
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return ops.GroupSnapshot{}, fmt.Errorf("%s: not a /breakers snapshot: %v", src, err)
	}
	return snap, nil
}

// pickKeys returns the checked keys named in list (comma-separated), or
// every key if list is empty.
func pickKeys(rep *check.Report, list string) ([]check.KeyReport, error) {
	if list == "" {
		return rep.Keys, nil
	}
	var out []check.KeyReport
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		found := false
		for _, kr := range rep.Keys {
			if kr.Key == k || kr.Key == breaker.TargetKey(k, "*") {
				out = append(out, kr)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("-key: %q has no traffic described", k)
		}
	}
	return out, nil
}
