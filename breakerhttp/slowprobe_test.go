package breakerhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
)

// docs/behaviour.md §4 Half-open, through the transport: a downstream the
// slow-call rule tripped answers its probe 200 OK, in 400 ms against a
// SlowCall of 200 ms; the probe fails and the breaker stays open. Once it
// answers in 100 ms, the probes pass and it closes. The handler moves the
// breaker's mock clock by the latency it plays, so no test time passes.
// Regression: the slow probes passed, the breaker closed, and the rule
// tripped it again 0.4 s later.
func TestTransport_ASlowProbeFailsABreakerTheSlowRuleOpened(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.SlowCall, p.SlowRatio, p.MinRequests, p.Jitter = 200*time.Millisecond, 0.5, 10, 0
	var latency atomic.Int64
	latency.Store(int64(400 * time.Millisecond))
	var f *fixture
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.clk.Add(time.Duration(latency.Load()))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	f = newFixture(t, p)
	b, err := f.group.Get(srv.Listener.Addr().String())
	require.NoError(t, err)

	for range 10 {
		status, err := f.get(context.Background(), srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
	}
	require.Equal(t, breaker.Open, b.State())
	require.Equal(t, breaker.ReasonSlowRatio, b.Status().Outage.Trip.Reason)

	f.clk.Add(p.OpenFor)
	status, err := f.get(context.Background(), srv.URL) // the probe: 200 OK, too slow
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, breaker.Open, b.State(), "a slow probe fails the episode")
	assert.Equal(t, breaker.ReasonProbeFailed, b.Status().Reason)

	latency.Store(int64(100 * time.Millisecond))
	f.clk.Add(b.Status().Cooldown)
	for range p.Probes {
		_, err := f.get(context.Background(), srv.URL)
		require.NoError(t, err)
	}
	assert.Equal(t, breaker.Closed, b.State(), "fast probes pass")
}
