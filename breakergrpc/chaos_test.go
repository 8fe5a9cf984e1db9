package breakergrpc

// Chaos experiments: a real gRPC server on loopback, the real clock, and
// faults injected into the server or the network while calls flow through
// the client interceptors. The policy is scaled down (sub-second window
// and cooldowns); assertions are bounds with wide margins, never instants,
// because the scheduler of a loaded machine decides when a goroutine runs.
//
// Every experiment accounts for every call: the calls it made equal the
// successes, failures, timeouts, ignored and refused calls the breaker
// counted, against the test's own reading of what each call returned. And
// every experiment leaves no goroutine and no file descriptor behind.

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// chaosPolicy trips on 5 counted calls at 50% failures within an 800 ms
// window and probes three times after a cooldown of 200 ms ±10%, doubling
// up to 800 ms. Policy.Timeout is two seconds, far above a loopback
// call, because a healthy call that a loaded machine delays past it would
// count as a timeout and make the experiment fail for the wrong reason
// (at one second, it did once in some hundred runs at a load average of
// 19 on two cores); the delay experiment, whose calls are all slow, uses
// delayPolicy.
func chaosPolicy() breaker.Policy {
	p := breaker.DefaultPolicy()
	p.Window = 800 * time.Millisecond
	p.Buckets = 4
	p.MinRequests = 5
	p.ErrorRatio = 0.5
	p.Timeout = 2 * time.Second
	p.OpenFor = 200 * time.Millisecond
	p.MaxOpenFor = 800 * time.Millisecond
	p.Jitter = 0.1
	p.Probes = 3
	p.Warmup = 0
	return p
}

// delayPolicy is chaosPolicy with Policy.Timeout at 200 ms, a quarter of
// the window, so that a window holds MinRequests timeouts of callers that
// call one after another.
func delayPolicy() breaker.Policy {
	p := chaosPolicy()
	p.Timeout = 200 * time.Millisecond
	return p
}

// slack is the margin allowed for scheduling on a loaded machine wherever
// a bound depends on when a goroutine gets to run.
const slack = 400 * time.Millisecond

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

// limited serves one call at a time: a call that finds the single slot
// taken gets over, as an overloaded server without a queue would treat
// it. Every call first waits until need calls have arrived, or for guard
// (which must be well inside Policy.Timeout), so that they are all in
// flight together whatever order the scheduler runs them in.
func limited(need int64, guard time.Duration, over fault) fault {
	slot := make(chan struct{}, 1)
	var arrived atomic.Int64
	all := make(chan struct{})
	return func(ctx context.Context) error {
		served := false
		select {
		case slot <- struct{}{}:
			served = true
			defer func() { <-slot }()
		default:
		}
		if arrived.Add(1) == need {
			close(all)
		}
		t := time.NewTimer(guard)
		select {
		case <-all:
		case <-t.C:
		}
		t.Stop()
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
	t      *testing.T
	addr   string
	fault  atomic.Pointer[fault]
	hits   atomic.Int64 // calls that reached the handler
	probes atomic.Int64 // of those, the ones marked as probes
	active atomic.Int64 // handlers running

	mu     sync.Mutex
	srv    *grpc.Server
	served chan struct{}
}

func newChaosServer(t *testing.T) *chaosServer {
	t.Helper()
	s := &chaosServer{t: t, addr: "127.0.0.1:0"}
	s.set(healthy)
	s.start()
	// Experiments kill their servers themselves, to count what is left
	// after; this stops one that a failed experiment left running.
	t.Cleanup(s.kill)
	return s
}

func (s *chaosServer) set(f fault) { s.fault.Store(&f) }

func (s *chaosServer) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.active.Add(1)
	defer s.active.Add(-1)
	s.hits.Add(1)
	if v := metadata.ValueFromIncomingContext(ctx, ProbeKey); len(v) == 1 && v[0] == "1" {
		s.probes.Add(1)
	}
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
	s.active.Add(1)
	defer s.active.Add(-1)
	s.hits.Add(1)
	if v := metadata.ValueFromIncomingContext(ws.Context(), ProbeKey); len(v) == 1 && v[0] == "1" {
		s.probes.Add(1)
	}
	if err := (*s.fault.Load())(ws.Context()); err != nil {
		return err
	}
	return ws.Send(serving)
}

// start listens on s.addr, the same port after the first start.
func (s *chaosServer) start() {
	s.t.Helper()
	l, err := net.Listen("tcp", s.addr)
	require.NoError(s.t, err)
	s.addr = l.Addr().String()
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	s.mu.Lock()
	s.srv, s.served = srv, served
	s.mu.Unlock()
}

// kill closes the listener and every connection at once, cancelling the
// calls in flight, and returns when the server and its handlers have
// stopped. Killing a stopped server does nothing.
func (s *chaosServer) kill() {
	s.t.Helper()
	s.mu.Lock()
	srv, served := s.srv, s.served
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Stop()
	<-served
	deadline := time.Now().Add(5 * time.Second)
	for s.active.Load() > 0 {
		require.True(s.t, time.Now().Before(deadline), "handlers still running after kill")
		time.Sleep(time.Millisecond)
	}
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

// tally is the test's own account of the calls it made, by what each
// returned.
type tally struct {
	mu                                                  sync.Mutex
	made, succeeded, failed, timedOut, ignored, refused uint64
	last                                                error // of the latest call
}

type verdict int

const (
	vSucceeded verdict = iota
	vFailed
	vTimedOut
	vIgnored
	vRefused
)

// note files one call's result: a refusal by the breaker; else by status
// code as the interceptors' documentation says they classify.
func (tl *tally) note(err error) verdict {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.made++
	tl.last = err
	if err == nil {
		tl.succeeded++
		return vSucceeded
	}
	if errors.Is(err, breaker.ErrOpen) {
		tl.refused++
		return vRefused
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		tl.timedOut++
		return vTimedOut
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.Aborted, codes.OutOfRange:
		tl.ignored++
		return vIgnored
	}
	tl.failed++
	return vFailed
}

// check compares the tally with the breaker's counters, exactly.
func (tl *tally) check(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	c := b.Counters()
	assert.Equal(t, tl.made, tl.succeeded+tl.failed+tl.timedOut+tl.ignored+tl.refused, "tally adds up")
	assert.Equal(t, outcomes{tl.succeeded, tl.failed, tl.timedOut, tl.ignored, tl.refused}, countsOf(b),
		"calls made %d: breaker counted %+v", tl.made, c)
	assert.Equal(t, tl.made-tl.refused, c.Admitted, "admitted")
}

// events records a group's transitions.
type events struct {
	mu  sync.Mutex
	all []breaker.Event
}

func (e *events) record(_ *breaker.Breaker, ev breaker.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) list() []breaker.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]breaker.Event(nil), e.all...)
}

// chaos is one experiment: a connection through both interceptors to
// addr, a group on the real clock with the policy p, and the group's
// transitions recorded. The channel reconnects within 100 ms of losing
// its server, where grpc-go's default backoff would wait up to 2 minutes:
// the experiments are about the breaker, not about the channel's backoff.
type chaos struct {
	t     *testing.T
	group *breaker.Group
	conn  *grpc.ClientConn
	hc    healthpb.HealthClient
	tally
	ev events
}

func newChaos(t *testing.T, addr string, p breaker.Policy) *chaos {
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
	t.Cleanup(func() { conn.Close() })
	t.Cleanup(g.Subscribe(c.ev.record))
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
func (c *chaos) watch() verdict {
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
	return c.note(err)
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

// lastErr returns the error of the latest call.
func (c *chaos) lastErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// call makes one Check (with a 5 s deadline of its own, which
// Policy.Timeout cuts shorter) and notes the result.
func (c *chaos) call() verdict { return c.callWithin(5 * time.Second) }

// callWithin is call with a deadline of d.
func (c *chaos) callWithin(d time.Duration) verdict {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	return c.note(err)
}

// untilAdmitted calls every 5 ms until a call is admitted, and returns
// what that call returned.
func (c *chaos) untilAdmitted(within time.Duration) verdict {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if v := c.call(); v != vRefused {
			return v
		}
		require.True(c.t, time.Now().Before(deadline), "no call admitted within %v", within)
		time.Sleep(5 * time.Millisecond)
	}
}

// noLeaks takes stock of goroutines and file descriptors and returns the
// check for the end of the experiment, to call once the experiment has
// closed its connection and stopped its servers. The runtime may hold a
// descriptor a little longer than the code that closed it, so the count is
// polled for up to 2 s rather than read once.
func noLeaks(t *testing.T) func() {
	t.Helper()
	// The network poller opens its own descriptors on first use; make sure
	// they exist before counting.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.Close()
	before := openFDs(t)
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, ignore)
		if before < 0 {
			return
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := openFDs(t)
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("file descriptors: %d before the experiment, %d after", before, n)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// openFDs counts the process's open file descriptors, or returns -1 where
// /proc/self/fd does not exist.
func openFDs(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return -1
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	require.NoError(t, err)
	return len(names) - 1 // the directory itself was open while it was read
}

func jitterBounds(d time.Duration, j float64) (time.Duration, time.Duration) {
	return time.Duration(float64(d) * (1 - j)), time.Duration(float64(d) * (1 + j))
}

// Delay injection: the server answers in 1.5 times Policy.Timeout. Callers
// keep calling (as many at once as MinRequests) until they are refused.
// The breaker opens within one window of the fault, on the error-ratio
// rule, and every failure in the window that tripped it is a timeout
// (DeadlineExceeded).
func TestChaos_DelayOpensWithinTheWindow(t *testing.T) {
	check := noLeaks(t)
	p := delayPolicy()
	s := newChaosServer(t)
	c := newChaos(t, s.addr, p)
	b := c.breaker()
	c.connected()
	s.set(delayed(p.Timeout * 3 / 2))

	start := time.Now()
	var wg sync.WaitGroup
	for range p.MinRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 5*time.Second {
				if c.call() == vRefused {
					return
				}
			}
		}()
	}
	wg.Wait()

	evs := c.ev.list()
	require.NotEmpty(t, evs)
	trip := evs[0]
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.GreaterOrEqual(t, trip.Snapshot.Counted, uint64(p.MinRequests))
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "every failure was a timeout")
	took := trip.Time.Sub(start)
	assert.GreaterOrEqual(t, took, p.Timeout, "opened before any call could time out")
	assert.Less(t, took, p.Window, "opened later than one window after the fault")

	assert.Zero(t, c.succeeded+c.failed+c.ignored, "only timeouts and refusals")
	assert.NotZero(t, c.refused)
	c.check(t, b)

	c.conn.Close()
	s.kill()
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
		want verdict
	}{
		{codes.Internal, vFailed},
		{codes.Unavailable, vTimedOut},
	} {
		t.Run(row.code.String(), func(t *testing.T) {
			check := noLeaks(t)
			p := chaosPolicy()
			s := newChaosServer(t)
			c := newChaos(t, s.addr, p)
			b := c.breaker()
			s.set(failWith(row.code))

			for i := 1; i <= p.MinRequests; i++ {
				require.Equal(t, row.want, c.call(), "call %d", i)
				if i < p.MinRequests {
					require.Empty(t, c.ev.list(), "opened after %d calls", i)
				}
			}
			evs := c.ev.list()
			require.Len(t, evs, 1, "not open after MinRequests calls")
			trip := evs[0]
			assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
			assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Counted)
			assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Failures)
			if row.want == vTimedOut {
				assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Timeouts)
			} else {
				assert.Zero(t, trip.Snapshot.Timeouts)
			}
			lo, hi := jitterBounds(p.OpenFor, p.Jitter)
			assert.GreaterOrEqual(t, trip.Cooldown, lo)
			assert.LessOrEqual(t, trip.Cooldown, hi)

			s.set(healthy)
			hits, probes := s.hits.Load(), s.probes.Load()
			require.Equal(t, vSucceeded, c.untilAdmitted(5*time.Second))
			assert.NotZero(t, c.refused, "admitted at once")
			evs = c.ev.list()
			require.GreaterOrEqual(t, len(evs), 2)
			half := evs[1]
			assert.Equal(t, breaker.HalfOpen, half.To)
			assert.GreaterOrEqual(t, half.Time.Sub(trip.Time), trip.Cooldown, "half-open before the cooldown ended")
			assert.Less(t, half.Time.Sub(trip.Time), trip.Cooldown+slack, "half-open long after the cooldown %v", trip.Cooldown)
			for i := 1; i < p.Probes; i++ {
				require.Equal(t, vSucceeded, c.call(), "probe %d: %v", i+1, c.lastErr())
			}
			assert.Equal(t, breaker.Closed, b.State())
			const more = 5
			for i := 0; i < more; i++ {
				require.Equal(t, vSucceeded, c.call(), "%v", c.lastErr())
			}
			assert.Equal(t, int64(p.Probes+more), s.hits.Load()-hits, "calls that reached the server")
			assert.Equal(t, int64(p.Probes), s.probes.Load()-probes, "calls marked as probes")
			co := b.Counters()
			assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
			assert.Equal(t, uint64(1), co.Opens)
			c.check(t, b)

			c.conn.Close()
			s.kill()
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
			inject: func(e env) { e.s.kill() },
			heal:   func(e env) { e.s.start() },
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
		call func(c *chaos, s *chaosServer, started chan<- struct{}) verdict
	}{
		{"unary", checkMethod, func(c *chaos, s *chaosServer, started chan<- struct{}) verdict {
			return underway(s, started, c.call)
		}},
		{"stream", watchMethod, func(c *chaos, s *chaosServer, started chan<- struct{}) verdict {
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
func underway(s *chaosServer, started chan<- struct{}, call func() verdict) verdict {
	if started == nil {
		return call()
	}
	hits := s.hits.Load()
	res := make(chan verdict, 1)
	go func() { res <- call() }()
	for s.hits.Load() == hits {
		time.Sleep(time.Millisecond)
	}
	close(started)
	return <-res
}

// connectionFault is one connection-fault experiment: inject strikes
// while a call is under way, heal ends the fault, and call makes the
// calls, all to method.
func connectionFault(t *testing.T, direct bool, inject, heal func(e env), method string,
	call func(c *chaos, s *chaosServer, started chan<- struct{}) verdict) {
	check := noLeaks(t)
	pol := chaosPolicy()
	e := env{s: newChaosServer(t)}
	addr := e.s.addr
	if !direct {
		e.p = newProxy(t, e.s.addr)
		addr = e.p.addr()
	}
	c := newChaos(t, addr, pol)
	b := c.breakerFor(method)
	// A call that succeeds first, so the fault meets a connection
	// that is up.
	require.Equal(t, vSucceeded, call(c, e.s, nil), "%v", c.lastErr())

	// A call in flight when the fault strikes.
	e.s.set(hang)
	started := make(chan struct{})
	res := make(chan verdict, 1)
	go func() { res <- call(c, e.s, started) }()
	<-started
	inject(e)
	require.Equal(t, vTimedOut, <-res)
	e.s.set(healthy)

	// One success and one timeout counted: MinRequests-2 more
	// timeouts reach MinRequests counted calls at a ratio of 0.8.
	for i := 2; i < pol.MinRequests; i++ {
		require.Empty(t, c.ev.list(), "opened after %d timeouts", i-1)
		require.Equal(t, vTimedOut, call(c, e.s, nil))
	}
	evs := c.ev.list()
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
		if call(c, e.s, nil) == vRefused {
			time.Sleep(5 * time.Millisecond)
		}
	}
	hits := e.s.hits.Load()
	const more = 5
	for i := 0; i < more; i++ {
		require.Equal(t, vSucceeded, call(c, e.s, nil), "%v", c.lastErr())
	}
	assert.Equal(t, int64(more), e.s.hits.Load()-hits, "calls that reached the server")
	co := b.Counters()
	assert.GreaterOrEqual(t, co.ProbesPassed, uint64(pol.Probes), "the last episode's probes passed")
	assert.Equal(t, co.Opens, co.ProbesFailed+1, "every reopen came from a failed probe")
	c.check(t, b)

	c.conn.Close()
	if e.p != nil {
		e.p.close()
	}
	e.s.kill()
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
// Policy.Timeout (DeadlineExceeded) or are turned away with Unavailable
// (both timeouts). Turned away with ResourceExhausted (a failure) they
// reopen it only with strict probes; by default a failure is an answer
// and the probe passes (the documented default of Policy.StrictProbes).
func TestChaos_ProbesBeyondCapacityReopen(t *testing.T) {
	rows := []struct {
		name   string
		over   fault
		strict bool
		want   breaker.State
		extra  verdict // what the probes beyond capacity return
	}{
		{"hang", hang, false, breaker.Open, vTimedOut},
		{"Unavailable", failWith(codes.Unavailable), false, breaker.Open, vTimedOut},
		{"ResourceExhausted strict", failWith(codes.ResourceExhausted), true, breaker.Open, vFailed},
		{"ResourceExhausted default", failWith(codes.ResourceExhausted), false, breaker.Closed, vFailed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			check := noLeaks(t)
			p := chaosPolicy()
			p.StrictProbes = row.strict
			s := newChaosServer(t)
			c := newChaos(t, s.addr, p)
			b := c.breaker()
			s.set(failWith(codes.Internal))
			for i := 0; i < p.MinRequests; i++ {
				require.Equal(t, vFailed, c.call())
			}
			evs := c.ev.list()
			require.Len(t, evs, 1)
			trip := evs[0]

			s.set(limited(int64(p.Probes), p.Timeout/2, row.over))
			time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
			require.Eventually(t, func() bool { return b.State() == breaker.HalfOpen }, time.Second, time.Millisecond)

			var wg sync.WaitGroup
			verdicts := make([]verdict, p.Probes)
			for i := range p.Probes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					verdicts[i] = c.call()
				}()
			}
			wg.Wait()
			got := map[verdict]int{}
			for _, v := range verdicts {
				got[v]++
			}
			assert.Equal(t, map[verdict]int{vSucceeded: 1, row.extra: p.Probes - 1}, got)
			assert.Equal(t, row.want, b.State())
			assert.Equal(t, int64(p.Probes), s.probes.Load(), "probes marked at the server")
			co := b.Counters()
			if row.want == breaker.Open {
				evs := c.ev.list()
				last := evs[len(evs)-1]
				assert.Equal(t, breaker.ReasonProbeFailed, last.Reason)
				assert.Equal(t, 1, last.Doublings, "cooldown doubled")
				lo, hi := jitterBounds(2*p.OpenFor, p.Jitter)
				assert.GreaterOrEqual(t, last.Cooldown, lo)
				assert.LessOrEqual(t, last.Cooldown, hi)
				assert.Equal(t, uint64(2), co.Opens)
				assert.Equal(t, uint64(1), co.ProbesFailed, "only the first failed probe gives a verdict")
				assert.LessOrEqual(t, co.ProbesPassed, uint64(1))
			} else {
				assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
			}
			c.check(t, b)

			c.conn.Close()
			s.kill()
			check()
		})
	}
}

// Probes that hang, with no Policy.Timeout to cut them: the breaker must
// not wedge half-open. Once every probe slot is taken and no verdict has
// come for one cooldown, it reopens (probe_timeout) and refuses calls
// while the probes still hang. When the server dies and the probes end,
// they are counted, but their episode is over and they change nothing.
func TestChaos_HungProbesReopenAfterACooldown(t *testing.T) {
	check := noLeaks(t)
	p := chaosPolicy()
	p.Timeout = 0
	s := newChaosServer(t)
	c := newChaos(t, s.addr, p)
	b := c.breaker()
	s.set(failWith(codes.Internal))
	for i := 0; i < p.MinRequests; i++ {
		require.Equal(t, vFailed, c.call())
	}
	evs := c.ev.list()
	require.Len(t, evs, 1)
	trip := evs[0]

	s.set(hang)
	time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
	var wg sync.WaitGroup
	for range p.Probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the server dies: a probe that ended on a deadline of
			// its own before the others were admitted would fail the
			// episode, as it did once on a machine loaded enough to keep
			// a goroutine from running for 5 s.
			c.callWithin(time.Minute)
		}()
	}
	// At least: a client may retry a request that met a connection the
	// server had just dropped, so the server can see a request twice.
	// The bound is generous: on a loaded machine three goroutines can take
	// a while to reach a server.
	if !assert.Eventually(t, func() bool { return s.hits.Load() >= int64(p.MinRequests+p.Probes) },
		15*time.Second, time.Millisecond) {
		t.Fatalf("probes at the server: %d hits, counters %+v", s.hits.Load(), b.Counters())
	}
	probesAt := time.Now()
	require.Eventually(t, func() bool { return b.State() == breaker.Open }, 5*time.Second, time.Millisecond)

	evs = c.ev.list()
	require.Len(t, evs, 3)
	half, reopen := evs[1], evs[2]
	assert.Equal(t, breaker.HalfOpen, half.To)
	assert.Equal(t, breaker.ReasonProbeTimeout, reopen.Reason)
	assert.GreaterOrEqual(t, reopen.Time.Sub(half.Time), p.OpenFor, "reopened before one cooldown")
	// The reopen happens when the state is read after the cooldown, and
	// the test starts reading once the probes are at the server, which a
	// loaded machine may delay past the cooldown.
	due := half.Time.Add(p.OpenFor)
	if probesAt.After(due) {
		due = probesAt
	}
	assert.Less(t, reopen.Time.Sub(due), slack, "reopened long after one cooldown")
	hits := s.hits.Load()
	require.Equal(t, vRefused, c.call())
	assert.Equal(t, hits, s.hits.Load(), "a refused call reached the server")

	s.kill()
	wg.Wait()
	co := b.Counters()
	assert.Equal(t, uint64(p.Probes), co.Timeouts, "the hung probes end as timeouts")
	assert.Zero(t, co.ProbesPassed+co.ProbesFailed, "a stale probe gives a verdict")
	assert.Equal(t, uint64(2), co.Opens)
	assert.Equal(t, breaker.Open, b.State())
	c.check(t, b)

	c.conn.Close()
	check()
}
