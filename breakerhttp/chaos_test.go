package breakerhttp

// Chaos experiments: real servers on loopback, the real clock, and faults
// injected into the downstream while traffic flows through the Transport.
// The policy is scaled down (testutil.ChaosPolicy: sub-second window and
// cooldowns) so that each experiment takes well under a second;
// assertions are bounds with wide margins, never instants, because the
// scheduler of a loaded machine decides when a goroutine runs. The steps
// and checks that the gRPC experiments share are testutil.Chaos's.
//
// Every experiment accounts for every call: the calls it made equal the
// successes, failures, timeouts, ignored and refused calls the breaker
// counted, one by one against the test's own reading of what each call
// returned (testutil.Tally). And every experiment leaves no goroutine and
// no file descriptor behind (testutil.NoLeaks).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// limited serves one request at a time (testutil.OneAtATime): a request
// that finds the single slot taken gets over, as an overloaded server
// without a queue would treat it.
func limited(need int64, guard time.Duration, over fault) fault {
	capacity := testutil.NewOneAtATime(need, guard)
	return func(w http.ResponseWriter, r *http.Request) {
		served, leave := capacity.Enter()
		defer leave()
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
	*testutil.Killable
	fault atomic.Pointer[fault]
}

func newChaosServer(t *testing.T) *chaosServer {
	t.Helper()
	s := &chaosServer{}
	s.set(healthy)
	s.Killable = testutil.NewKillable(t, func() (func(net.Listener) error, func()) {
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
		return srv.Serve, func() { _ = srv.Close() }
	})
	return s
}

func (s *chaosServer) set(f fault) { s.fault.Store(&f) }

func (s *chaosServer) url() string { return "http://" + s.Addr() + "/" }

func (s *chaosServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.Arrive(r.Header.Get(ProbeHeader) == "1")()
	(*s.fault.Load())(w, r)
}

// verdictOf reads one call's result: a refusal; any other error (no
// response, or a body that broke off) as a timeout; else by status, as
// the Transport's documentation says it classifies.
func verdictOf(status int, err error) testutil.Verdict {
	switch {
	case errors.Is(err, breaker.ErrOpen):
		return testutil.Refused
	case err != nil:
		return testutil.TimedOut
	case status == http.StatusTooManyRequests || status >= 500:
		return testutil.Failed
	case status >= 400:
		return testutil.Ignored
	}
	return testutil.Succeeded
}

// chaos is one experiment: a client through a Transport on the real clock,
// with the policy p, calling the chaos server s.
type chaos struct {
	*fixture
	*testutil.Chaos
}

func newChaos(t *testing.T, s *chaosServer, p breaker.Policy) *chaos {
	t.Helper()
	c := &chaos{fixture: newFixtureWith(t, p, nil)}
	c.Chaos = testutil.NewChaos(t, c.group, p, &s.Load, func() testutil.Verdict { return c.call(s.url()) })
	return c
}

// breakerFor returns the group's breaker for the server's host.
func (c *chaos) breakerFor(s *chaosServer) *breaker.Breaker {
	c.t.Helper()
	b, err := c.group.Get(s.Addr())
	require.NoError(c.t, err)
	return b
}

// call sends GET url, reads the body to the end, and notes the result.
func (c *chaos) call(url string) testutil.Verdict {
	status, err := c.get(context.Background(), url)
	return c.Note(verdictOf(status, err), err)
}

// Delay injection: the downstream answers in 1.5 times Policy.CallTimeout.
// Callers keep sending (as many at once as MinRequests) until they are
// refused. The breaker opens within one window of the fault, on the
// error-ratio rule, and every failure in the window that tripped it is a
// timeout.
func TestChaos_DelayOpensWithinTheWindow(t *testing.T) {
	check := testutil.NoLeaks(t)
	p := testutil.DelayPolicy()
	s := newChaosServer(t)
	c := newChaos(t, s, p)
	b := c.breakerFor(s)
	s.set(delayed(p.CallTimeout * 3 / 2))

	start := time.Now()
	c.CallersUntilRefused(p.MinRequests, 5*time.Second)
	c.CheckOpenedByTimeouts(b, start)

	c.tr.CloseIdleConnections()
	s.Kill()
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
			check := testutil.NoLeaks(t)
			s := newChaosServer(t)
			c := newChaos(t, s, testutil.ChaosPolicy())
			b := c.breakerFor(s)
			s.set(failWith(code))

			c.TripAfter(testutil.Failed)
			c.RecoverAfter(b, func() { s.set(healthy) })

			c.tr.CloseIdleConnections()
			s.Kill()
			check()
		})
	}
}

// Faults of the connection rather than the answer: the server killed in
// the middle of a call and started again on the same port; connections
// reset (RST) instead of answered; a body cut short of its Content-Length.
// Each is a timeout (nothing, or only part of an answer, came back); the
// breaker opens on exactly MinRequests of them and recovers when the fault
// ends.
func TestChaos_ConnectionFaults(t *testing.T) {
	p := testutil.ChaosPolicy()
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
				hits := s.Hits()
				res := make(chan testutil.Verdict, 1)
				go func() { res <- c.call(s.url()) }()
				// Kill once the call is in the server's hands.
				for s.Hits() == hits {
					time.Sleep(time.Millisecond)
				}
				s.Kill()
				require.Equal(t, testutil.TimedOut, <-res)
				// The calls after it find the port closed.
			},
			heal: func(s *chaosServer) {
				s.set(healthy)
				s.Start()
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
			check := testutil.NoLeaks(t)
			s := newChaosServer(t)
			c := newChaos(t, s, p)
			b := c.breakerFor(s)
			// A healthy call first, so the fault meets a kept-alive
			// connection.
			require.Equal(t, testutil.Succeeded, c.call(s.url()))

			row.inject(t, c, s)
			// One success in the window already: MinRequests-1 timeouts
			// make MinRequests counted calls at a ratio of 0.8, which
			// trips.
			for i := int(c.Calls().TimedOut); i < p.MinRequests-1; i++ {
				require.Empty(t, c.Events.List(), "opened after %d timeouts", i)
				require.Equal(t, testutil.TimedOut, c.call(s.url()))
			}
			evs := c.Events.List()
			require.Len(t, evs, 1, "not open after MinRequests counted calls")
			trip := evs[0]
			assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
			assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Counted)
			assert.Equal(t, uint64(p.MinRequests-1), trip.Snapshot.Timeouts)
			assert.Equal(t, uint64(p.MinRequests-1), trip.Snapshot.Failures)
			if row.exact {
				assert.Equal(t, row.hits, s.Hits(), "requests at the server")
			} else {
				assert.GreaterOrEqual(t, s.Hits(), row.hits, "requests at the server")
			}

			c.RecoverAfter(b, func() { row.heal(s) })

			c.tr.CloseIdleConnections()
			s.Kill()
			check()
		})
	}
}

// Boundary: a downstream that serves one call at a time meets three
// probes at once. The one it serves passes; the others hang until
// Policy.CallTimeout, which fails the half-open episode and reopens the
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
		extra  testutil.Verdict // what the probes beyond capacity return
	}{
		{"hang", hang, false, breaker.Open, testutil.TimedOut},
		{"503 strict", failWith(http.StatusServiceUnavailable), true, breaker.Open, testutil.Failed},
		{"503 default", failWith(http.StatusServiceUnavailable), false, breaker.Closed, testutil.Failed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			check := testutil.NoLeaks(t)
			p := testutil.ChaosPolicy()
			p.StrictProbes = row.strict
			s := newChaosServer(t)
			c := newChaos(t, s, p)
			b := c.breakerFor(s)
			s.set(failWith(http.StatusInternalServerError))
			c.TripAfter(testutil.Failed)

			s.set(limited(int64(p.Probes), p.CallTimeout/2, row.over))
			c.CheckProbesBeyondCapacity(b, row.want, row.extra)

			c.tr.CloseIdleConnections()
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
	c := newChaos(t, s, p)
	b := c.breakerFor(s)
	s.set(failWith(http.StatusInternalServerError))
	c.TripAfter(testutil.Failed)

	s.set(hang)
	c.CheckHungProbesReopen(b, func() testutil.Verdict { return c.call(s.url()) }, s.Kill)

	c.tr.CloseIdleConnections()
	check()
}
