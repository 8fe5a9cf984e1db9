package main

import (
	"path/filepath"
	"testing"

	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
)

// Bad input exits 2 with a message naming it, before any work. Scenario:
// a trace that holds no call, and a chart path whose directory does not
// exist. Regressions: the empty trace exited 0 ("replayed 0 calls"), and
// the chart's path was found bad only after the whole simulation, with
// exit 1.
func TestBadInput_AnEmptyTraceAndAnUnwritableChart(t *testing.T) {
	empty := testutil.WriteFile(t, "empty.jsonl", "")
	code, _, stderr := runCmd(t, "-trace", empty, "-svg", "")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "holds no calls")

	bad := filepath.Join(t.TempDir(), "missing", "replay.svg")
	code, stdout, stderr := runCmd(t, "-seeds", "1", "-svg", bad)
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "-svg")
	assert.Contains(t, stderr, "missing")
	assert.Empty(t, stdout, "nothing simulated")
}
