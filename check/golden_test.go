package check

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/govkit/breaker"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from the checker's output")

// goldenCases are the documents in testdata/, each made to raise the
// checks listed with it (and whatever else it raises, which the golden
// file holds).
var goldenCases = []struct {
	name string
	want []string
}{
	{"never_trips", []string{CheckNeverTrips}},
	{"trips_on_bursts", []string{CheckTripsOnBursts, CheckFaultTimeToTrip}},
	{"never_trips_consecutive", []string{CheckNeverTrips, CheckTimeToTrip}},
	{"no_traffic", []string{CheckNeverTrips}},
	{"per_target_never_trips", []string{CheckPerTargetNeverTrips}},
	{"false_trips", []string{CheckFalseTrips}},
	{"healthy", []string{CheckFalseTrips, CheckTimeToTrip, CheckFaultTimeToTrip, CheckProbePass}},
	{"fault_never_trips", []string{CheckFaultTimeToTrip}},
	{"error_count_never", []string{CheckTimeToTrip}},
	{"timeout_below_p99", []string{CheckTimeoutBelowP99}},
	{"timeout_above_deadline", []string{CheckTimeoutDeadline}},
	{"timeout_below_rtt", []string{CheckTimeoutBelowRTT}},
	{"adaptive_timeout", []string{CheckTimeoutBelowP99, CheckTimeoutDeadline}},
	{"no_timeout", []string{CheckNoTimeout}},
	{"probe_share", []string{CheckProbeShare}},
	{"probe_pass", []string{CheckProbePass}},
	{"no_backoff", []string{CheckNoBackoff}},
	{"backoff_cap", []string{CheckBackoffCap}},
	{"no_jitter", []string{CheckNoJitter}},
	{"unchecked_override", []string{CheckUnchecked}},
	{"throttle_inert", []string{CheckThrottleInert}},
	{"throttle_floor", []string{CheckThrottleFloor}},
	{"throttle_refuses_healthy", []string{CheckThrottleHealthy}},
}

// goldenInput is a case document: a group policy document and a traffic
// document.
type goldenInput struct {
	Policy  json.RawMessage `json:"policy"`
	Traffic json.RawMessage `json:"traffic"`
}

func runGolden(t *testing.T, name string) (*Report, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var in goldenInput
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	gp, err := breaker.ParseGroupPolicy(in.Policy)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParseWorkload(in.Traffic)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Group(gp, w, Options{SimCalls: goldenSimCalls})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out, Info); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	js, err := json.MarshalIndent(r.Findings, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out.Write(js)
	out.WriteString("\n")
	return r, out.Bytes()
}

// TestGolden_EveryFinding runs every case of testdata/ and compares the
// text and JSON output with its golden file (go test -update rewrites
// them). Each case must raise the checks it was written for.
func TestGolden_EveryFinding(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, got := runGolden(t, c.name)
			for _, check := range c.want {
				if !hasCheck(r, check) {
					t.Errorf("no %s finding; got:\n%s", check, got)
				}
			}
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (go test -update rewrites it after review)\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// TestGolden_CoverEveryCheck makes sure no check lacks a golden case.
func TestGolden_CoverEveryCheck(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range goldenCases {
		for _, check := range c.want {
			covered[check] = true
		}
	}
	for _, check := range []string{
		CheckNeverTrips, CheckTripsOnBursts, CheckPerTargetNeverTrips, CheckFalseTrips, CheckTimeToTrip, CheckFaultTimeToTrip,
		CheckTimeoutBelowP99, CheckTimeoutDeadline, CheckTimeoutBelowRTT, CheckNoTimeout,
		CheckProbeShare, CheckProbePass, CheckNoBackoff, CheckBackoffCap, CheckNoJitter, CheckUnchecked,
	} {
		if !covered[check] {
			t.Errorf("no golden case raises %s", check)
		}
	}
}

func hasCheck(r *Report, check string) bool {
	for _, f := range r.Findings {
		if f.Check == check {
			return true
		}
	}
	return false
}

// The latency model's quantiles give back the figures it was fitted to,
// which the adaptive timeout's settled value is read from.
func TestLatency_QuantileGivesBackP50AndP99(t *testing.T) {
	l := fitLatency(Traffic{P50: 30 * time.Millisecond, P99: 90 * time.Millisecond})
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 30 * time.Millisecond}, {0.99, 90 * time.Millisecond}} {
		got := l.quantile(c.q)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (latency{}).quantile(0.99); got != 0 {
		t.Errorf("no latency given: quantile = %v, want 0", got)
	}
}

// goldenSimCalls keeps the golden cases' simulations short: their
// figures are pinned for this budget and the default seed.
const goldenSimCalls = 10_000
