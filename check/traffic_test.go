package check

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestParseWorkload_KeysReadOntoDefaults(t *testing.T) {
	w, err := ParseWorkload([]byte(`{
	  "defaults": {"deadline": "1s", "rtt": "2ms", "instances": 12},
	  "keys": {
	    "inventory.GetStock": {"rate": 200, "p50": "8ms", "p99": "40ms", "error_ratio": 0.002},
	    "pricing.GetPrice": {"rate": 3, "rtt": "5ms", "targets": 4, "workers": 20, "fallback": true}
	  }
	}`))
	require.NoError(t, err)
	assert.Equal(t, Traffic{Deadline: time.Second, RTT: 2 * time.Millisecond, Instances: 12}, w.Defaults)
	assert.Equal(t, Traffic{Rate: 200, P50: 8 * time.Millisecond, P99: 40 * time.Millisecond, ErrorRatio: 0.002,
		Deadline: time.Second, RTT: 2 * time.Millisecond, Instances: 12}, w.Keys["inventory.GetStock"])
	assert.Equal(t, Traffic{Rate: 3, Deadline: time.Second, RTT: 5 * time.Millisecond, Instances: 12, Targets: 4,
		Workers: 20, Fallback: true}, w.Keys["pricing.GetPrice"])
}

// TestParseWorkload_StrictWithPaths: every problem of a traffic document is
// an error naming its path, and a bad document decodes to nothing.
func TestParseWorkload_StrictWithPaths(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{`[]`, []string{"(document): must be a JSON object"}},
		{`{"keys": {"a": {"rate": 1}}} x`, []string{"(document): unexpected data after the object"}},
		{`{"default": {}}`, []string{`"default": unknown field`}},
		{`{"keys": {"a": {"rat": 1}}}`, []string{`keys["a"].rat: unknown field`}},
		{`{"keys": {"a": {"rate": "fast"}}}`, []string{`keys["a"].rate: must be a number, got a JSON string`}},
		{`{"keys": {"a": {"p50": 40, "p99": "1s"}}}`, []string{`keys["a"].p50: must be a duration string`}},
		{`{"keys": {"a": {"p50": "40ms", "p99": "10ms"}}}`, []string{`keys["a"].p99: must be at least p50 (40ms), got 10ms`}},
		{`{"keys": {"a": {"p50": "40ms"}}}`, []string{`keys["a"].p99: p50 and p99 go together`}},
		{`{"keys": {"a": {"rate": -1, "error_ratio": 1}}}`, []string{`keys["a"].rate: must be in [0, 10000000]`, `keys["a"].error_ratio: must be in [0, 1), got 1`}},
		{`{"keys": {"a": {"rate": 1, "rate": 2}}}`, []string{`keys["a"]: "rate" is given twice`}},
		{`{"keys": {"a": {}, "a": {}}}`, []string{`keys: "a" is given twice`}},
		{`{"keys": {"": {}}}`, []string{`keys: empty key`}},
		{`{"defaults": {"deadline": "-1s"}}`, []string{`defaults.deadline: must be in [0, 24h0m0s], got -1s`}},
		{`{"keys": {"a": {"targets": 1.5}}}`, []string{`keys["a"].targets: must be a whole number`}},
	} {
		t.Run(c.doc, func(t *testing.T) {
			w, err := ParseWorkload([]byte(c.doc))
			require.Error(t, err)
			var te *TrafficError
			require.True(t, errors.As(err, &te), "%T", err)
			assert.Equal(t, Workload{}, w)
			for _, want := range c.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestTraffic_JSONRoundTrip(t *testing.T) {
	in := Traffic{Rate: 12.5, P50: 3 * time.Millisecond, P99: 20 * time.Millisecond, ErrorRatio: 0.01,
		Deadline: time.Second, RTT: time.Millisecond, Targets: 3, Instances: 4, Workers: 10, Fallback: true}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	var out Traffic
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, in, out)
}

// TestFromSnapshot_MeasuresRateAndErrors: a closed breaker's window gives
// the rate (over the window's mean length) and the error ratio; an open
// one's trip window gives the rate only; the rest comes from the base.
func TestFromSnapshot_MeasuresRateAndErrors(t *testing.T) {
	p := breaker.DefaultPolicy() // 5 s in 10 buckets: mean length 4.75 s
	snap := ops.GroupSnapshot{Breakers: []breaker.Status{
		{Name: "a", State: breaker.Closed, Window: breaker.Snapshot{Counted: 950, Failures: 19}, Policy: p},
		{Name: "b", State: breaker.Open, Window: breaker.Snapshot{Counted: 1}, Outage: &breaker.Outage{Trip: breaker.Trip{Window: breaker.Snapshot{Counted: 95, Failures: 60}}}, Policy: p},
	}}
	base := Workload{
		Defaults: Traffic{Deadline: time.Second},
		Keys: map[string]Traffic{
			"b": {Rate: 1, ErrorRatio: 0.01, P50: time.Millisecond, P99: 5 * time.Millisecond},
			"c": {Rate: 7},
		},
	}
	w := FromSnapshot(snap, base)
	assert.InDelta(t, 200, w.Keys["a"].Rate, 1e-9)
	assert.InDelta(t, 0.02, w.Keys["a"].ErrorRatio, 1e-9)
	assert.Equal(t, time.Second, w.Keys["a"].Deadline)
	assert.InDelta(t, 20, w.Keys["b"].Rate, 1e-9)
	assert.Equal(t, 0.01, w.Keys["b"].ErrorRatio)
	assert.Equal(t, 5*time.Millisecond, w.Keys["b"].P99)
	assert.Equal(t, 7.0, w.Keys["c"].Rate)
	require.NoError(t, w.Validate())

	gp := PoliciesFromSnapshot(snap)
	assert.Empty(t, gp.Overrides)
	snap.Breakers[1].Policy.MinRequests = 5
	gp = PoliciesFromSnapshot(snap)
	assert.Equal(t, 5, gp.Overrides["b"].MinRequests)
}

// TestFromSnapshot_ReadsServedJSON: the JSON a service serves decodes
// into ops.GroupSnapshot and measures the same.
func TestFromSnapshot_ReadsServedJSON(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	data, err := json.Marshal(ops.Snapshot(g, ops.Thresholds{}, nil))
	require.NoError(t, err)
	var snap ops.GroupSnapshot
	require.NoError(t, json.Unmarshal(data, &snap))
	assert.Empty(t, FromSnapshot(snap, Workload{}).Keys)
}

func TestGroup_RefusesBadInput(t *testing.T) {
	_, err := Group(breaker.GroupPolicy{Default: breaker.Policy{Window: -1}}, Workload{}, Options{})
	var pe *breaker.PolicyError
	assert.True(t, errors.As(err, &pe), "%v", err)

	_, err = Group(breaker.GroupPolicy{}, Workload{Keys: map[string]Traffic{"a": {Rate: math.NaN()}}}, Options{})
	assert.ErrorContains(t, err, `keys["a"].rate`)

	_, err = Group(breaker.GroupPolicy{}, Workload{}, Options{Fault: Fault{Errors: 0.8, Timeouts: 0.8}})
	assert.ErrorContains(t, err, "add up to at most 1")
}

// TestGroup_FindingsHoldOnAnyInput: on any valid policy and traffic, the
// checker returns without panicking, every number is finite, every
// finding names its key and check, and the false-trip rate and time to
// trip are in range.
func TestGroup_FindingsHoldOnAnyInput(t *testing.T) {
	if raceEnabled && !long {
		// An eighth of rapid's cases: each simulates the real breaker.
		// BREAKER_LONG=1 runs them all.
		checks := flag.Lookup("rapid.checks")
		if all := checks.Value.String(); all == "100" {
			defer checks.Value.Set(all)
			checks.Value.Set("12")
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		p := breaker.DefaultPolicy()
		p.Window = time.Duration(rapid.IntRange(1, 60).Draw(t, "window_s")) * time.Second
		p.Buckets = rapid.SampledFrom([]int{1, 2, 4, 5, 10, 20}).Draw(t, "buckets")
		p.MinRequests = rapid.IntRange(0, 500).Draw(t, "min_requests")
		p.ErrorRatio = rapid.Float64Range(0.01, 1).Draw(t, "error_ratio")
		p.ErrorCount = rapid.IntRange(0, 100).Draw(t, "error_count")
		p.ConsecutiveFailures = rapid.IntRange(0, 20).Draw(t, "consecutive")
		p.CallTimeout = time.Duration(rapid.IntRange(0, 5000).Draw(t, "timeout_ms")) * time.Millisecond
		if rapid.Bool().Draw(t, "slow") {
			p.SlowCall = time.Duration(rapid.IntRange(1, 5000).Draw(t, "slow_ms")) * time.Millisecond
			p.SlowRatio = rapid.Float64Range(0.01, 1).Draw(t, "slow_ratio")
		}
		p.Probes = rapid.IntRange(1, 100).Draw(t, "probes")
		p.StrictProbes = rapid.Bool().Draw(t, "strict")
		p.Jitter = rapid.SampledFrom([]float64{0, 0.2}).Draw(t, "jitter")
		p50 := time.Duration(rapid.IntRange(0, 2000).Draw(t, "p50_ms")) * time.Millisecond
		p99 := p50 * time.Duration(rapid.IntRange(1, 20).Draw(t, "p99_x"))
		tr := Traffic{
			Rate:       rapid.Float64Range(0, 1e5).Draw(t, "rate"),
			P50:        p50,
			P99:        p99,
			ErrorRatio: rapid.Float64Range(0, 0.99).Draw(t, "errors"),
			Deadline:   time.Duration(rapid.IntRange(0, 10000).Draw(t, "deadline_ms")) * time.Millisecond,
			RTT:        time.Duration(rapid.IntRange(0, 100).Draw(t, "rtt_ms")) * time.Millisecond,
			Targets:    rapid.IntRange(0, 50).Draw(t, "targets"),
			Instances:  rapid.IntRange(0, 50).Draw(t, "instances"),
		}
		if p.Validate() != nil || tr.Validate() != nil {
			t.Skip("invalid draw")
		}
		r, err := Group(breaker.GroupPolicy{Default: p}, Workload{Keys: map[string]Traffic{"k": tr}}, Options{SimCalls: 2_000})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range r.Findings {
			if f.Key == "" || f.Check == "" || f.Message == "" || strings.Contains(f.Message, "%!") {
				t.Fatalf("bad finding %+v", f)
			}
			for name, v := range f.Numbers {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: %s = %v", f.Check, name, v)
				}
			}
			// Numbers carry six significant digits.
			if v, ok := f.Numbers["false_trips_per_day"]; ok && (v < 0 || v > 86400*tr.Rate*(1+1e-5)) {
				t.Fatalf("false trips a day %v at %v calls/s", v, tr.Rate)
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFalseTripsPerDay_NeverExceedsTheFailures: the false-trip model adds
// the rates of the trip rules, and on a key where nearly every call fails
// (99% errors, error_ratio 1, slow_ratio 1 at 1 ms, consecutive_failures
// 1, 0.5 calls/s) the sum said 51,060 trips a day: more than the 43,200
// calls the key makes. A trip is decided on a failure or a slow call, so
// there are never more trips than those.
func TestFalseTripsPerDay_NeverExceedsTheFailures(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.Window, p.Buckets, p.MinRequests, p.ErrorRatio = time.Second, 1, 0, 1
	p.ConsecutiveFailures = 1
	p.SlowCall, p.SlowRatio = time.Millisecond, 1
	tr := Traffic{Rate: 0.5, P50: time.Millisecond, P99: 2 * time.Millisecond, ErrorRatio: 0.99}
	require.NoError(t, p.Validate())
	assert.LessOrEqual(t, FalseTripsPerDay(p, tr), 86400*tr.Rate)
}

// TestParseWorkload_KeysThatAreNotAnObjectAreAnError: a traffic document whose "keys" was not
// an object ({"keys": 5}), or was null (which a Workload without keys
// encodes to), made ParseWorkload dereference a nil list and panic; the
// fuzz target found the second. Now "keys": 5 is an error at its path,
// and null means no keys, like a missing "keys" (and "defaults": null,
// no defaults).
func TestParseWorkload_KeysThatAreNotAnObjectAreAnError(t *testing.T) {
	_, err := ParseWorkload([]byte(`{"keys": 5}`))
	assert.ErrorContains(t, err, "keys: must be a JSON object")
	_, err = ParseWorkload([]byte(`{"defaults": [1], "keys": {}}`))
	assert.ErrorContains(t, err, "defaults: must be a JSON object")

	w, err := ParseWorkload([]byte(`{"defaults": null, "keys": null}`))
	require.NoError(t, err)
	assert.Equal(t, Workload{}, w)

	data, err := json.Marshal(Workload{})
	require.NoError(t, err)
	_, err = ParseWorkload(data)
	assert.NoError(t, err, "%s", data)
}

// Every number of a traffic document is refused, naming its path, when it
// is negative, beyond its bound or too large for its type. A worker count
// of 2^63-1 was accepted, and a -suggest replay sized the caller's pool
// from it: the product overflowed and the pool fell to 8 workers.
func TestParseWorkload_EveryNumberIsBounded(t *testing.T) {
	const huge, over = "9223372036854775807", "1e400"
	for _, c := range []struct {
		field string
		bad   []string
	}{
		{"rate", []string{"-1", "10000001", over, `"NaN"`, `"Inf"`}},
		{"error_ratio", []string{"-0.1", "1", over, `"NaN"`}},
		{"p50", []string{`"-1ms"`, `"25h"`, `"2562047h"`, `"NaNs"`}},
		{"p99", []string{`"-1ms"`, `"25h"`, `"2562047h"`}},
		{"deadline", []string{`"-1s"`, `"25h"`, `"2562047h"`}},
		{"rtt", []string{`"-1ms"`, `"25h"`, `"2562047h"`}},
		{"targets", []string{"-1", "100001", huge, over, "1.5"}},
		{"instances", []string{"-1", "1000001", huge, over, "1.5"}},
		{"workers", []string{"-1", "100001", huge, over, "1.5"}},
	} {
		for _, v := range c.bad {
			t.Run(c.field+"="+v, func(t *testing.T) {
				traffic := `"` + c.field + `": ` + v
				switch c.field { // the other of the pair given, so that it is complete
				case "p50":
					traffic = `"p99": "2ms", ` + traffic
				case "p99":
					traffic = `"p50": "1ms", ` + traffic
				}
				for _, doc := range []string{
					`{"keys": {"a": {` + traffic + `}}}`,
					`{"defaults": {` + traffic + `}}`,
				} {
					_, err := ParseWorkload([]byte(doc))
					require.Error(t, err, doc)
					path := `keys["a"].` + c.field
					if strings.HasPrefix(doc, `{"defaults"`) {
						path = "defaults." + c.field
					}
					assert.Contains(t, err.Error(), path+": ", doc)
				}
			})
		}
	}
}

// A Traffic built in Go is held to the same bounds, NaN and infinities
// included.
func TestTraffic_ValidateRefusesBadNumbers(t *testing.T) {
	const long = time.Duration(math.MaxInt64)
	for _, c := range []struct {
		field string
		edit  func(t *Traffic)
	}{
		{"rate", func(t *Traffic) { t.Rate = math.NaN() }},
		{"rate", func(t *Traffic) { t.Rate = math.Inf(1) }},
		{"rate", func(t *Traffic) { t.Rate = math.Inf(-1) }},
		{"error_ratio", func(t *Traffic) { t.ErrorRatio = math.NaN() }},
		{"error_ratio", func(t *Traffic) { t.ErrorRatio = math.Inf(-1) }},
		{"p50", func(t *Traffic) { t.P50 = math.MinInt64 }},
		{"p99", func(t *Traffic) { t.P99 = long }},
		{"deadline", func(t *Traffic) { t.Deadline = long }},
		{"rtt", func(t *Traffic) { t.RTT = math.MinInt64 }},
		{"targets", func(t *Traffic) { t.Targets = math.MaxInt }},
		{"instances", func(t *Traffic) { t.Instances = math.MaxInt }},
		{"instances", func(t *Traffic) { t.Instances = math.MinInt }},
		{"workers", func(t *Traffic) { t.Workers = math.MaxInt }},
	} {
		tr := Traffic{Rate: 10, P50: time.Millisecond, P99: 5 * time.Millisecond}
		require.NoError(t, tr.Validate())
		c.edit(&tr)
		err := tr.Validate()
		require.Error(t, err, c.field)
		assert.Contains(t, err.Error(), "invalid traffic: "+c.field+": ")
	}
}

// A workload's keys are bounded: each is judged on its own, so a
// description of keys without bound took time and memory without bound.
func TestWorkload_KeysAreBounded(t *testing.T) {
	w := Workload{Keys: make(map[string]Traffic, MaxKeys+1)}
	for i := range MaxKeys {
		w.Keys[fmt.Sprintf("k%d", i)] = Traffic{Rate: 1}
	}
	require.NoError(t, w.Validate())
	w.Keys["one more"] = Traffic{Rate: 1}
	assert.ErrorContains(t, w.Validate(), fmt.Sprintf("keys: at most %d keys, got %d", MaxKeys, MaxKeys+1))
}

// The checker's options are refused when they are not numbers it can
// judge by: a MaxFalseTripsPerDay of NaN let every key pass, since no
// count is above NaN.
func TestGroup_RefusesBadOptions(t *testing.T) {
	w := Workload{Keys: map[string]Traffic{"a": {Rate: 300, P50: 10 * time.Millisecond, P99: 50 * time.Millisecond, Deadline: time.Second}}}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		_, err := Group(breaker.GroupPolicy{}, w, Options{MaxFalseTripsPerDay: v})
		assert.ErrorContains(t, err, "MaxFalseTripsPerDay", "%v", v)
	}
	for _, f := range []Fault{{Errors: math.NaN()}, {Timeouts: math.Inf(1)}, {Errors: -0.1, Timeouts: 0.5}} {
		_, err := Group(breaker.GroupPolicy{}, w, Options{Fault: f})
		assert.ErrorContains(t, err, "fault", "%+v", f)
	}
	rep, err := Group(breaker.GroupPolicy{}, w, Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxFalseTripsPerDay, rep.MaxFalseTripsPerDay, "0 is the default")
}
