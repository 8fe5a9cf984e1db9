package check

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The work of a trace is bounded by its calls, not by its span.
// Scenario: two calls of one key thirty days apart (two lines, a few
// hundred bytes). Regression: the fault count kept a counter for every
// second of the span, 2.6 million here, and a trace of two calls in 1970
// and 2100 made breaker-check allocate for four billion seconds and never
// answer.
func TestTrace_TheWorkFollowsTheCallsNotTheSpan(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	for _, at := range []time.Time{t0, t0.Add(30 * 24 * time.Hour)} {
		buf.Write(calltrace.Record{Time: at, Key: "ledger.Post", Duration: time.Millisecond, Outcome: breaker.Failure}.AppendJSON(nil))
		buf.WriteByte('\n')
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keys, err := Trace(bytes.NewReader(buf.Bytes()), breaker.GroupPolicy{})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Equal(t, 30*24*time.Hour+time.Millisecond, keys[0].Span)
	assert.Zero(t, keys[0].Faults, "two lone failures are no fault")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated for two calls")
}

// Faults are runs of consecutive faulty seconds; a quiet second between
// two faulty ones ends the run, and a gap without calls too.
func TestTrace_FaultsAreRunsOfConsecutiveSeconds(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	add := func(sec int, n int, o breaker.Outcome) {
		for i := range n {
			at := t0.Add(time.Duration(sec)*time.Second + time.Duration(i)*time.Millisecond)
			buf.Write(calltrace.Record{Time: at, Key: "ledger.Post", Duration: time.Millisecond, Outcome: o}.AppendJSON(nil))
			buf.WriteByte('\n')
		}
	}
	add(0, 5, breaker.Failure)
	add(1, 5, breaker.Failure) // one fault: seconds 0–1
	add(2, 5, breaker.Success)
	add(3, 5, breaker.Failure)  // a second: second 3
	add(10, 5, breaker.Failure) // a third: second 10, after seconds without calls
	add(11, 2, breaker.Failure) // too few calls to count
	keys, err := Trace(bytes.NewReader(buf.Bytes()), breaker.GroupPolicy{})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Equal(t, 3, keys[0].Faults)
}
