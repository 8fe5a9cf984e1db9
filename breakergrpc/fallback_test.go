package breakergrpc

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

var cached = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}

// checkOrCache calls Check for service and serves cached through
// breaker.FallbackResultOnFailure; it returns the error the fallback got, if it
// was called.
func (c *client) checkOrCache(ctx context.Context, service string) (*healthpb.HealthCheckResponse, error, error) {
	var got error
	resp, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	resp, err = breaker.FallbackResultOnFailure(ctx, resp, err, func(_ context.Context, err error) (*healthpb.HealthCheckResponse, error) {
		got = err
		return cached, nil
	})
	return resp, err, got
}

func TestFallbackResultOnFailure_ServesTheCacheOnInternal(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	resp, err, got := c.checkOrCache(context.Background(), "code:"+strconv.Itoa(int(codes.Internal)))
	require.NoError(t, err)
	assert.Same(t, cached, resp)
	assert.Equal(t, codes.Internal, status.Code(got), "the fallback gets the call's status: %v", got)
	b := c.breaker(checkMethod)
	assert.Equal(t, failure, testutil.OutcomesOf(b))
	assert.Equal(t, uint64(1), b.Counters().Fallbacks)
}

func TestFallbackResultOnFailure_ServesTheCacheOnNoAnswer(t *testing.T) {
	c := newClient(t, testutil.RefusedAddr(t), testutil.Policy())
	resp, err, got := c.checkOrCache(context.Background(), "")
	require.NoError(t, err)
	assert.Same(t, cached, resp)
	assert.Equal(t, codes.Unavailable, status.Code(got))
	b := c.breaker(checkMethod)
	assert.Equal(t, timeout, testutil.OutcomesOf(b))
	assert.Equal(t, uint64(1), b.Counters().Fallbacks)
}

func TestFallbackResultOnFailure_ServesTheCacheOnARefusal(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(checkMethod)
	require.NoError(t, b.SetMode(breaker.ModeForcedOpen))
	resp, err, got := c.checkOrCache(context.Background(), "")
	require.NoError(t, err)
	assert.Same(t, cached, resp)
	assert.ErrorIs(t, got, breaker.ErrOpen)
	assert.Equal(t, testutil.Outcomes{Rejected: 1}, testutil.OutcomesOf(b))
	assert.Equal(t, uint64(1), b.Counters().Fallbacks)
	assert.Zero(t, srv.hits.Load())
}

func TestFallbackResultOnFailure_NoneForAnIgnoredNotFound(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	_, err, got := c.checkOrCache(context.Background(), "code:"+strconv.Itoa(int(codes.NotFound)))
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.NoError(t, got, "fallback called")
	b := c.breaker(checkMethod)
	assert.Equal(t, ignored, testutil.OutcomesOf(b))
	assert.Zero(t, b.Counters().Fallbacks)
}

func TestFallbackResultOnFailure_NoneForTheCallersCancellation(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	for len(srv.arrived) > 0 {
		<-srv.arrived
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.arrived
		cancel()
	}()
	_, err, got := c.checkOrCache(ctx, "hang")
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.NoError(t, got, "fallback called")
	b := c.breaker(checkMethod)
	assert.Equal(t, ignored, testutil.OutcomesOf(b))
	assert.Zero(t, b.Counters().Fallbacks)
}

// The interceptor's errors read as the call's own: its status, message and
// chain, for a status error and for any other error.
func TestUnary_ErrorsKeepTheCallsStatus(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	plain := errors.New("plain")
	for _, callErr := range []error{status.Error(codes.Internal, "boom"), plain, errors.Join(plain, status.Error(codes.DataLoss, "lost"))} {
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return callErr }
		got := UnaryClientInterceptor(g)(context.Background(), checkMethod, nil, nil, nil, invoker)
		assert.ErrorIs(t, got, callErr)
		assert.Equal(t, callErr.Error(), got.Error())
		ws, wok := status.FromError(callErr)
		gs, gok := status.FromError(got)
		assert.Equal(t, wok, gok, "%v", callErr)
		assert.Equal(t, ws.Code(), gs.Code(), "%v", callErr)
		assert.Equal(t, ws.Message(), gs.Message(), "%v", callErr)
		assert.Equal(t, status.Code(callErr), status.Code(got))
	}
}

// A stream's error carries its outcome too: Internal before any message
// is served from the fallback; InvalidArgument is not, nor is Internal
// after a message, which made the stream a success.
func TestFallbackResultOnFailure_Streams(t *testing.T) {
	srv := newServer(t)
	for _, row := range []struct {
		service  string
		code     codes.Code
		fallback bool
	}{{"first:13", codes.Internal, true}, {"first:3", codes.InvalidArgument, false}, {"code:13", codes.Internal, false}} {
		c := newClient(t, srv.addr, testutil.Policy())
		b := c.breaker(watchMethod)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := c.watch(ctx, row.service)
		require.NoError(t, err)
		for err == nil {
			_, err = s.Recv()
		}
		assert.Equal(t, row.code, status.Code(err), row.service)
		resp, err := breaker.FallbackResultOnFailure(ctx, nil, err, func(context.Context, error) (*healthpb.HealthCheckResponse, error) {
			return cached, nil
		})
		if row.fallback {
			assert.NoError(t, err, row.service)
			assert.Same(t, cached, resp)
			assert.Equal(t, uint64(1), b.Counters().Fallbacks, row.service)
		} else {
			assert.Equal(t, row.code, status.Code(err), row.service)
			assert.Zero(t, b.Counters().Fallbacks, row.service)
		}
		cancel()
	}
}

// Two interceptors on one connection, an outer and an inner breaker: the
// inner one's refusal reaches the outer one as the invoker's error, a
// codes.Unavailable status. It used to count there as a timeout, so an
// inner breaker that opened tripped the outer one, which then refused
// calls the inner one does not guard. It is ignored now, and
// FallbackResultOnFailure counts the fallback on the inner breaker, the one that
// refused.
func TestFallbackResultOnFailure_AnInnerInterceptorsRefusalIsIgnored(t *testing.T) {
	srv := newServer(t)
	outerGroup, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	innerGroup, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	conn, err := grpc.NewClient(srv.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(outerGroup), UnaryClientInterceptor(innerGroup)),
	)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, group: outerGroup, conn: conn, hc: healthpb.NewHealthClient(conn)}
	outer := c.breaker(checkMethod)
	inner, err := innerGroup.Get(checkMethod)
	require.NoError(t, err)
	require.NoError(t, inner.SetMode(breaker.ModeForcedOpen))

	for i := 0; i < 10; i++ {
		err := c.check("", 0)
		require.ErrorIs(t, err, breaker.ErrOpen)
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	assert.Equal(t, breaker.Closed, outer.State())
	assert.Equal(t, testutil.Outcomes{Ignored: 10}, testutil.OutcomesOf(outer))
	assert.Equal(t, testutil.Outcomes{Rejected: 10}, testutil.OutcomesOf(inner))

	resp, err, got := c.checkOrCache(context.Background(), "")
	require.NoError(t, err)
	assert.Same(t, cached, resp)
	assert.ErrorIs(t, got, breaker.ErrOpen)
	assert.Equal(t, uint64(1), inner.Counters().Fallbacks)
	assert.Zero(t, outer.Counters().Fallbacks)
	assert.Zero(t, srv.hits.Load())
}
