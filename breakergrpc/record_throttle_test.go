package breakergrpc

import (
	"errors"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/internal/testutil/tracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A call the breaker's throttle refused (the breaker closed) is recorded
// as throttled, told from an open breaker's refusal: the replay reads the
// two apart. Both were recorded as refused alone.
func TestUnary_RecordsThrottledRefusalsAsThrottled(t *testing.T) {
	srv := newServer(t)
	p := breaker.DefaultPolicy()
	p.ErrorRatio = 0 // the ratio rule off: nothing opens the breaker
	p.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 5}
	// Every draw refuses while the throttle's probability is above 0.
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}},
		breaker.WithClock(testutil.NewClock()), breaker.WithRand(func() float64 { return 0 }))
	require.NoError(t, err)
	trace := tracetest.New(t)
	conn, err := grpc.NewClient(srv.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(g, WithRecorder(trace.Rec))))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, group: g, conn: conn, hc: healthpb.NewHealthClient(conn)}

	refused := false
	for i := 0; i < 1000 && !refused; i++ {
		refused = errors.Is(c.check("code:14", 0), breaker.ErrOpen) // Unavailable: a failure until refused
	}
	require.True(t, refused, "the throttle refused a call")

	got := trace.Records()
	last := got[len(got)-1]
	assert.True(t, last.Refused, "the last call was refused")
	assert.True(t, last.Throttled, "by the throttle")
	for _, r := range got[:len(got)-1] {
		assert.False(t, r.Refused, "the calls before it reached the server")
	}
}
