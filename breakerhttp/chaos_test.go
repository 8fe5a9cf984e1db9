package breakerhttp

// Chaos experiments: real servers on loopback, the real clock, and faults
// injected into the downstream while traffic flows through the Transport.
// The policy is scaled down (sub-second window and cooldowns) so that each
// experiment takes well under a second; assertions are bounds with wide
// margins, never instants, because the scheduler of a loaded machine
// decides when a goroutine runs.
//
// Every experiment accounts for every call: the calls it made equal the
// successes, failures, timeouts, ignored and refused calls the breaker
// counted, one by one against the test's own reading of what each call
// returned. And every experiment leaves no goroutine and no file
// descriptor behind.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
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

// fault is what the chaos server does with a request.
type fault func(w http.ResponseWriter, r *http.Request)

func healthy(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }

func failWith(code int) fault {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// delayed answers 200 after d, or gives up when the client goes.
func delayed(d time.Duration) fault {
	return func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			io.WriteString(w, "late\n")
		case <-r.Context().Done():
		}
	}
}

// hang answers nothing until the client goes.
func hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// resetConn closes the connection with an RST (SO_LINGER 0) instead of
// answering.
func resetConn(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// truncated promises 100 bytes of body, writes 3 and closes.
func truncated(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
	buf.Flush()
	conn.Close()
}

// limited serves one request at a time: a request that finds the single slot
// taken gets over, as an overloaded server without a queue would treat
// it. Every request first waits until need requests have arrived, or for guard
// (which must be well inside Policy.Timeout), so that they are all in
// flight together whatever order the scheduler runs them in.
func limited(need int64, guard time.Duration, over fault) fault {
	slot := make(chan struct{}, 1)
	var arrived atomic.Int64
	all := make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
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
			io.WriteString(w, "ok\n")
			return
		}
		over(w, r)
	}
}

// chaosServer is an HTTP server on loopback whose fault can change while
// it runs, and which can be killed and started again on the same port.
type chaosServer struct {
	t      *testing.T
	addr   string
	fault  atomic.Pointer[fault]
	hits   atomic.Int64 // requests that reached the handler
	probes atomic.Int64 // of those, the ones marked as probes
	active atomic.Int64 // handlers running

	mu     sync.Mutex
	srv    *http.Server
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

func (s *chaosServer) url() string { return "http://" + s.addr + "/" }

// start listens on s.addr, the same port after the first start.
func (s *chaosServer) start() {
	s.t.Helper()
	l, err := net.Listen("tcp", s.addr)
	require.NoError(s.t, err)
	s.addr = l.Addr().String()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	s.mu.Lock()
	s.srv, s.served = srv, served
	s.mu.Unlock()
}

// kill closes the listener and every connection at once, in the middle of
// whatever they carry, and returns when the server and its handlers have
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
	_ = srv.Close()
	<-served
	// Handlers are not waited for by Close; every fault returns once its
	// connection is gone.
	deadline := time.Now().Add(5 * time.Second)
	for s.active.Load() > 0 {
		require.True(s.t, time.Now().Before(deadline), "handlers still running after kill")
		time.Sleep(time.Millisecond)
	}
}

func (s *chaosServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	s.hits.Add(1)
	if r.Header.Get(ProbeHeader) == "1" {
		s.probes.Add(1)
	}
	(*s.fault.Load())(w, r)
}

// tally is the test's own account of the calls it made, by what each
// returned.
type tally struct {
	mu                                                  sync.Mutex
	made, succeeded, failed, timedOut, ignored, refused uint64
}

type verdict int

const (
	vSucceeded verdict = iota
	vFailed
	vTimedOut
	vIgnored
	vRefused
)

// note files one call's result: a refusal; any other error (no response,
// or a body that broke off) as a timeout; else by status, as the
// Transport's documentation says it classifies.
func (tl *tally) note(status int, err error) verdict {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.made++
	switch {
	case errors.Is(err, breaker.ErrOpen):
		tl.refused++
		return vRefused
	case err != nil:
		tl.timedOut++
		return vTimedOut
	case status == http.StatusTooManyRequests || status >= 500:
		tl.failed++
		return vFailed
	case status >= 400:
		tl.ignored++
		return vIgnored
	}
	tl.succeeded++
	return vSucceeded
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

// chaos is one experiment: a client through a Transport on the real clock,
// with the policy p, and the group's transitions recorded.
type chaos struct {
	*fixture
	tally
	ev events
}

func newChaos(t *testing.T, p breaker.Policy) *chaos {
	t.Helper()
	c := &chaos{fixture: newFixtureWith(t, p, nil)}
	t.Cleanup(c.group.Subscribe(c.ev.record))
	return c
}

// breakerFor returns the group's breaker for the server's host.
func (c *chaos) breakerFor(s *chaosServer) *breaker.Breaker {
	c.t.Helper()
	b, err := c.group.Get(s.addr)
	require.NoError(c.t, err)
	return b
}

// call sends GET url, reads the body to the end, and notes the result.
func (c *chaos) call(url string) verdict {
	status, err := c.get(context.Background(), url)
	return c.note(status, err)
}

// untilAdmitted calls url every 5 ms until a call is admitted, and returns
// what that call returned.
func (c *chaos) untilAdmitted(url string, within time.Duration) verdict {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if v := c.call(url); v != vRefused {
			return v
		}
		require.True(c.t, time.Now().Before(deadline), "no call admitted within %v", within)
		time.Sleep(5 * time.Millisecond)
	}
}

// noLeaks takes stock of goroutines and file descriptors and returns the
// check for the end of the experiment, to call once the experiment has
// closed its connections and stopped its servers. The runtime may hold a
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

// Delay injection: the downstream answers in 1.5 times Policy.Timeout.
// Callers keep sending (as many at once as MinRequests) until they are
// refused. The breaker opens within one window of the fault, on the
// error-ratio rule, and every failure in the window that tripped it is a
// timeout.
func TestChaos_DelayOpensWithinTheWindow(t *testing.T) {
	check := noLeaks(t)
	p := delayPolicy()
	c := newChaos(t, p)
	s := newChaosServer(t)
	b := c.breakerFor(s)
	s.set(delayed(p.Timeout * 3 / 2))

	start := time.Now()
	var wg sync.WaitGroup
	for range p.MinRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 5*time.Second {
				if c.call(s.url()) == vRefused {
					return
				}
			}
		}()
	}
	wg.Wait()

	evs := c.ev.list()
	require.NotEmpty(t, evs)
	trip := evs[0]
	assert.Equal(t, breaker.Closed, trip.From)
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.GreaterOrEqual(t, trip.Snapshot.Counted, uint64(p.MinRequests))
	assert.Equal(t, trip.Snapshot.Counted, trip.Snapshot.Timeouts, "every counted call was a timeout")
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "every failure was a timeout")
	took := trip.Time.Sub(start)
	assert.GreaterOrEqual(t, took, p.Timeout, "opened before any call could time out")
	assert.Less(t, took, p.Window, "opened later than one window after the fault")

	assert.Zero(t, c.succeeded+c.failed+c.ignored, "only timeouts and refusals")
	assert.NotZero(t, c.refused)
	c.check(t, b)

	c.tr.CloseIdleConnections()
	s.kill()
	check()
}

// Error injection: a downstream answering 500 to everything opens the
// breaker on exactly the MinRequests-th counted call, not before. Recovery:
// once the fault stops, the breaker turns half-open after the cooldown
// (within its jitter), the probes close it, and traffic reaches the server
// again.
func TestChaos_ErrorsOpenAfterMinRequestsThenRecover(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			check := noLeaks(t)
			p := chaosPolicy()
			c := newChaos(t, p)
			s := newChaosServer(t)
			b := c.breakerFor(s)
			s.set(failWith(code))

			tripAfter(t, c, s.url(), vFailed)
			recoverAfter(t, c, s, b, func() { s.set(healthy) })

			c.tr.CloseIdleConnections()
			s.kill()
			check()
		})
	}
}

// tripAfter makes calls to url one at a time, each returning want, and
// checks that the breaker stays closed for the first MinRequests-1 and is
// open right after the MinRequests-th, on the error-ratio rule.
func tripAfter(t *testing.T, c *chaos, url string, want verdict) {
	t.Helper()
	p := chaosPolicy()
	for i := 1; i <= p.MinRequests; i++ {
		require.Equal(t, want, c.call(url), "call %d", i)
		evs := c.ev.list()
		if i < p.MinRequests {
			require.Empty(t, evs, "opened after %d calls", i)
		} else {
			require.Len(t, evs, 1, "not open after %d calls", i)
		}
	}
	trip := c.ev.list()[0]
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Counted)
	assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Failures)
	if want == vTimedOut {
		assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Timeouts)
	} else {
		assert.Zero(t, trip.Snapshot.Timeouts)
	}
	lo, hi := jitterBounds(p.OpenFor, p.Jitter)
	assert.GreaterOrEqual(t, trip.Cooldown, lo)
	assert.LessOrEqual(t, trip.Cooldown, hi)
}

func jitterBounds(d time.Duration, j float64) (time.Duration, time.Duration) {
	return time.Duration(float64(d) * (1 - j)), time.Duration(float64(d) * (1 + j))
}

// recoverAfter ends the fault with heal and checks that the open breaker lets
// the first call through no sooner than its cooldown and soon after it,
// that Probes calls close it, and that the next calls reach the server.
func recoverAfter(t *testing.T, c *chaos, s *chaosServer, b *breaker.Breaker, heal func()) {
	t.Helper()
	p := chaosPolicy()
	trip := c.ev.list()[0]
	heal()
	hits, probes := s.hits.Load(), s.probes.Load()

	// Refused until the cooldown has passed; then the first probe.
	// The transition happens when the first call after the cooldown asks,
	// and the test asks every 5 ms: its time is bounded below by the
	// cooldown, above by the cooldown plus the polling and scheduling
	// delays.
	v := c.untilAdmitted(s.url(), 5*time.Second)
	require.Equal(t, vSucceeded, v)
	assert.NotZero(t, c.refused, "admitted at once")
	evs := c.ev.list()
	require.GreaterOrEqual(t, len(evs), 2)
	half := evs[1]
	assert.Equal(t, breaker.HalfOpen, half.To)
	assert.Equal(t, breaker.ReasonCooldown, half.Reason)
	assert.GreaterOrEqual(t, half.Time.Sub(trip.Time), trip.Cooldown, "half-open before the cooldown ended")
	assert.Less(t, half.Time.Sub(trip.Time), trip.Cooldown+slack, "half-open long after the cooldown %v", trip.Cooldown)

	for i := 1; i < p.Probes; i++ {
		require.Equal(t, vSucceeded, c.call(s.url()), "probe %d", i+1)
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, int64(p.Probes), s.probes.Load()-probes, "probes marked at the server")

	// Traffic returns: every call succeeds and reaches the server.
	const more = 5
	for i := 0; i < more; i++ {
		require.Equal(t, vSucceeded, c.call(s.url()))
	}
	assert.Equal(t, int64(p.Probes+more), s.hits.Load()-hits, "calls that reached the server")
	assert.Equal(t, int64(p.Probes), s.probes.Load()-probes, "ordinary calls marked as probes")
	co := b.Counters()
	assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
	assert.Equal(t, uint64(1), co.Opens)
	c.check(t, b)
}

// Faults of the connection rather than the answer: the server killed in
// the middle of a call and started again on the same port; connections
// reset (RST) instead of answered; a body cut short of its Content-Length.
// Each is a timeout (nothing, or only part of an answer, came back); the
// breaker opens on exactly MinRequests of them and recovers when the fault
// ends.
func TestChaos_ConnectionFaults(t *testing.T) {
	p := chaosPolicy()
	rows := []struct {
		name string
		// inject starts the fault once a healthy call has kept a
		// connection alive, and may make the fault's first calls.
		inject func(t *testing.T, c *chaos, s *chaosServer)
		heal   func(s *chaosServer)
		// hits is the least number of requests the server sees, the
		// healthy call's included; exact if no more may come. The
		// client retries a request that failed on a reused connection
		// once on a new one, within the one call, so a fault that
		// answers every request may see more requests than calls.
		hits  int64
		exact bool
	}{
		{
			name: "killed mid-call, restarted on the same port",
			inject: func(t *testing.T, c *chaos, s *chaosServer) {
				s.set(hang)
				hits := s.hits.Load()
				res := make(chan verdict, 1)
				go func() { res <- c.call(s.url()) }()
				// Kill once the call is in the server's hands.
				for s.hits.Load() == hits {
					time.Sleep(time.Millisecond)
				}
				s.kill()
				require.Equal(t, vTimedOut, <-res)
				// The calls after it find the port closed.
			},
			heal: func(s *chaosServer) {
				s.set(healthy)
				s.start()
			},
			hits: 2, exact: true,
		},
		{
			name:   "connection reset",
			inject: func(_ *testing.T, _ *chaos, s *chaosServer) { s.set(resetConn) },
			heal:   func(s *chaosServer) { s.set(healthy) },
			hits:   int64(p.MinRequests),
		},
		{
			name:   "body cut short",
			inject: func(_ *testing.T, _ *chaos, s *chaosServer) { s.set(truncated) },
			heal:   func(s *chaosServer) { s.set(healthy) },
			hits:   int64(p.MinRequests),
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			check := noLeaks(t)
			c := newChaos(t, p)
			s := newChaosServer(t)
			b := c.breakerFor(s)
			// A healthy call first, so the fault meets a kept-alive
			// connection.
			require.Equal(t, vSucceeded, c.call(s.url()))

			row.inject(t, c, s)
			c.mu.Lock()
			already := c.timedOut
			c.mu.Unlock()
			// One success in the window already: MinRequests-1 timeouts
			// make MinRequests counted calls at a ratio of 0.8, which
			// trips.
			for i := int(already); i < p.MinRequests-1; i++ {
				require.Empty(t, c.ev.list(), "opened after %d timeouts", i)
				require.Equal(t, vTimedOut, c.call(s.url()))
			}
			evs := c.ev.list()
			require.Len(t, evs, 1, "not open after MinRequests counted calls")
			trip := evs[0]
			assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
			assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Counted)
			assert.Equal(t, uint64(p.MinRequests-1), trip.Snapshot.Timeouts)
			assert.Equal(t, uint64(p.MinRequests-1), trip.Snapshot.Failures)
			if row.exact {
				assert.Equal(t, row.hits, s.hits.Load(), "requests at the server")
			} else {
				assert.GreaterOrEqual(t, s.hits.Load(), row.hits, "requests at the server")
			}

			recoverAfter(t, c, s, b, func() { row.heal(s) })

			c.tr.CloseIdleConnections()
			s.kill()
			check()
		})
	}
}

// Boundary: a downstream that serves one call at a time meets three
// probes at once. The one it serves passes; the others hang until
// Policy.Timeout, which fails the half-open episode and reopens the
// breaker with a doubled cooldown. A downstream that sheds the extra calls
// with 503 reopens it too when probes are strict; by default a 503 is an
// answer, and a probe that gets one passes (the documented default of
// Policy.StrictProbes), so the breaker closes.
func TestChaos_ProbesBeyondCapacityReopen(t *testing.T) {
	rows := []struct {
		name   string
		over   fault
		strict bool
		want   breaker.State
		extra  verdict // what the probes beyond capacity return
	}{
		{"hang", hang, false, breaker.Open, vTimedOut},
		{"503 strict", failWith(http.StatusServiceUnavailable), true, breaker.Open, vFailed},
		{"503 default", failWith(http.StatusServiceUnavailable), false, breaker.Closed, vFailed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			check := noLeaks(t)
			p := chaosPolicy()
			p.StrictProbes = row.strict
			c := newChaos(t, p)
			s := newChaosServer(t)
			b := c.breakerFor(s)
			s.set(failWith(http.StatusInternalServerError))
			tripAfter(t, c, s.url(), vFailed)

			s.set(limited(int64(p.Probes), p.Timeout/2, row.over))
			trip := c.ev.list()[0]
			time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
			require.Eventually(t, func() bool { return b.State() == breaker.HalfOpen }, time.Second, time.Millisecond)

			var wg sync.WaitGroup
			verdicts := make([]verdict, p.Probes)
			for i := range p.Probes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					verdicts[i] = c.call(s.url())
				}()
			}
			wg.Wait()
			got := map[verdict]int{}
			for _, v := range verdicts {
				got[v]++
			}
			assert.Equal(t, map[verdict]int{vSucceeded: 1, row.extra: p.Probes - 1}, got)
			assert.Equal(t, row.want, b.State())
			co := b.Counters()
			assert.Equal(t, int64(p.Probes), s.probes.Load(), "probes marked at the server")
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
				// The served probe's pass counts if it ends before the
				// first failure reopens the breaker.
				assert.LessOrEqual(t, co.ProbesPassed, uint64(1))
			} else {
				assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
			}
			c.check(t, b)

			c.tr.CloseIdleConnections()
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
	c := newChaos(t, p)
	s := newChaosServer(t)
	b := c.breakerFor(s)
	s.set(failWith(http.StatusInternalServerError))
	tripAfter(t, c, s.url(), vFailed)

	s.set(hang)
	trip := c.ev.list()[0]
	time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
	var wg sync.WaitGroup
	for range p.Probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.call(s.url())
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

	evs := c.ev.list()
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
	require.Equal(t, vRefused, c.call(s.url()))
	assert.Equal(t, hits, s.hits.Load(), "a refused call reached the server")

	s.kill()
	wg.Wait()
	co := b.Counters()
	assert.Equal(t, uint64(p.Probes), co.Timeouts, "the hung probes end as timeouts")
	assert.Zero(t, co.ProbesPassed+co.ProbesFailed, "a stale probe gives a verdict")
	assert.Equal(t, uint64(2), co.Opens)
	assert.Equal(t, breaker.Open, b.State())
	c.check(t, b)

	c.tr.CloseIdleConnections()
	check()
}
