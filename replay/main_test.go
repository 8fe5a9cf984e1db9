package replay

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Run starts a goroutine per run; every one of them must be gone when it
// returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The shipped scenarios take a few seconds each under the race detector,
// so every test that looks at one shares a single run of it.
var (
	shippedMu      sync.Mutex
	shippedReports = map[string]*Report{}
)

func shippedReport(t testing.TB, name string) *Report {
	t.Helper()
	shippedMu.Lock()
	defer shippedMu.Unlock()
	if r, ok := shippedReports[name]; ok {
		return r
	}
	s, err := LoadScenario(name)
	require.NoError(t, err)
	r, err := Run(s)
	require.NoError(t, err)
	shippedReports[name] = r
	return r
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
