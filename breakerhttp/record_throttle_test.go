package breakerhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/internal/testutil/tracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request the breaker's throttle refused (the breaker closed) is
// recorded as throttled, told from an open breaker's refusal: the replay
// reads the two apart. Both were recorded as refused alone.
func TestTransport_RecordsThrottledRefusalsAsThrottled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	p := breaker.DefaultPolicy()
	p.ErrorRatio = 0 // the ratio rule off: nothing opens the breaker
	p.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 5}
	clk := testutil.NewClock()
	// Every draw refuses while the throttle's probability is above 0.
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}},
		breaker.WithClock(clk), breaker.WithRand(func() float64 { return 0 }))
	require.NoError(t, err)
	trace := tracetest.New(t)
	tr := New(&http.Transport{}, g, WithRecorder(trace.Rec))
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	throttled := 0
	for i := 0; i < 1000 && throttled == 0; i++ {
		resp, err := client.Get(srv.URL)
		if err != nil {
			require.True(t, calltrace.IsThrottled(err), "%v", err)
			throttled++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	require.Positive(t, throttled, "the throttle refused a request")

	got := trace.Records()
	last := got[len(got)-1]
	assert.True(t, last.Refused, "the last request was refused")
	assert.True(t, last.Throttled, "by the throttle")
	for _, r := range got[:len(got)-1] {
		assert.False(t, r.Refused, "the requests before it reached the server")
	}
}
