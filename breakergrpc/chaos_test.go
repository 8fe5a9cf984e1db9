package breakergrpc

// Chaos experiments: a real gRPC server on loopback, the real clock, and
// faults injected into the server or the network while calls flow through
// the client interceptors. The policy is scaled down
// (testutil.ChaosPolicy: sub-second window and cooldowns); assertions are
// bounds with wide margins, never instants, because the scheduler of a
// loaded machine decides when a goroutine runs. The steps and checks that
// the HTTP experiments share are testutil.Chaos's.
//
// Every experiment accounts for every call: the calls it made equal the
// successes, failures, timeouts, ignored and refused calls the breaker
// counted, against the test's own reading of what each call returned
// (testutil.Tally). And every experiment leaves no goroutine and no file
// descriptor behind (testutil.NoLeaks).

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fault is what the chaos server does with a Check: nil answers SERVING.
type fault func(ctx context.Context) error

func healthy(context.Context) error { return nil }

func failWith(c codes.Code) fault {
	return func(context.Context) error { return status.Error(c, "injected") }
}

// delayed answers after d, or gives up when the client goes.
func delayed(d time.Duration) fault {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// hang answers nothing until the client goes.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// limited serves one call at a time (testutil.OneAtATime): a call that
// finds the single slot taken gets over, as an overloaded server without
// a queue would treat it.
func limited(need int64, guard time.Duration, over fault) fault {
	capacity := testutil.NewOneAtATime(need, guard)
	return func(ctx context.Context) error {
		served, leave := capacity.Enter()
		defer leave()
		if served {
			return nil
		}
		return over(ctx)
	}
}

// chaosServer is the health service on a loopback port, whose fault can
// change while it runs, and which can be killed and started again on the
// same port.
type chaosServer struct {
	healthpb.UnimplementedHealthServer
	*testutil.Killable
	fault atomic.Pointer[fault]
}

func newChaosServer(t *testing.T) *chaosServer {
	t.Helper()
	s := &chaosServer{}
	s.set(healthy)
	s.Killable = testutil.NewKillable(t, func() (func(net.Listener) error, func()) {
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, s)
		return srv.Serve, srv.Stop
	})
	return s
}

func (s *chaosServer) set(f fault) { s.fault.Store(&f) }

// arrive counts a call as its handler starts; the handler calls leave
// when it returns.
func (s *chaosServer) arrive(ctx context.Context) (leave func()) {
	v := metadata.ValueFromIncomingContext(ctx, ProbeKey)
	return s.Arrive(len(v) == 1 && v[0] == "1")
}

func (s *chaosServer) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	defer s.arrive(ctx)()
	if err := (*s.fault.Load())(ctx); err != nil {
		return nil, err
	}
	return serving, nil
}

// Watch does what the fault says before its first message: a healthy
// stream sends one SERVING message and ends, any other fails or hangs
// before it. A stream is judged by its first message, so a fault after it
// would not count.
func (s *chaosServer) Watch(_ *healthpb.HealthCheckRequest, ws healthpb.Health_WatchServer) error {
	defer s.arrive(ws.Context())()
	if err := (*s.fault.Load())(ws.Context()); err != nil {
		return err
	}
	return ws.Send(serving)
}

// proxy is a TCP proxy in front of a server that can reset every
// connection it carries, and refuse new ones with a reset, like a
// middlebox or a peer that crashed.
type proxy struct {
	t       *testing.T
	l       net.Listener
	backend string
	reset   atomic.Bool // reset new connections instead of carrying them
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, l: l, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close) // for an experiment that failed before closing it
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		if p.reset.Load() {
			rst(in)
			continue
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			rst(in)
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst until either side fails, then closes both. The
// copy goes through plain Reader and Writer values: between two TCP
// connections io.Copy would splice through pipes that the runtime keeps
// in a pool until a garbage collection, which the file descriptor count
// would report as a leak.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src})
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
	dst.Close()
	src.Close()
}

// resetAll closes every connection the proxy carries with an RST.
func (p *proxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		rst(c)
	}
}

// close stops the proxy and waits for its goroutines. Closing it again
// does nothing.
func (p *proxy) close() {
	p.l.Close()
	p.resetAll()
	p.wg.Wait()
}

func rst(c net.Conn) {
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// verdictOf reads one call's result: a refusal by the breaker; else by
// status code as the interceptors' documentation says they classify.
func verdictOf(err error) testutil.Verdict {
	if err == nil {
		return testutil.Succeeded
	}
	if errors.Is(err, breaker.ErrOpen) {
		return testutil.Refused
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return testutil.TimedOut
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.Aborted, codes.OutOfRange:
		return testutil.Ignored
	}
	return testutil.Failed
}

// chaos is one experiment: a connection through both interceptors to
// addr, a group on the real clock with the policy p, calling the chaos
// server s. The channel reconnects within 100 ms of losing its server,
// where grpc-go's default backoff would wait up to 2 minutes: the
// experiments are about the breaker, not about the channel's backoff.
type chaos struct {
	*testutil.Chaos
	t     *testing.T
	group *breaker.Group
	conn  *grpc.ClientConn
	hc    healthpb.HealthClient
}

func newChaos(t *testing.T, s *chaosServer, addr string, p breaker.Policy) *chaos {
	t.Helper()
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(g)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(g)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
	)
	require.NoError(t, err)
	c := &chaos{t: t, group: g, conn: conn, hc: healthpb.NewHealthClient(conn)}
	c.Chaos = testutil.NewChaos(t, g, p, &s.Load, c.call)
	t.Cleanup(func() { conn.Close() })
	return c
}

func (c *chaos) breaker() *breaker.Breaker { return c.breakerFor(checkMethod) }

func (c *chaos) breakerFor(method string) *breaker.Breaker {
	c.t.Helper()
	b, err := c.group.Get(method)
	require.NoError(c.t, err)
	return b
}

// watch opens a Watch stream and reads it to its end, and notes the
// result: a success once a message has arrived, as the interceptor judges
// a stream, or else how it ended.
func (c *chaos) watch() testutil.Verdict {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	answered := false
	for err == nil {
		if _, err = s.Recv(); err == nil {
			answered = true
		}
	}
	if err == io.EOF || answered {
		err = nil
	}
	return c.Note(verdictOf(err), err)
}

// connected brings the channel up without a call, so that the first calls
// of an experiment do not also wait for a connection.
func (c *chaos) connected() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Connect()
	for st := c.conn.GetState(); st != connectivity.Ready; st = c.conn.GetState() {
		require.True(c.t, c.conn.WaitForStateChange(ctx, st), "channel not ready: %v", st)
	}
}

// call makes one Check (with a 5 s deadline of its own, which
// Policy.CallTimeout cuts shorter) and notes the result.
func (c *chaos) call() testutil.Verdict { return c.callWithin(5 * time.Second) }

// callWithin is call with a deadline of d.
func (c *chaos) callWithin(d time.Duration) testutil.Verdict {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	return c.Note(verdictOf(err), err)
}

// Delay injection: the server answers in 1.5 times Policy.CallTimeout. Callers
// keep calling (as many at once as MinRequests) until they are refused.
// The breaker opens within one window of the fault, on the error-ratio
// rule, and every failure in the window that tripped it is a timeout
// (DeadlineExceeded).
func TestChaos_DelayOpensWithinTheWindow(t *testing.T) {
	check := testutil.NoLeaks(t)
	p := testutil.DelayPolicy()
	s := newChaosServer(t)
	c := newChaos(t, s, s.Addr(), p)
	b := c.breaker()
	c.connected()
	s.set(delayed(p.CallTimeout * 3 / 2))

	start := time.Now()
	c.CallersUntilRefused(p.MinRequests, 5*time.Second)
	c.CheckOpenedByTimeouts(b, start)

	c.conn.Close()
	s.Kill()
	check()
}

// Error injection: a server failing every call opens the breaker on
// exactly the MinRequests-th counted call, not before: Internal as
// failures, Unavailable as timeouts. Recovery: once the fault stops, the
// breaker turns half-open after the cooldown (within its jitter), the
// probes close it, and calls reach the server again.
func TestChaos_ErrorsOpenAfterMinRequestsThenRecover(t *testing.T) {
	for _, row := range []struct {
		code codes.Code
		want testutil.Verdict
	}{
		{codes.Internal, testutil.Failed},
		{codes.Unavailable, testutil.TimedOut},
	} {
		t.Run(row.code.String(), func(t *testing.T) {
			check := testutil.NoLeaks(t)
			s := newChaosServer(t)
			c := newChaos(t, s, s.Addr(), testutil.ChaosPolicy())
			b := c.breaker()
			s.set(failWith(row.code))

			c.TripAfter(row.want)
			c.RecoverAfter(b, func() { s.set(healthy) })

			c.conn.Close()
			s.Kill()
			check()
		})
	}
}

// Faults of the connection: the server killed in the middle of a call and
// started again on the same port, and every connection reset (RST) by the
// network while a call is in flight, then each new one reset too. Each
// strikes a unary call waiting for its answer, and a stream waiting for
// its first message (one past it has been judged by it). Each failed call
// is a timeout (Unavailable: nothing came back);
// the breaker opens on MinRequests counted calls, and closes once the
// fault ends and the channel has reconnected.
func TestChaos_ConnectionFaults(t *testing.T) {
	rows := []struct {
		name   string
		direct bool
		inject func(e env)
		heal   func(e env)
	}{
		{
			name:   "killed mid-call, restarted on the same port",
			direct: true,
			inject: func(e env) { e.s.Kill() },
			heal:   func(e env) { e.s.Start() },
		},
		{
			name: "connections reset",
			inject: func(e env) {
				e.p.reset.Store(true)
				e.p.resetAll()
			},
			heal: func(e env) { e.p.reset.Store(false) },
		},
	}
	kinds := []struct {
		name   string
		method string
		// call makes one call and notes it; started, if not nil, is
		// closed once the call is under way: at the server for a unary
		// call, before its first message for a stream.
		call func(c *chaos, s *chaosServer, started chan<- struct{}) testutil.Verdict
	}{
		{"unary", checkMethod, func(c *chaos, s *chaosServer, started chan<- struct{}) testutil.Verdict {
			return underway(s, started, c.call)
		}},
		{"stream", watchMethod, func(c *chaos, s *chaosServer, started chan<- struct{}) testutil.Verdict {
			return underway(s, started, c.watch)
		}},
	}
	for _, row := range rows {
		for _, kind := range kinds {
			t.Run(row.name+"/"+kind.name, func(t *testing.T) {
				connectionFault(t, row.direct, row.inject, row.heal, kind.method, kind.call)
			})
		}
	}
}

// underway makes the call; if started is not nil, it closes started once
// the call has reached the server.
func underway(s *chaosServer, started chan<- struct{}, call func() testutil.Verdict) testutil.Verdict {
	if started == nil {
		return call()
	}
	hits := s.Hits()
	res := make(chan testutil.Verdict, 1)
	go func() { res <- call() }()
	for s.Hits() == hits {
		time.Sleep(time.Millisecond)
	}
	close(started)
	return <-res
}

// connectionFault is one connection-fault experiment: inject strikes
// while a call is under way, heal ends the fault, and call makes the
// calls, all to method.
func connectionFault(t *testing.T, direct bool, inject, heal func(e env), method string,
	call func(c *chaos, s *chaosServer, started chan<- struct{}) testutil.Verdict) {
	check := testutil.NoLeaks(t)
	pol := testutil.ChaosPolicy()
	e := env{s: newChaosServer(t)}
	addr := e.s.Addr()
	if !direct {
		e.p = newProxy(t, e.s.Addr())
		addr = e.p.addr()
	}
	c := newChaos(t, e.s, addr, pol)
	b := c.breakerFor(method)
	// A call that succeeds first, so the fault meets a connection
	// that is up.
	require.Equal(t, testutil.Succeeded, call(c, e.s, nil), "%v", c.Last())

	// A call in flight when the fault strikes.
	e.s.set(hang)
	started := make(chan struct{})
	res := make(chan testutil.Verdict, 1)
	go func() { res <- call(c, e.s, started) }()
	<-started
	inject(e)
	require.Equal(t, testutil.TimedOut, <-res)
	e.s.set(healthy)

	// One success and one timeout counted: MinRequests-2 more
	// timeouts reach MinRequests counted calls at a ratio of 0.8.
	for i := 2; i < pol.MinRequests; i++ {
		require.Empty(t, c.Events.List(), "opened after %d timeouts", i-1)
		require.Equal(t, testutil.TimedOut, call(c, e.s, nil))
	}
	evs := c.Events.List()
	require.Len(t, evs, 1, "not open after MinRequests counted calls")
	trip := evs[0]
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Equal(t, uint64(pol.MinRequests), trip.Snapshot.Counted)
	assert.Equal(t, uint64(pol.MinRequests-1), trip.Snapshot.Timeouts)

	heal(e)
	// The breaker closes within a bound: a probe made before the
	// channel has reconnected fails fast with Unavailable and
	// reopens it, with a longer cooldown.
	deadline := time.Now().Add(5 * time.Second)
	for b.State() != breaker.Closed {
		require.True(t, time.Now().Before(deadline), "still %v after the fault ended", b.State())
		if call(c, e.s, nil) == testutil.Refused {
			time.Sleep(5 * time.Millisecond)
		}
	}
	hits := e.s.Hits()
	const more = 5
	for i := 0; i < more; i++ {
		require.Equal(t, testutil.Succeeded, call(c, e.s, nil), "%v", c.Last())
	}
	assert.Equal(t, int64(more), e.s.Hits()-hits, "calls that reached the server")
	co := b.Counters()
	assert.GreaterOrEqual(t, co.ProbesPassed, uint64(pol.Probes), "the last episode's probes passed")
	assert.Equal(t, co.Opens, co.ProbesFailed+1, "every reopen came from a failed probe")
	c.Check(t, b)

	c.conn.Close()
	if e.p != nil {
		e.p.close()
	}
	e.s.Kill()
	check()
}

// env is where a connection fault strikes.
type env struct {
	s *chaosServer
	p *proxy // nil when the client talks to the server directly
}

// Boundary: a server that serves one call at a time meets three probes at
// once. The one it serves passes; the others fail the half-open episode,
// which reopens the breaker with a doubled cooldown, when they hang until
// Policy.CallTimeout (DeadlineExceeded) or are turned away with Unavailable
// (both timeouts). Turned away with ResourceExhausted (a failure) they
// reopen it only with strict probes; by default a failure is an answer
// and the probe passes (the documented default of Policy.StrictProbes).
func TestChaos_ProbesBeyondCapacityReopen(t *testing.T) {
	rows := []struct {
		name   string
		over   fault
		strict bool
		want   breaker.State
		extra  testutil.Verdict // what the probes beyond capacity return
	}{
		{"hang", hang, false, breaker.Open, testutil.TimedOut},
		{"Unavailable", failWith(codes.Unavailable), false, breaker.Open, testutil.TimedOut},
		{"ResourceExhausted strict", failWith(codes.ResourceExhausted), true, breaker.Open, testutil.Failed},
		{"ResourceExhausted default", failWith(codes.ResourceExhausted), false, breaker.Closed, testutil.Failed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			check := testutil.NoLeaks(t)
			p := testutil.ChaosPolicy()
			p.StrictProbes = row.strict
			s := newChaosServer(t)
			c := newChaos(t, s, s.Addr(), p)
			b := c.breaker()
			s.set(failWith(codes.Internal))
			c.TripAfter(testutil.Failed)

			s.set(limited(int64(p.Probes), p.CallTimeout/2, row.over))
			c.CheckProbesBeyondCapacity(b, row.want, row.extra)

			c.conn.Close()
			s.Kill()
			check()
		})
	}
}

// Probes that hang, with no Policy.CallTimeout to cut them: the breaker must
// not wedge half-open. Once every probe slot is taken and no verdict has
// come for one cooldown, it reopens (probe_timeout) and refuses calls
// while the probes still hang. When the server dies and the probes end,
// they are counted, but their episode is over and they change nothing.
func TestChaos_HungProbesReopenAfterACooldown(t *testing.T) {
	check := testutil.NoLeaks(t)
	p := testutil.ChaosPolicy()
	p.CallTimeout = 0
	s := newChaosServer(t)
	c := newChaos(t, s, s.Addr(), p)
	b := c.breaker()
	s.set(failWith(codes.Internal))
	c.TripAfter(testutil.Failed)

	s.set(hang)
	// A probe waits until the server dies: one that ended on a deadline
	// of its own before the others were admitted would fail the episode.
	probe := func() testutil.Verdict { return c.callWithin(time.Minute) }
	c.CheckHungProbesReopen(b, probe, s.Kill)

	c.conn.Close()
	check()
}
