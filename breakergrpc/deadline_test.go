package breakergrpc

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// On a group on a mock clock, at 1970 (clock.NewMock) or far ahead, a
// call with Policy.CallTimeout reaches the server and succeeds: the deadline
// it carries is in real time, which grpc-go compares with the real clock,
// while its expiry still follows the mock.
// Regression (e2e5a13): the deadline was the mock's now plus 1s, an
// instant of 1970, and every call failed at once with DeadlineExceeded.
func TestUnary_MockClockCallCarriesARealTimeDeadline(t *testing.T) {
	srv := newServer(t)
	p := testutil.Policy()
	p.CallTimeout = time.Second
	for _, start := range []struct {
		name string
		at   time.Time
	}{
		{"mock at 1970", time.Time{}},
		{"mock in the future", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(start.name, func(t *testing.T) {
			clk := clock.NewMock()
			if !start.at.IsZero() {
				clk.Set(start.at)
			}
			c := newClientWith(t, srv.addr, p, clk)
			require.NoError(t, c.check("", 0))
			assert.Equal(t, success, testutil.OutcomesOf(c.breaker(checkMethod)))
		})
	}
}

// A call that hangs ends as a timeout when the mock passes Policy.CallTimeout,
// and not before: its expiry follows the breaker's clock.
func TestUnary_MockClockTimeoutEndsAHangingCall(t *testing.T) {
	srv := newServer(t)
	p := testutil.Policy()
	p.CallTimeout = time.Second
	c := newClientWith(t, srv.addr, p, clock.NewMock())
	for len(srv.arrived) > 0 {
		<-srv.arrived
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "hang"})
		errc <- err
	}()
	select {
	case s := <-srv.arrived:
		require.Equal(t, "hang", s)
	case err := <-errc:
		t.Fatalf("call ended before it reached the server: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("call never reached the server")
	}
	c.clk.Add(999 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("call ended before the mock reached Policy.CallTimeout: %v", err)
	default:
	}
	c.clk.Add(2 * time.Millisecond)
	err := <-errc
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Equal(t, timeout, testutil.OutcomesOf(c.breaker(checkMethod)))
}
