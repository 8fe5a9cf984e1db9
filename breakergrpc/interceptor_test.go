package breakergrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The outcome of every status code, as a real server sends it.
var codeRows = []struct {
	code codes.Code
	want testutil.Outcomes
}{
	{codes.OK, success},
	{codes.Canceled, failure}, // sent by the server: the caller did not cancel
	{codes.Unknown, failure},
	{codes.InvalidArgument, ignored},
	{codes.DeadlineExceeded, timeout},
	{codes.NotFound, ignored},
	{codes.AlreadyExists, ignored},
	{codes.PermissionDenied, ignored},
	{codes.ResourceExhausted, failure},
	{codes.FailedPrecondition, ignored},
	{codes.Aborted, ignored},
	{codes.OutOfRange, ignored},
	{codes.Unimplemented, failure},
	{codes.Internal, failure},
	{codes.Unavailable, timeout},
	{codes.DataLoss, failure},
	{codes.Unauthenticated, ignored},
}

// One unary call per code, against a real server on a TCP port, each on a
// fresh breaker: the row's outcome is the only one counted, the error
// reaches the caller unchanged, and nothing trips.
func TestUnary_ClassifiesEveryCode(t *testing.T) {
	srv := newServer(t)
	for _, row := range codeRows {
		t.Run(row.code.String(), func(t *testing.T) {
			c := newClient(t, srv.addr, testutil.Policy())
			err := c.check("code:"+strconv.Itoa(int(row.code)), 0)
			assert.Equal(t, row.code, status.Code(err))
			b := c.breaker(checkMethod)
			assert.Equal(t, row.want, testutil.OutcomesOf(b))
			assert.Equal(t, breaker.Closed, b.State())
		})
	}
}

// The faults that are not a status the server chose: the caller's
// deadline, the caller's cancellation, Policy.CallTimeout, a refused port and a
// connection the peer resets.
func TestUnary_ClassifiesFaults(t *testing.T) {
	srv := newServer(t)

	t.Run("caller deadline", func(t *testing.T) {
		c := newClient(t, srv.addr, testutil.Policy())
		err := c.check("hang", 30*time.Millisecond)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.Equal(t, timeout, testutil.OutcomesOf(c.breaker(checkMethod)))
	})
	t.Run("caller cancels", func(t *testing.T) {
		c := newClient(t, srv.addr, testutil.Policy())
		for len(srv.arrived) > 0 {
			<-srv.arrived
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-srv.arrived
			cancel()
		}()
		_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
		assert.Equal(t, codes.Canceled, status.Code(err))
		assert.Equal(t, ignored, testutil.OutcomesOf(c.breaker(checkMethod)))
	})
	t.Run("Policy.CallTimeout", func(t *testing.T) {
		p := testutil.Policy()
		p.CallTimeout = 30 * time.Millisecond
		c := newClientWith(t, srv.addr, p, nil)
		err := c.check("hang", 0)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.Equal(t, timeout, testutil.OutcomesOf(c.breaker(checkMethod)))
	})
	t.Run("refused", func(t *testing.T) {
		c := newClient(t, testutil.RefusedAddr(t), testutil.Policy())
		err := c.check("", 0)
		assert.Equal(t, codes.Unavailable, status.Code(err))
		assert.Equal(t, timeout, testutil.OutcomesOf(c.breaker(checkMethod)))
	})
	t.Run("reset", func(t *testing.T) {
		addr := resettingListener(t)
		c := newClient(t, addr, testutil.Policy())
		err := c.check("", 0)
		assert.Equal(t, codes.Unavailable, status.Code(err))
		assert.Equal(t, timeout, testutil.OutcomesOf(c.breaker(checkMethod)))
	})
}

// resettingListener accepts TCP connections on loopback and resets each at
// once, before any HTTP/2 byte.
func resettingListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// A failing method trips its breaker; calls are then refused with
// Unavailable, matching breaker.ErrOpen, carrying the reason and a
// RetryInfo, without reaching the server; after the cooldown, probes that
// carry breaker_probe: 1 find the server healthy and close it. Ordinary
// calls never carry the key, even when the caller set it.
func TestUnary_OpensRefusesProbesAndCloses(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(checkMethod)

	for i := 0; i < 4; i++ {
		require.Equal(t, codes.Internal, status.Code(c.check("code:13", 0)))
	}
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, testutil.Outcomes{Failures: 4}, testutil.OutcomesOf(b))

	hits := srv.hits.Load()
	err := c.check("", 0)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorIs(t, err, breaker.ErrOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, checkMethod, oe.Name)
	st := status.Convert(err)
	assert.Equal(t, "breaker /grpc.health.v1.Health/Check open: error_ratio, retry in 10s", st.Message())
	require.Len(t, st.Details(), 1)
	ri, ok := st.Details()[0].(*errdetails.RetryInfo)
	require.True(t, ok, "detail is %T", st.Details()[0])
	assert.Equal(t, 10*time.Second, ri.RetryDelay.AsDuration())
	assert.Equal(t, hits, srv.hits.Load(), "a refused call reached the server")
	assert.Equal(t, uint64(1), b.Counters().Rejected)

	c.clk.Add(10 * time.Second)
	// The first probe is answered with an error that is not a timeout: an
	// answer, so it passes.
	require.Equal(t, codes.Internal, status.Code(c.check("code:13", 0)))
	assert.Equal(t, breaker.HalfOpen, b.State())
	require.NoError(t, c.check("", 0))
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, uint64(2), b.Counters().ProbesPassed)

	forwarded := metadata.AppendToOutgoingContext(context.Background(), ProbeKey, "1", "x-other", "kept")
	_, err = c.hc.Check(forwarded, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	assert.Equal(t, []string{"", "", "", "", "1", "1", ""}, srv.probeValues())
}

// The probe key is stripped from ordinary calls and set once on probes
// whatever the casing of the caller's key: a metadata.MD is a plain map
// that code may fill by hand ("Breaker_Probe"), and AppendToOutgoingContext
// keeps its keys as given until grpc-go lowercases them on the wire, where
// the server would read either as breaker_probe.
func TestUnary_ProbeKeyStrippedUnderAnyCase(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(checkMethod)

	byHand := func(k, v string) context.Context {
		return metadata.NewOutgoingContext(context.Background(), metadata.MD{k: {v}, "x-other": {"kept"}})
	}
	appended := func(k, v string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), k, v)
	}
	call := func(ctx context.Context, service string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return err
	}
	require.NoError(t, call(byHand("Breaker_Probe", "1"), ""))
	require.NoError(t, call(appended("BREAKER_PROBE", "1"), ""))
	require.NoError(t, call(metadata.AppendToOutgoingContext(byHand("breaker_probe", "1"), "Breaker_Probe", "1"), ""))
	for i := 0; i < 3; i++ { // 3 of 6 failed: trips at MinRequests 4, ratio 0.5
		require.Equal(t, codes.Internal, status.Code(call(context.Background(), "code:13")))
	}
	require.Equal(t, breaker.Open, b.State())
	c.clk.Add(10 * time.Second)
	require.NoError(t, call(byHand("Breaker_Probe", "0"), ""))
	require.NoError(t, call(appended("BREAKER_PROBE", "0"), ""))
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, []string{"", "", "", "", "", "", "1", "1"}, srv.probeValues())
}

// The probe key describes the call of the breaker that guards it. A call
// that no breaker guards (WithKey returns "") used to forward a caller's
// breaker_probe: 1, copied from an upstream's metadata by a proxy, while
// guarded calls had it stripped; unary calls and streams now strip it too,
// and keep the rest of the metadata.
func TestProbeKeyStrippedFromUnguardedCalls(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy(), WithKey(func(context.Context, string, *grpc.ClientConn) string { return "" }))
	forwarded := metadata.AppendToOutgoingContext(context.Background(), ProbeKey, "1", "x-other", "kept")
	ctx, cancel := context.WithTimeout(forwarded, 5*time.Second)
	defer cancel()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	s, err := c.watch(ctx, "send:1")
	require.NoError(t, err)
	_, err = drain(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"", ""}, srv.probeValues())
	assert.Equal(t, []string{"kept", "kept"}, srv.values("x-other"))
	assert.Zero(t, c.group.Len())
}

// A call guarded by a closed breaker, made inside another breaker's
// half-open probe (a breaker around a function that makes the gRPC call),
// used to be tagged breaker_probe: 1 because its context carried the
// outer probe's mark. The server sees no key on such calls, unary or
// stream, and sees it on the outer breaker's probe only when that breaker
// guards the call itself.
func TestProbeKeyNotSetInsideAnotherBreakersProbe(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	require.NoError(t, testutil.InsideAProbe(t, c.clk, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return err
		}
		s, err := c.watch(ctx, "send:1")
		if err != nil {
			return err
		}
		_, err = drain(s)
		return err
	}))
	assert.Equal(t, []string{"", ""}, srv.probeValues())
	assert.Equal(t, success, testutil.OutcomesOf(c.breaker(checkMethod)))
	assert.Equal(t, success, testutil.OutcomesOf(c.breaker(watchMethod)))
}

// A probe that ends in Unavailable fails the half-open episode: the
// breaker reopens with a doubled cooldown.
func TestUnary_UnavailableProbeReopens(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(checkMethod)
	for i := 0; i < 4; i++ {
		_ = c.check("code:14", 0)
	}
	require.Equal(t, breaker.Open, b.State())
	c.clk.Add(10 * time.Second)

	err := c.check("code:14", 0)
	require.NotErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, uint64(1), b.Counters().ProbesFailed)

	err = c.check("", 0)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, breaker.ReasonProbeFailed, oe.Reason)
	assert.Equal(t, "breaker /grpc.health.v1.Health/Check open: probe_failed, retry in 20s", status.Convert(err).Message())
	assert.Equal(t, []string{"", "", "", "", "1"}, srv.probeValues())
}

// WithTarget keys breakers by method and target; WithKey can leave calls
// unguarded.
func TestUnary_Keys(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy(), WithTarget())
	require.NoError(t, c.check("", 0))
	var keys []string
	c.group.Range(func(k string, _ *breaker.Breaker) bool {
		keys = append(keys, k)
		return true
	})
	assert.Equal(t, []string{checkMethod + "@" + srv.addr}, keys)

	c = newClient(t, srv.addr, testutil.Policy(), WithKey(func(context.Context, string, *grpc.ClientConn) string { return "" }))
	require.NoError(t, c.check("", 0))
	assert.Zero(t, c.group.Len())
}

// A replaced classifier decides every code; the caller's cancellation is
// still ignored.
func TestUnary_WithClassifier(t *testing.T) {
	srv := newServer(t)
	notFoundIsFailure := func(err error) breaker.Outcome {
		if status.Code(err) == codes.NotFound {
			return breaker.Failure
		}
		return DefaultClassify(err)
	}
	c := newClient(t, srv.addr, testutil.Policy(), WithClassifier(notFoundIsFailure))
	_ = c.check("code:5", 0)
	assert.Equal(t, failure, testutil.OutcomesOf(c.breaker(checkMethod)))

	for len(srv.arrived) > 0 {
		<-srv.arrived
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.arrived
		cancel()
	}()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
	require.Error(t, err)
	assert.Equal(t, testutil.Outcomes{Failures: 1, Ignored: 1}, testutil.OutcomesOf(c.breaker(checkMethod)))
}

// A caller whose context is already done gets Canceled, as from gRPC, and
// nothing is counted or sent.
func TestUnary_DoneContext(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.Equal(t, testutil.Outcomes{}, testutil.OutcomesOf(c.breaker(checkMethod)))
	assert.Zero(t, srv.hits.Load())
}

// An invoker that panics ends the call as a failure, and the panic goes on.
func TestUnary_InvokerPanics(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	icpt := UnaryClientInterceptor(g)
	panicky := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		panic("invoker bug")
	}
	assert.PanicsWithValue(t, "invoker bug", func() {
		_ = icpt(context.Background(), checkMethod, nil, nil, nil, panicky)
	})
	b, err := g.Get(checkMethod)
	require.NoError(t, err)
	assert.Equal(t, failure, testutil.OutcomesOf(b))

	err = UnaryClientInterceptor(nil)(context.Background(), checkMethod, nil, nil, nil, panicky)
	assert.Equal(t, codes.Internal, status.Code(err))
}

// watch opens a Watch stream with service and returns it.
func (c *client) watch(ctx context.Context, service string) (healthpb.Health_WatchClient, error) {
	return c.hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
}

// drain reads a stream to its end and returns the messages read and the
// final error (nil for io.EOF).
func drain(s healthpb.Health_WatchClient) (int, error) {
	n := 0
	for {
		_, err := s.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// A stream is one call, counted once: at its first message, a success,
// whatever comes after it; or, if it ends before one, with the outcome of
// how it ended.
func TestStream_OutcomeAtTheFirstMessageOrTheEnd(t *testing.T) {
	srv := newServer(t)
	rows := []struct {
		name    string
		service string
		msgs    int
		code    codes.Code
		want    testutil.Outcomes
	}{
		{"to the end", "send:3", 3, codes.OK, success},
		{"empty", "send:0", 0, codes.OK, success},
		{"Internal after a message", "code:13", 1, codes.Internal, success},
		{"ResourceExhausted after a message", "code:8", 1, codes.ResourceExhausted, success},
		{"Unavailable before any message", "first:14", 0, codes.Unavailable, timeout},
		{"DeadlineExceeded from the server", "first:4", 0, codes.DeadlineExceeded, timeout},
		{"Internal before any message", "first:13", 0, codes.Internal, failure},
		{"InvalidArgument", "first:3", 0, codes.InvalidArgument, ignored},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			c := newClient(t, srv.addr, testutil.Policy())
			b := c.breaker(watchMethod)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := c.watch(ctx, row.service)
			require.NoError(t, err)
			assert.Equal(t, testutil.Outcomes{}, testutil.OutcomesOf(b), "counted before a message or the end")
			n, err := drain(s)
			assert.Equal(t, row.msgs, n)
			assert.Equal(t, row.code, status.Code(err))
			assert.Equal(t, row.want, testutil.OutcomesOf(b))
			cancel()
			assert.Equal(t, row.want, testutil.OutcomesOf(b), "counted again on cancel")
		})
	}
}

// A stream that has sent a message is counted then, while it lives on.
func TestStream_CountedAtItsFirstMessage(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(watchMethod)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.watch(ctx, "hold:2")
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err)
	assert.Equal(t, success, testutil.OutcomesOf(b), "after the first message")
	_, err = s.Recv()
	require.NoError(t, err)
	cancel()
	_, err = s.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.Equal(t, success, testutil.OutcomesOf(b), "the end is not counted again")
	assert.Equal(t, uint64(1), b.Counters().Admitted)
}

// A stream the caller stops reading before its first message ends when
// its context does: a caller's cancellation is ignored, a deadline is a
// timeout, even with no further Recv.
func TestStream_EndsWithItsContext(t *testing.T) {
	srv := newServer(t)
	for _, row := range []struct {
		name     string
		deadline bool
		want     testutil.Outcomes
	}{
		{"cancelled", false, ignored},
		{"deadline", true, timeout},
	} {
		t.Run(row.name, func(t *testing.T) {
			c := newClient(t, srv.addr, testutil.Policy())
			b := c.breaker(watchMethod)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if row.deadline {
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			_, err := c.watch(ctx, "hang")
			require.NoError(t, err)
			if !row.deadline {
				cancel()
			}
			require.Eventually(t, func() bool { return testutil.OutcomesOf(b) == row.want },
				5*time.Second, time.Millisecond, "counts %+v", testutil.OutcomesOf(b))
		})
	}
}

// TestStream_WatchProbePassesAtItsFirstMessage: a half-open breaker
// guarding a server-streaming method admits two watch streams as probes,
// and the server sends each 25 healthy messages and keeps it open. The
// interceptor used to report a stream only at its end, so the probes held
// their slots, and one cooldown later the breaker reopened with
// probe_timeout and refused new watchers: a watch method's breaker never
// closed while its streams lived long. Each probe now passes at its first
// message; the breaker closes and stays closed, and the streams go on.
func TestStream_WatchProbePassesAtItsFirstMessage(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(watchMethod)
	for i := 0; i < 4; i++ {
		s, err := c.watch(context.Background(), "first:14")
		require.NoError(t, err)
		_, err = drain(s)
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	require.Equal(t, breaker.Open, b.State())
	c.clk.Add(10 * time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watches []healthpb.Health_WatchClient
	for i := 0; i < 2; i++ {
		s, err := c.watch(ctx, "hold:25")
		require.NoError(t, err)
		for n := 0; n < 25; n++ {
			_, err := s.Recv()
			require.NoError(t, err, "message %d", n)
		}
		watches = append(watches, s)
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, uint64(2), b.Counters().ProbesPassed)

	c.clk.Add(time.Minute) // past any probe timeout
	assert.Equal(t, breaker.Closed, b.State())
	s, err := c.watch(ctx, "hold:1")
	require.NoError(t, err, "a new watcher is admitted")
	_, err = s.Recv()
	require.NoError(t, err)
	for _, w := range watches {
		srv.tick <- struct{}{}
		_, err := w.Recv()
		require.NoError(t, err, "a probe's stream lives on")
	}
	assert.Equal(t, []string{"", "", "", "", "1", "1", ""}, srv.probeValues())
	cancel()
	for _, w := range append(watches, s) {
		_, err := w.Recv()
		assert.Equal(t, codes.Canceled, status.Code(err))
	}
	assert.Equal(t, testutil.Outcomes{Successes: 3, Timeouts: 4}, testutil.OutcomesOf(b))
	assert.Equal(t, uint64(0), b.Counters().ProbesFailed)
}

// TestStream_BreakerDeadlineBoundsTheFirstMessageOnly: with Policy.CallTimeout
// and Policy.SlowCall set, a watch stream ran on the context that held the
// breaker's deadline, so it was cut at Policy.CallTimeout however healthy it
// was, and the server was sent that deadline. The deadline now bounds only
// the wait for the first message: a watch that answered in time is a
// success, neither slow nor a timeout, and lives on past the deadline; the
// server sees no deadline but the caller's.
func TestStream_BreakerDeadlineBoundsTheFirstMessageOnly(t *testing.T) {
	srv := newServer(t)
	p := testutil.Policy()
	p.CallTimeout = time.Second
	p.SlowCall, p.SlowRatio = 500*time.Millisecond, 0.5
	c := newClient(t, srv.addr, p)
	b := c.breaker(watchMethod)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.watch(ctx, "hold:1")
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err)

	c.clk.Add(time.Hour)
	require.NoError(t, s.Context().Err(), "the stream was cut at the breaker's deadline")
	srv.tick <- struct{}{}
	_, err = s.Recv()
	require.NoError(t, err, "the stream was cut at the breaker's deadline")
	cancel()
	_, err = s.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.Equal(t, success, testutil.OutcomesOf(b))
	assert.Zero(t, b.Counters().Slow)

	// The caller's deadline still reaches the server.
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s, err = c.watch(dl, "send:1")
	require.NoError(t, err)
	_, err = drain(s)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true}, srv.hadDeadlines())
}

// A stream with no message within the breaker's deadline is cut then: it
// ends with DeadlineExceeded, counted as a timeout, and a probe that does
// so fails. Its context reads as past a deadline, as the call's own did.
func TestStream_NoFirstMessageWithinTheBreakerDeadline(t *testing.T) {
	srv := newServer(t)
	p := testutil.Policy()
	p.CallTimeout = time.Second
	c := newClient(t, srv.addr, p)
	b := c.breaker(watchMethod)
	open := func() healthpb.Health_WatchClient {
		t.Helper()
		for len(srv.arrived) > 0 {
			<-srv.arrived
		}
		s, err := c.watch(context.Background(), "hang")
		require.NoError(t, err)
		require.Equal(t, "hang", <-srv.arrived)
		return s
	}
	s := open()
	c.clk.Add(999 * time.Millisecond)
	assert.Equal(t, testutil.Outcomes{}, testutil.OutcomesOf(b))
	c.clk.Add(2 * time.Millisecond)
	_, err := s.Recv()
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.ErrorIs(t, s.Context().Err(), context.DeadlineExceeded)
	assert.Equal(t, timeout, testutil.OutcomesOf(b))

	for i := 0; i < 3; i++ {
		s := open()
		c.clk.Add(1001 * time.Millisecond)
		_, err := s.Recv()
		require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	}
	require.Equal(t, breaker.Open, b.State())
	c.clk.Add(10 * time.Second)
	s = open()
	c.clk.Add(2 * time.Second)
	_, err = s.Recv()
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, uint64(1), b.Counters().ProbesFailed)
	assert.Equal(t, []bool{false, false, false, false, false}, srv.hadDeadlines())
}

// A bidirectional stream is judged by the server's first message too: a
// half-open breaker's probe passes at the first answer and the stream goes
// on; before that, sending proves nothing.
func TestStream_BidiProbePassesAtTheFirstServerMessage(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	tc := testpb.NewTestServiceClient(c.conn)
	b := c.breaker(duplexMethod)
	for i := 0; i < 4; i++ {
		_ = b.Do(context.Background(), func(context.Context) error { return errors.New("down") })
	}
	require.Equal(t, breaker.Open, b.State())
	c.clk.Add(10 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var streams []testpb.TestService_FullDuplexCallClient
	for i := 0; i < 2; i++ {
		s, err := tc.FullDuplexCall(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Send(&testpb.StreamingOutputCallRequest{}))
		streams = append(streams, s)
	}
	assert.Equal(t, breaker.HalfOpen, b.State(), "a probe passed on what it sent")
	for _, s := range streams {
		_, err := s.Recv()
		require.NoError(t, err)
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, uint64(2), b.Counters().ProbesPassed)
	for _, s := range streams {
		require.NoError(t, s.Send(&testpb.StreamingOutputCallRequest{}))
		_, err := s.Recv()
		require.NoError(t, err, "the stream goes on")
		require.NoError(t, s.CloseSend())
		_, err = s.Recv()
		require.Equal(t, io.EOF, err)
	}
	assert.Equal(t, uint64(2), b.Counters().Successes)
}

// A client-streaming call has one message from the server, at its end:
// what the client sends proves nothing, and the answer decides.
func TestStream_ClientStreamingCountsAtItsAnswer(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	tc := testpb.NewTestServiceClient(c.conn)
	b := c.breaker(uploadMethod)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := tc.StreamingInputCall(ctx)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: []byte("abcd")}}))
	}
	assert.Equal(t, testutil.Outcomes{}, testutil.OutcomesOf(b))
	resp, err := s.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, int32(12), resp.AggregatedPayloadSize)
	assert.Equal(t, success, testutil.OutcomesOf(b))
}

// An open breaker refuses a stream before it opens; probes carry the
// metadata; a stream that passes as a probe closes the breaker.
func TestStream_OpenAndProbes(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(watchMethod)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		s, err := c.watch(ctx, "first:14")
		require.NoError(t, err)
		_, err = drain(s)
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	require.Equal(t, breaker.Open, b.State())

	hits := srv.hits.Load()
	s, err := c.watch(ctx, "send:1")
	assert.Nil(t, s)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, hits, srv.hits.Load())

	c.clk.Add(10 * time.Second)
	for i := 0; i < 2; i++ {
		s, err := c.watch(ctx, "send:2")
		require.NoError(t, err)
		n, err := drain(s)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	}
	assert.Equal(t, breaker.Closed, b.State())
	s, err = c.watch(ctx, "send:1")
	require.NoError(t, err)
	_, err = drain(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"", "", "", "", "1", "1", ""}, srv.probeValues())
}

// A stream whose server sends one message (here the unary Check, opened as
// a stream) ends with the RecvMsg that returns that message.
func TestStream_SingleResponseEndsAtItsMessage(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.addr, testutil.Policy())
	b := c.breaker(checkMethod)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := c.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Check"}, checkMethod)
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(&healthpb.HealthCheckRequest{}))
	require.NoError(t, cs.CloseSend())
	var resp healthpb.HealthCheckResponse
	require.NoError(t, cs.RecvMsg(&resp))
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status)
	assert.Equal(t, success, testutil.OutcomesOf(b))
}

// Streams and unary calls from many goroutines, for the race detector:
// every call is counted exactly once.
func TestConcurrent(t *testing.T) {
	srv := newServer(t)
	p := testutil.Policy()
	p.MinRequests = 1000
	c := newClient(t, srv.addr, p)
	const workers, each = 6, 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if (w+i)%2 == 0 {
					_ = c.check(fmt.Sprintf("code:%d", []int{0, 13, 5}[i%3]), 0)
					continue
				}
				s, err := c.watch(context.Background(), "send:2")
				if assert.NoError(t, err) {
					_, err = drain(s)
					assert.NoError(t, err)
				}
			}
		}(w)
	}
	wg.Wait()
	unary := c.breaker(checkMethod).Counters()
	streams := c.breaker(watchMethod).Counters()
	assert.Equal(t, uint64(workers*each), unary.Admitted+streams.Admitted)
	assert.Equal(t, streams.Admitted, streams.Successes)
}

// The refusal's message in each state, and what errors.Is/As and the
// status package see in it.
func TestOpenError(t *testing.T) {
	c := newClient(t, testutil.RefusedAddr(t), testutil.Policy())
	b := c.breaker("m")
	for i := 0; i < 4; i++ {
		_ = b.Do(context.Background(), func(context.Context) error { return errors.New("x") })
	}
	refusal := b.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refusal, breaker.ErrOpen)

	e := newOpenError(refusal)
	assert.Equal(t, "rpc error: code = Unavailable desc = breaker m open: error_ratio, retry in 10s", e.Error())
	assert.Equal(t, codes.Unavailable, status.Code(e))
	assert.ErrorIs(t, e, breaker.ErrOpen)
	wrapped := fmt.Errorf("orders: %w", e)
	assert.Equal(t, codes.Unavailable, status.Code(wrapped))
	assert.ErrorIs(t, wrapped, breaker.ErrOpen)

	// Half-open with its probes in flight: no retry time is known.
	c.clk.Add(10 * time.Second)
	_, done1, err := b.Allow(context.Background())
	require.NoError(t, err)
	_, done2, err := b.Allow(context.Background())
	require.NoError(t, err)
	refusal = b.Do(context.Background(), func(context.Context) error { return nil })
	e = newOpenError(refusal)
	assert.Equal(t, "breaker m half_open: error_ratio", status.Convert(e).Message())
	assert.Empty(t, status.Convert(e).Details())
	done1(nil)
	done2(nil)

	e = newOpenError(breaker.ErrOpen)
	assert.Equal(t, "breaker open", status.Convert(e).Message())
	assert.ErrorIs(t, e, breaker.ErrOpen)
}

// DefaultClassify reads wrapped statuses and context errors as gRPC does.
func TestDefaultClassify_NonStatusErrors(t *testing.T) {
	for err, want := range map[error]breaker.Outcome{
		nil:                      breaker.Success,
		context.DeadlineExceeded: breaker.Timeout,
		fmt.Errorf("call: %w", context.DeadlineExceeded): breaker.Timeout,
		context.Canceled:    breaker.Failure,
		errors.New("plain"): breaker.Failure,
		fmt.Errorf("call: %w", status.Error(codes.NotFound, "no such sku")): breaker.Ignored,
		fmt.Errorf("call: %w", status.Error(codes.Unavailable, "down")):     breaker.Timeout,
		status.Error(codes.Code(99), "from the future"):                     breaker.Failure,
		newOpenError(&breaker.OpenError{Name: "inner"}):                     breaker.Ignored,
		fmt.Errorf("call: %w", breaker.ErrOpen):                             breaker.Ignored,
	} {
		assert.Equal(t, want, DefaultClassify(err), "%v", err)
	}
	for _, row := range codeRows {
		var want breaker.Outcome
		switch row.want {
		case success:
			want = breaker.Success
		case failure:
			want = breaker.Failure
		case timeout:
			want = breaker.Timeout
		case ignored:
			want = breaker.Ignored
		}
		assert.Equal(t, want, DefaultClassify(status.Error(row.code, "x")), "%v", row.code)
	}
}

// The outcome the interceptor decides is the one the breaker counts, even
// in a group whose classifier would call everything a success.
func TestReportedOutcomesBeatAGroupClassifier(t *testing.T) {
	for _, o := range []breaker.Outcome{breaker.Success, breaker.Ignored, breaker.Failure, breaker.Timeout} {
		b, err := breaker.New("x", breaker.DefaultPolicy(),
			breaker.WithClassifier(func(error) breaker.Outcome { return breaker.Success }))
		require.NoError(t, err)
		_, done, err := b.Allow(context.Background())
		require.NoError(t, err)
		report(done, o, status.Error(codes.Unavailable, "down"))
		c := b.Counters()
		got := map[breaker.Outcome]uint64{
			breaker.Success: c.Successes, breaker.Ignored: c.Ignored,
			breaker.Failure: c.Failures, breaker.Timeout: c.Timeouts,
		}
		assert.Equal(t, uint64(1), got[o], "%v: %+v", o, c)
	}
}
