package breakergrpc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/internal/testutil/tracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// outcomesOf counts a trace's calls as a breaker's counters do: the
// admitted ones by outcome, and the refused ones.
func outcomesOf(recs []calltrace.Record) testutil.Outcomes {
	var o testutil.Outcomes
	for _, r := range recs {
		switch {
		case r.Refused:
			o.Rejected++
		case r.Outcome == breaker.Success:
			o.Successes++
		case r.Outcome == breaker.Failure:
			o.Failures++
		case r.Outcome == breaker.Timeout:
			o.Timeouts++
		case r.Outcome == breaker.Ignored:
			o.Ignored++
		}
	}
	return o
}

// An outage recorded through the unary interceptor, against a real
// server: the failed calls that opened the breaker, the calls it refused
// (which never reached the server), the half-open probes that closed it
// (the first answered with an error, an answer all the same), and a call
// after them, each under the method's key, on the group's clock, with the
// outcome the breaker counted.
func TestUnary_RecordsAnOutageWithItsRefusalsAndProbes(t *testing.T) {
	srv := newServer(t)
	trace := tracetest.New(t)
	c := newClient(t, srv.addr, testutil.Policy(), WithRecorder(trace.Rec))
	b := c.breaker(checkMethod)
	t0 := c.clk.Now()

	for i := 0; i < 4; i++ {
		require.Equal(t, codes.Internal, status.Code(c.check("code:13", 0)))
	}
	require.Equal(t, breaker.Open, b.State())
	for i := 0; i < 2; i++ {
		require.ErrorIs(t, c.check("", 0), breaker.ErrOpen)
	}
	require.Equal(t, int64(4), srv.hits.Load(), "a refused call reached the server")
	c.clk.Add(10 * time.Second)
	require.Equal(t, codes.Internal, status.Code(c.check("code:13", 0)))
	require.NoError(t, c.check("", 0))
	require.Equal(t, breaker.Closed, b.State())
	require.NoError(t, c.check("", 0))

	failed := calltrace.Record{Time: tracetest.Time(t0), Key: checkMethod, Outcome: breaker.Failure}
	refused := calltrace.Record{Time: tracetest.Time(t0), Key: checkMethod, Refused: true}
	t1 := tracetest.Time(t0.Add(10 * time.Second))
	got := trace.Records()
	assert.Equal(t, []calltrace.Record{
		failed, failed, failed, failed,
		refused, refused,
		{Time: t1, Key: checkMethod, Outcome: breaker.Failure, Probe: true},
		{Time: t1, Key: checkMethod, Outcome: breaker.Success, Probe: true},
		{Time: t1, Key: checkMethod, Outcome: breaker.Success},
	}, got)
	assert.Equal(t, testutil.OutcomesOf(b), outcomesOf(got), "the trace and the breaker disagree")
	probes := 0
	for _, r := range got {
		if r.Probe {
			probes++
		}
	}
	assert.Equal(t, int(b.Counters().ProbesPassed), probes, "probes in the trace")
}

// The same through the stream interceptor: a stream is recorded once, when
// its outcome is decided, and lasts until then (here, a first message 300ms
// after the stream opened), whatever it does after.
func TestStream_RecordsAnOutageWithItsRefusalsAndProbes(t *testing.T) {
	srv := newServer(t)
	trace := tracetest.New(t)
	c := newClient(t, srv.addr, testutil.Policy(), WithRecorder(trace.Rec))
	b := c.breaker(watchMethod)
	t0 := c.clk.Now()
	ctx := context.Background()

	for i := 0; i < 4; i++ {
		s, err := c.watch(ctx, "first:14")
		require.NoError(t, err)
		_, err = drain(s)
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	require.Equal(t, breaker.Open, b.State())
	_, err := c.watch(ctx, "send:1")
	require.ErrorIs(t, err, breaker.ErrOpen)

	c.clk.Add(10 * time.Second)
	for i := 0; i < 2; i++ {
		s, err := c.watch(ctx, "send:2")
		require.NoError(t, err)
		n, err := drain(s)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	}
	require.Equal(t, breaker.Closed, b.State())

	watching, stop := context.WithCancel(ctx)
	s, err := c.watch(watching, "hold:0")
	require.NoError(t, err)
	c.clk.Add(300 * time.Millisecond)
	srv.tick <- struct{}{}
	_, err = s.Recv()
	require.NoError(t, err)
	stop() // after the first message: not recorded again
	_, err = drain(s)
	require.Equal(t, codes.Canceled, status.Code(err))

	timedOut := calltrace.Record{Time: tracetest.Time(t0), Key: watchMethod, Outcome: breaker.Timeout}
	t1 := tracetest.Time(t0.Add(10 * time.Second))
	got := trace.Records()
	assert.Equal(t, []calltrace.Record{
		timedOut, timedOut, timedOut, timedOut,
		{Time: tracetest.Time(t0), Key: watchMethod, Refused: true},
		{Time: t1, Key: watchMethod, Outcome: breaker.Success, Probe: true},
		{Time: t1, Key: watchMethod, Outcome: breaker.Success, Probe: true},
		{Time: t1, Key: watchMethod, Duration: 300 * time.Millisecond, Outcome: breaker.Success},
	}, got)
	assert.Equal(t, testutil.OutcomesOf(b), outcomesOf(got), "the trace and the breaker disagree")
}

// Each call is recorded with the outcome the interceptor reported to its
// breaker, whatever the recorder's own classifier would say of the error.
func TestUnary_RecordsTheOutcomeTheBreakerCounted(t *testing.T) {
	srv := newServer(t)
	for _, row := range codeRows {
		t.Run(row.code.String(), func(t *testing.T) {
			trace := tracetest.New(t)
			c := newClient(t, srv.addr, testutil.Policy(), WithRecorder(trace.Rec))
			service := ""
			if row.code != codes.OK {
				service = fmt.Sprintf("code:%d", row.code)
			}
			require.Equal(t, row.code, status.Code(c.check(service, 0)))
			got := trace.Records()
			require.Len(t, got, 1)
			assert.Equal(t, row.want, outcomesOf(got))
			assert.Equal(t, testutil.OutcomesOf(c.breaker(checkMethod)), outcomesOf(got), "the trace and the breaker disagree")
		})
	}
}

// Only calls a breaker judged are recorded: not one that no breaker guards
// (a key of ""), nor one whose caller had gone before it reached its
// breaker. A nil recorder records nothing and the calls go as without it.
func TestRecordsOnlyWhatABreakerJudged(t *testing.T) {
	srv := newServer(t)
	trace := tracetest.New(t)
	c := newClient(t, srv.addr, testutil.Policy(), WithRecorder(trace.Rec),
		WithKey(func(ctx context.Context, method string, _ *grpc.ClientConn) string {
			if method == watchMethod {
				return ""
			}
			return method
		}))
	s, err := c.watch(context.Background(), "send:1")
	require.NoError(t, err)
	_, err = drain(s)
	require.NoError(t, err)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.hc.Check(gone, nil)
	require.Equal(t, codes.Canceled, status.Code(err))
	assert.Empty(t, trace.Records())

	off := newClient(t, srv.addr, testutil.Policy(), WithRecorder(nil))
	require.NoError(t, off.check("", 0))
}

// An invoker that panics is recorded as the breaker counted it: a failure.
func TestUnary_RecordsAPanickingInvokerAsAFailure(t *testing.T) {
	trace := tracetest.New(t)
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	panicky := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		panic("invoker bug")
	}
	assert.Panics(t, func() {
		_ = UnaryClientInterceptor(g, WithRecorder(trace.Rec))(context.Background(), checkMethod, nil, nil, nil, panicky)
	})
	got := trace.Records()
	require.Len(t, got, 1)
	assert.Equal(t, checkMethod, got[0].Key)
	assert.Equal(t, breaker.Failure, got[0].Outcome)
}

// Streams and unary calls from many goroutines through recording
// interceptors, for the race detector: every call is recorded once.
func TestRecordsEveryConcurrentCallOnce(t *testing.T) {
	srv := newServer(t)
	trace := tracetest.New(t)
	p := testutil.Policy()
	p.MinRequests = 1000 // stays closed
	c := newClient(t, srv.addr, p, WithRecorder(trace.Rec))
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
	got := trace.Records()
	require.Len(t, got, workers*each)
	var unary, streams []calltrace.Record
	for _, r := range got {
		if r.Key == checkMethod {
			unary = append(unary, r)
		} else {
			streams = append(streams, r)
		}
	}
	assert.Equal(t, testutil.OutcomesOf(c.breaker(checkMethod)), outcomesOf(unary))
	assert.Equal(t, testutil.OutcomesOf(c.breaker(watchMethod)), outcomesOf(streams))
}

// A calltrace.Recorder given to the group as its observer
// (breaker.WithObserver) records each call as WithRecorder does, unary
// and streaming: the same records, call by call, the refusals and the
// probes included, with the outcome the breaker counted, at the same
// times. The breaker's one seam for what watches calls sees what the
// interceptors' own recorder sees.
func TestInterceptors_TheGroupsObserverRecordsWhatWithRecorderRecords(t *testing.T) {
	srv := newServer(t)
	viaOption, viaObserver := tracetest.New(t), tracetest.New(t)
	clk := testutil.NewClock()
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}},
		breaker.WithClock(clk), breaker.WithObserver(viaObserver.Rec))
	require.NoError(t, err)
	rec := WithRecorder(viaOption.Rec)
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(g, rec)), grpc.WithStreamInterceptor(StreamClientInterceptor(g, rec)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, clk: clk, group: g, conn: conn, hc: healthpb.NewHealthClient(conn)}
	ctx := context.Background()

	for _, service := range []string{"", "code:5", "code:13", "code:14", "code:13", "code:13"} {
		clk.Add(time.Millisecond)
		_ = c.check(service, 0)
	}
	for i := 0; i < 4; i++ {
		clk.Add(time.Millisecond)
		if s, err := c.watch(ctx, "first:14"); err == nil {
			_, _ = drain(s)
		}
	}
	require.ErrorIs(t, c.check("", 0), breaker.ErrOpen)
	clk.Add(10 * time.Second)
	require.NoError(t, c.check("", 0)) // a probe
	s, err := c.watch(ctx, "send:2")
	require.NoError(t, err)
	_, err = drain(s)
	require.NoError(t, err)

	want := viaOption.Records()
	require.Len(t, want, 13)
	var refused, probes int
	for _, r := range want {
		if r.Refused {
			refused++
		}
		if r.Probe {
			probes++
		}
	}
	// Check and Watch have a breaker each: both open, refuse and probe.
	assert.Equal(t, 2, refused)
	assert.Equal(t, 2, probes)
	assert.Equal(t, want, viaObserver.Records())
}
