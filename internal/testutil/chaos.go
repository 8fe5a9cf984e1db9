package testutil

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Load counts what reaches a chaos server: the requests, those of them
// marked as probes, and the handlers still running. It is safe for
// concurrent use; the zero value counts nothing yet.
type Load struct {
	hits, probes, active atomic.Int64
}

// Arrive counts a request as its handler starts, as a probe too if probe
// is true. The handler calls leave when it returns.
func (l *Load) Arrive(probe bool) (leave func()) {
	l.active.Add(1)
	l.hits.Add(1)
	if probe {
		l.probes.Add(1)
	}
	return func() { l.active.Add(-1) }
}

// Hits returns the requests that have reached the server.
func (l *Load) Hits() int64 { return l.hits.Load() }

// Probes returns the requests that reached the server marked as probes.
func (l *Load) Probes() int64 { return l.probes.Load() }

// WaitIdle returns once no handler is running, and fails t if one still
// is after within.
func (l *Load) WaitIdle(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for l.active.Load() > 0 {
		require.True(t, time.Now().Before(deadline), "%d handlers still running after %v", l.active.Load(), within)
		time.Sleep(time.Millisecond)
	}
}

// Killable is a server on a loopback port that a test can kill, in the
// middle of whatever its connections carry, and start again on the same
// port. It counts what reaches its handlers (Load); the handlers call
// Arrive.
type Killable struct {
	Load
	t     testing.TB
	addr  string
	build func() (serve func(net.Listener) error, stop func())

	mu     sync.Mutex
	stop   func()
	served chan struct{}
}

// NewKillable starts a server on a loopback port. build makes the server,
// anew for each start: it returns the server's Serve method and the
// function that closes its listener and every connection at once. The
// server is killed when the test ends if the test has not killed it.
func NewKillable(t testing.TB, build func() (serve func(net.Listener) error, stop func())) *Killable {
	t.Helper()
	k := &Killable{t: t, addr: "127.0.0.1:0", build: build}
	k.Start()
	// Experiments kill their servers themselves, to count what is left
	// after; this stops one that a failed experiment left running.
	t.Cleanup(k.Kill)
	return k
}

// Addr returns the server's address, the same after every start.
func (k *Killable) Addr() string { return k.addr }

// Start listens on the server's address and serves on it.
func (k *Killable) Start() {
	k.t.Helper()
	l, err := net.Listen("tcp", k.addr)
	require.NoError(k.t, err)
	k.addr = l.Addr().String()
	serve, stop := k.build()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = serve(l)
	}()
	k.mu.Lock()
	k.stop, k.served = stop, served
	k.mu.Unlock()
}

// Kill closes the listener and every connection at once, and returns when
// the server and its handlers have stopped (closing a server does not
// wait for its handlers; every fault returns once its connection is
// gone). Killing a stopped server does nothing.
func (k *Killable) Kill() {
	k.t.Helper()
	k.mu.Lock()
	stop, served := k.stop, k.served
	k.stop = nil
	k.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-served
	k.WaitIdle(k.t, 5*time.Second)
}

// OneAtATime is the capacity of a server that serves one request at a
// time and has no queue. Every request first waits until need requests
// have arrived, or for guard (which must be well inside Policy.CallTimeout),
// so that they are all in flight together whatever order the scheduler
// runs them in. It is safe for concurrent use.
type OneAtATime struct {
	need    int64
	guard   time.Duration
	slot    chan struct{}
	arrived atomic.Int64
	all     chan struct{}
}

// NewOneAtATime returns a capacity of one request at a time whose
// requests wait for need of them, or for guard.
func NewOneAtATime(need int64, guard time.Duration) *OneAtATime {
	return &OneAtATime{need: need, guard: guard, slot: make(chan struct{}, 1), all: make(chan struct{})}
}

// Enter admits one request: served says whether it took the single slot;
// a request that did not is one an overloaded server turns away. The
// handler calls leave when it returns.
func (o *OneAtATime) Enter() (served bool, leave func()) {
	select {
	case o.slot <- struct{}{}:
		served = true
	default:
	}
	if o.arrived.Add(1) == o.need {
		close(o.all)
	}
	t := time.NewTimer(o.guard)
	select {
	case <-o.all:
	case <-t.C:
	}
	t.Stop()
	if !served {
		return false, func() {}
	}
	return true, func() { <-o.slot }
}

// Chaos is one chaos experiment: calls through a breaker of a group on
// the real clock to a server on loopback whose faults the test injects.
// It accounts for every call (the Tally, held against the breaker's
// counters by Check) and records the group's transitions (Events). Its
// methods are the steps and checks that the HTTP and gRPC experiments
// share; their bounds are wide, never instants, because the scheduler of
// a loaded machine decides when a goroutine runs.
type Chaos struct {
	T      testing.TB
	Policy breaker.Policy // the group's policy
	Tally
	Events Events
	// Server counts what reached the server.
	Server *Load
	// Call makes one call to the server through the breaker, notes it in
	// the tally and returns its verdict.
	Call func() Verdict
}

// NewChaos returns an experiment on g, whose breakers run p, that calls
// the server counted by server with call, and records g's transitions
// until the test ends.
func NewChaos(t testing.TB, g *breaker.Group, p breaker.Policy, server *Load, call func() Verdict) *Chaos {
	t.Helper()
	c := &Chaos{T: t, Policy: p, Server: server, Call: call}
	t.Cleanup(g.Subscribe(c.Events.Record))
	return c
}

// UntilAdmitted calls every 5 ms until a call is admitted, and returns
// what that call returned; it fails the test if none is within within.
func (c *Chaos) UntilAdmitted(within time.Duration) Verdict {
	c.T.Helper()
	deadline := time.Now().Add(within)
	for {
		if v := c.Call(); v != Refused {
			return v
		}
		require.True(c.T, time.Now().Before(deadline), "no call admitted within %v", within)
		time.Sleep(5 * time.Millisecond)
	}
}

// CallersUntilRefused has n callers call at once, each calling again as
// soon as its call returns, until a call of its own is refused or within
// has passed; it returns once they all have stopped.
func (c *Chaos) CallersUntilRefused(n int, within time.Duration) {
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < within {
				if c.Call() == Refused {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// CheckOpenedByTimeouts checks the experiment of a downstream that
// answers later than Policy.CallTimeout from start on: the breaker opened on
// the error-ratio rule, no sooner than one timeout after start and within
// one window of it; every call it counted was a timeout; the test's calls
// all timed out or were refused, some refused; and b counted them all.
func (c *Chaos) CheckOpenedByTimeouts(b *breaker.Breaker, start time.Time) {
	t, p := c.T, c.Policy
	t.Helper()
	evs := c.Events.List()
	require.NotEmpty(t, evs)
	trip := evs[0]
	assert.Equal(t, breaker.Closed, trip.From)
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.GreaterOrEqual(t, trip.Snapshot.Counted, uint64(p.MinRequests))
	assert.Equal(t, trip.Snapshot.Counted, trip.Snapshot.Timeouts, "every counted call was a timeout")
	assert.Equal(t, trip.Snapshot.Failures, trip.Snapshot.Timeouts, "every failure was a timeout")
	took := trip.Time.Sub(start)
	assert.GreaterOrEqual(t, took, p.CallTimeout, "opened before any call could time out")
	assert.Less(t, took, p.Window, "opened later than one window after the fault")

	n := c.Calls()
	assert.Zero(t, n.Succeeded+n.Failed+n.Ignored, "only timeouts and refusals")
	assert.NotZero(t, n.Refused)
	c.Check(t, b)
}

// TripAfter makes MinRequests calls one at a time, each of which must
// return want (Failed or TimedOut), and checks that the breaker stays
// closed for the first MinRequests-1 and opens right after the last, on
// the error-ratio rule, with a cooldown of OpenFor within its jitter. It
// returns the trip.
func (c *Chaos) TripAfter(want Verdict) breaker.Event {
	t, p := c.T, c.Policy
	t.Helper()
	for i := 1; i <= p.MinRequests; i++ {
		require.Equal(t, want, c.Call(), "call %d: %v", i, c.Last())
		evs := c.Events.List()
		if i < p.MinRequests {
			require.Empty(t, evs, "opened after %d calls", i)
		} else {
			require.Len(t, evs, 1, "not open after %d calls", i)
		}
	}
	trip := c.Events.List()[0]
	assert.Equal(t, breaker.Open, trip.To)
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)
	assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Counted)
	assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Failures)
	if want == TimedOut {
		assert.Equal(t, uint64(p.MinRequests), trip.Snapshot.Timeouts)
	} else {
		assert.Zero(t, trip.Snapshot.Timeouts)
	}
	lo, hi := JitterBounds(p.OpenFor, p.Jitter)
	assert.GreaterOrEqual(t, trip.Cooldown, lo)
	assert.LessOrEqual(t, trip.Cooldown, hi)
	return trip
}

// RecoverAfter ends the fault of the open breaker b with heal, and checks
// the recovery: calls are refused until the cooldown has passed; the
// first call after it is admitted soon after (the test asks every 5 ms,
// so the transition's time is bounded below by the cooldown and above by
// the cooldown plus polling and scheduling); Policy.Probes calls, all
// marked as probes at the server, close b; and the calls after them reach
// the server unmarked.
func (c *Chaos) RecoverAfter(b *breaker.Breaker, heal func()) {
	t, p := c.T, c.Policy
	t.Helper()
	trip := c.Events.List()[0]
	heal()
	hits, probes := c.Server.Hits(), c.Server.Probes()

	require.Equal(t, Succeeded, c.UntilAdmitted(5*time.Second), "%v", c.Last())
	assert.NotZero(t, c.Calls().Refused, "admitted at once")
	evs := c.Events.List()
	require.GreaterOrEqual(t, len(evs), 2)
	half := evs[1]
	assert.Equal(t, breaker.HalfOpen, half.To)
	assert.Equal(t, breaker.ReasonCooldown, half.Reason)
	assert.GreaterOrEqual(t, half.Time.Sub(trip.Time), trip.Cooldown, "half-open before the cooldown ended")
	assert.Less(t, half.Time.Sub(trip.Time), trip.Cooldown+Slack, "half-open long after the cooldown %v", trip.Cooldown)

	for i := 1; i < p.Probes; i++ {
		require.Equal(t, Succeeded, c.Call(), "probe %d: %v", i+1, c.Last())
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, int64(p.Probes), c.Server.Probes()-probes, "probes marked at the server")

	// Traffic returns: every call succeeds and reaches the server.
	const more = 5
	for i := 0; i < more; i++ {
		require.Equal(t, Succeeded, c.Call(), "%v", c.Last())
	}
	assert.Equal(t, int64(p.Probes+more), c.Server.Hits()-hits, "calls that reached the server")
	assert.Equal(t, int64(p.Probes), c.Server.Probes()-probes, "ordinary calls marked as probes")
	co := b.Counters()
	assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
	assert.Equal(t, uint64(1), co.Opens)
	c.Check(t, b)
}

// untilHalfOpen sleeps until the cooldown of the first trip has passed
// and waits for b to turn half-open.
func (c *Chaos) untilHalfOpen(b *breaker.Breaker) {
	c.T.Helper()
	trip := c.Events.List()[0]
	time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
	require.Eventually(c.T, func() bool { return b.State() == breaker.HalfOpen }, time.Second, time.Millisecond)
}

// CheckProbesBeyondCapacity plays the boundary of a server that serves
// one call at a time (OneAtATime) meeting Policy.Probes probes at once,
// once the trip's cooldown has passed. The one it serves passes; the
// others return extra. If want is Open they failed the half-open episode,
// which reopens b with a doubled cooldown (the first failure gives the
// verdict, and the served probe's pass counts only if it ended before
// that); if want is Closed they all passed.
func (c *Chaos) CheckProbesBeyondCapacity(b *breaker.Breaker, want breaker.State, extra Verdict) {
	t, p := c.T, c.Policy
	t.Helper()
	c.untilHalfOpen(b)
	var wg sync.WaitGroup
	verdicts := make([]Verdict, p.Probes)
	for i := range p.Probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			verdicts[i] = c.Call()
		}()
	}
	wg.Wait()
	got := map[Verdict]int{}
	for _, v := range verdicts {
		got[v]++
	}
	assert.Equal(t, map[Verdict]int{Succeeded: 1, extra: p.Probes - 1}, got)
	assert.Equal(t, int64(p.Probes), c.Server.Probes(), "probes marked at the server")
	co := b.Counters()
	if want == breaker.Open {
		// The reopen is the last transition to Open. On a loaded machine
		// the probes can return after its cooldown has passed, so the
		// breaker may be half-open again by now, but never sooner.
		evs := c.Events.List()
		var last breaker.Event
		for _, e := range evs {
			if e.To == breaker.Open {
				last = e
			}
		}
		if b.State() != breaker.Open {
			assert.GreaterOrEqual(t, time.Since(last.Time), last.Cooldown, "left open before its cooldown")
		}
		assert.Equal(t, breaker.ReasonProbeFailed, last.Reason)
		assert.Equal(t, 1, last.Doublings, "cooldown doubled")
		lo, hi := JitterBounds(2*p.OpenFor, p.Jitter)
		assert.GreaterOrEqual(t, last.Cooldown, lo)
		assert.LessOrEqual(t, last.Cooldown, hi)
		assert.Equal(t, uint64(2), co.Opens)
		assert.Equal(t, uint64(1), co.ProbesFailed, "only the first failed probe gives a verdict")
		assert.LessOrEqual(t, co.ProbesPassed, uint64(1))
	} else {
		assert.Equal(t, want, b.State())
		assert.Equal(t, uint64(p.Probes), co.ProbesPassed)
	}
	c.Check(t, b)
}

// CheckHungProbesReopen plays probes that hang, on a breaker b with no
// Policy.CallTimeout to cut them, tripped by TripAfter and with a server that
// now hangs: once the cooldown has passed, Policy.Probes callers call at
// once with probe. Once every probe slot is taken and no verdict has come
// for one cooldown, b reopens (probe_timeout) and refuses calls while the
// probes still hang. Then kill stops the server, which ends the probes:
// they are counted as timeouts, but their episode is over and they change
// nothing.
func (c *Chaos) CheckHungProbesReopen(b *breaker.Breaker, probe func() Verdict, kill func()) {
	t, p := c.T, c.Policy
	t.Helper()
	trip := c.Events.List()[0]
	time.Sleep(time.Until(trip.Time.Add(trip.Cooldown)))
	var wg sync.WaitGroup
	for range p.Probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probe()
		}()
	}
	// At least: a client may retry a request that met a connection the
	// server had just dropped, so the server can see a request twice.
	// The bound is generous: on a loaded machine three goroutines can take
	// a while to reach a server.
	if !assert.Eventually(t, func() bool { return c.Server.Hits() >= int64(p.MinRequests+p.Probes) },
		15*time.Second, time.Millisecond) {
		t.Fatalf("probes at the server: %d hits, counters %+v", c.Server.Hits(), b.Counters())
	}
	probesAt := time.Now()
	require.Eventually(t, func() bool { return b.State() == breaker.Open }, 5*time.Second, time.Millisecond)

	evs := c.Events.List()
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
	assert.Less(t, reopen.Time.Sub(due), Slack, "reopened long after one cooldown")
	hits := c.Server.Hits()
	require.Equal(t, Refused, c.Call())
	assert.Equal(t, hits, c.Server.Hits(), "a refused call reached the server")

	kill()
	wg.Wait()
	co := b.Counters()
	assert.Equal(t, uint64(p.Probes), co.Timeouts, "the hung probes end as timeouts")
	assert.Zero(t, co.ProbesPassed+co.ProbesFailed, "a stale probe gives a verdict")
	assert.Equal(t, uint64(2), co.Opens)
	assert.Equal(t, breaker.Open, b.State())
	c.Check(t, b)
}
