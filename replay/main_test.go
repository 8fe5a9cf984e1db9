package replay

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Run starts a goroutine per run; every one of them must be gone when it
// returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// long says whether to run the long variants of the tests: the shipped
// scenarios for their whole length, the calibration on the shipped
// scenario's own timing. scripts/stress.sh sets it.
var long = os.Getenv("BREAKER_LONG") != ""

// testLengths cut the shipped scenarios for the suite, to the end of
// what their tests look at: the last fault and the breakers' closing
// after it, and a few seconds more. The draws up to the cut are those of
// the whole run, so every figure before it is the shipped scenario's.
// BREAKER_LONG=1 runs them whole.
var testLengths = map[string]time.Duration{
	"seeds000":        180 * time.Second, // the breaker closes at 1:39; the chart zooms in when the action is under 40% of the run
	"slow-only":       100 * time.Second, // the fault ends at 1:00
	"cold-start":      200 * time.Second, // the candidate closes for good at about 2:40
	"flapping":        205 * time.Second, // seven bad phases, the last ending at 3:10
	"no-call-timeout": 110 * time.Second, // the gateway's breaker closes at 1:40
}

// testEdits shorten the shipped scenarios whose length is not in the
// cut: the suite runs drift with steps of 30 s rather than a minute, the
// same ten steps up (the adaptive timeout is recomputed once a step
// rather than twice), its hang at 6:00 and cut at 6:40, after the hang
// and the breakers' first reopening. BREAKER_LONG=1 runs it as shipped.
var testEdits = map[string]func(*Scenario){
	"drift": func(s *Scenario) {
		hang := len(s.Faults) - 1
		for i := range s.Faults[:hang] {
			s.Faults[i].Start = time.Minute + time.Duration(i)*30*time.Second
			s.Faults[i].Duration = 30 * time.Second
		}
		s.Faults[hang].Start = 6 * time.Minute
		s.Duration = 6*time.Minute + 40*time.Second
	},
}

// The shipped scenarios take seconds each under the race detector, so
// every test that looks at one shares a single run of it; tests that
// look at different ones run in parallel.
var (
	shippedMu      sync.Mutex
	shippedReports = map[string]*shippedRun{}
)

type shippedRun struct {
	once sync.Once
	rep  *Report
	err  error
}

func shippedReport(t testing.TB, name string) *Report {
	t.Helper()
	shippedMu.Lock()
	r, ok := shippedReports[name]
	if !ok {
		r = &shippedRun{}
		shippedReports[name] = r
	}
	shippedMu.Unlock()
	r.once.Do(func() {
		s, err := LoadScenario(name)
		if err != nil {
			r.err = err
			return
		}
		if d, ok := testLengths[name]; ok && !long {
			s.Duration = d
		}
		if edit, ok := testEdits[name]; ok && !long {
			edit(s)
		}
		r.rep, r.err = Run(s)
	})
	require.NoError(t, r.err)
	return r.rep
}

// call returns the result of the call named name in run.
func call(t testing.TB, run *RunResult, name string) *CallResult {
	t.Helper()
	for i := range run.Calls {
		if run.Calls[i].Name == name {
			return &run.Calls[i]
		}
	}
	t.Fatalf("run %s has no call %s", run.Label, name)
	return nil
}
