package check

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordTrace writes a trace of one key: Poisson calls at rate for span,
// failing at 1% but for a fault of every call failing from faultAt for
// faultFor, and a refused call at the very start.
func recordTrace(t *testing.T, key string, rate float64, span, faultAt, faultFor time.Duration) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	buf.Write(calltrace.Record{Time: t0, Key: key, Refused: true}.AppendJSON(nil))
	buf.WriteByte('\n')
	for at := time.Duration(0); at < span; at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second)) {
		o := breaker.Success
		if at >= faultAt && at < faultAt+faultFor || rng.Float64() < 0.01 {
			o = breaker.Failure
		}
		buf.Write(calltrace.Record{Time: t0.Add(at), Key: key, Duration: 3 * time.Millisecond, Outcome: o}.AppendJSON(nil))
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// A recorded fault is caught, in the time the breaker takes at the
// key's rate, and the healthy hours around it give no false trip; the
// call the recorded breaker refused is counted as unknown.
func TestTrace_CountsTripsAndTimesToTripOfRecordedFaults(t *testing.T) {
	data := recordTrace(t, "inventory.GetStock", 20, 20*time.Minute, 10*time.Minute, time.Minute)
	keys, err := Trace(bytes.NewReader(data), breaker.GroupPolicy{})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	k := keys[0]
	assert.Equal(t, "inventory.GetStock", k.Key)
	assert.Equal(t, 1, k.Unknown)
	assert.Equal(t, 1, k.Faults)
	assert.Equal(t, 1, k.Caught)
	assert.Equal(t, 0, k.FalseTrips)
	require.Len(t, k.TimesToTrip, 1)
	// 20 calls/s fill min_requests 20 in about a second, and the window
	// holds 5 s of healthy calls: half of it must fail first.
	assert.Greater(t, k.TimesToTrip[0], 500*time.Millisecond)
	assert.Less(t, k.TimesToTrip[0], 5*time.Second)
	assert.GreaterOrEqual(t, k.Trips, 1)
}

// A line the decoder cannot read is an error naming the line.
func TestTrace_BadLineIsAnErrorNamingIt(t *testing.T) {
	_, err := Trace(strings.NewReader("{\"t\":1,\"k\":\"a\",\"d\":1,\"o\":\"success\"}\n{\"t\":2}\n"), breaker.GroupPolicy{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
}
