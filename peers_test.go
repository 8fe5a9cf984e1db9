package breaker

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/govkit/breaker/internal/timebase"
)

// Regression tests for bugs reported against other circuit-breaker
// libraries. Each test names the library and the fault, links the report,
// and shows that the same scenario cannot go wrong here. docs/regressions.md
// lists them with a line on how the design avoids each one.

// peerWait bounds every wait on another goroutine in these tests. Nothing
// here sleeps to let time pass: the clock is a mock; the bound is only there
// so that a deadlock fails the test instead of hanging it.
const peerWait = 10 * time.Second

// waitFor fails the test if ch is not closed (or sent on) within peerWait.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(peerWait):
		t.Fatalf("%s: no progress within %v (deadlock?)", what, peerWait)
	}
	var zero T
	return zero
}

// spinUntil yields until cond holds, failing the test after peerWait.
func spinUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(peerWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, peerWait)
		}
		runtime.Gosched()
	}
}

// halfOpen trips a fresh harness breaker and moves the clock to the end of
// its first cooldown.
func (h *harness) halfOpen() {
	h.t.Helper()
	h.trip()
	h.add(h.b.Policy().OpenFor)
	h.requireState(HalfOpen)
}

// probeCall makes one call returning err and reports whether it ran as a
// probe. It fails the test if the call is refused.
func (h *harness) probeCall(err error) bool {
	h.t.Helper()
	probe := false
	got := h.b.Do(context.Background(), func(ctx context.Context) error {
		probe = IsProbe(ctx)
		return err
	})
	require.NotErrorIs(h.t, got, ErrOpen, "the call was refused")
	return probe
}

// gobreaker ran its state-change hook while holding the breaker's mutex, so
// a hook that read the counts or state deadlocked the breaker for good.
// https://github.com/sony/gobreaker/pull/119
func TestPeer_GobreakerStateChangeCallbackDeadlock(t *testing.T) {
	t.Run("breaker hook", func(t *testing.T) {
		clk := clock.NewMock()
		var b *Breaker
		var seen []string
		hook := func(e Event) {
			// Every read and control method, from inside the hook.
			_ = b.State()
			_ = b.Counters()
			_ = b.Snapshot()
			_, _ = openSince(b)
			_ = b.Status()
			seen = append(seen, e.From.String()+">"+e.To.String())
			if e.To == Open {
				assert.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return nil }), ErrOpen)
				b.Reset() // a transition caused by the hook itself
			}
		}
		var err error
		b, err = New("inventory.GetStock", DefaultPolicy(), WithClock(clk), OnTransition(hook))
		require.NoError(t, err)

		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < defaultMinRequests; i++ {
				_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
			}
		}()
		waitFor(t, done, "tripping a breaker whose hook calls back")
		assert.Equal(t, []string{"closed>open", "open>closed"}, seen)
		assert.Equal(t, Closed, b.State())
	})

	t.Run("group subscriber", func(t *testing.T) {
		clk := clock.NewMock()
		g, err := NewGroup(GroupConfig{}, WithClock(clk))
		require.NoError(t, err)
		var got atomic.Int32
		g.Subscribe(func(_ *Breaker, e Event) {
			b, err := g.Get(e.Name)
			if assert.NoError(t, err) {
				_ = b.State()
			}
			g.Range(func(_ string, b *Breaker) bool { // what a snapshot and an alert read
				_ = b.Status()
				_, _ = openSince(b)
				return true
			})
			_ = g.Now()
			_ = g.Len()
			assert.NoError(t, g.SetPolicies(g.Policies()))
			got.Add(1)
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < defaultMinRequests; i++ {
				_ = g.Do(context.Background(), "orders.Create", func(context.Context) error { return errBoom })
			}
		}()
		waitFor(t, done, "tripping a breaker whose group subscriber calls back")
		assert.Equal(t, int32(1), got.Load())
	})
}

// The fix proposed for the gobreaker deadlock ran the hook in its own
// goroutine, which lets two transitions reach the hook concurrently and out
// of order. Here one goroutine delivers a breaker's events at a time, in the
// order the transitions happened, so every event starts where the previous
// one ended.
// https://github.com/sony/gobreaker/pull/39
func TestPeer_GobreakerAsyncCallbackReordersEvents(t *testing.T) {
	clk := clock.NewMock()
	var (
		mu      sync.Mutex
		events  []Event
		inHook  atomic.Int32
		overlap atomic.Bool
	)
	b, err := New("inventory.GetStock", policy(func(p *Policy) { p.MinRequests = 5; p.Probes = 1 }),
		WithClock(clk), WithRand(func() float64 { return 0.5 }),
		OnTransition(func(e Event) {
			if inHook.Add(1) > 1 {
				overlap.Store(true)
			}
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			runtime.Gosched() // widen the window for a second deliverer
			inHook.Add(-1)
		}))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				switch (g + i) % 5 {
				case 0:
					_ = b.SetMode(ModeForcedOpen)
				case 1:
					_ = b.SetMode(ModeAuto) // forced open → half-open
				case 2:
					b.Reset()
				case 3:
					_ = b.Do(context.Background(), func(context.Context) error { return nil })
				case 4:
					_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
				}
			}
		}(g)
	}
	waitFor(t, chanOf(&wg), "concurrent transitions")

	assert.False(t, overlap.Load(), "the hook ran on two goroutines at once")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, events)
	assert.Equal(t, Closed, events[0].From)
	for i := 1; i < len(events); i++ {
		require.Equal(t, events[i-1].To, events[i].From, "event %d does not start where event %d ended", i, i-1)
	}
	assert.Equal(t, events[len(events)-1].To, b.state.Load().state(), "the last event is not the current state")
}

// chanOf turns a WaitGroup into a channel closed when it is done.
func chanOf(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}

// gobreaker clears its counts on every transition, so the counts that
// tripped the breaker are gone by the time anyone looks: metrics and logs
// cannot say why it opened.
// https://github.com/sony/gobreaker/issues/72
func TestPeer_GobreakerCountsClearedOnTripHideTheCause(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(10, nil)
	h.calls(10, errBoom)
	h.requireState(Open)
	trip := Snapshot{Counted: 20, Failures: 10}

	ev := h.eventLog()
	require.Len(t, ev, 1)
	assert.Equal(t, trip, ev[0].Snapshot, "the event carries the window that tripped it")

	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, trip, oe.Trip.Window, "every refusal says why")
	assert.Equal(t, trip, h.b.Snapshot(), "the window still shows the calls that tripped it")

	// Recover, then check nothing of the outage was forgotten.
	h.add(defaultOpenFor)
	for i := 0; i < defaultProbes; i++ {
		h.probeCall(nil)
	}
	h.requireState(Closed)
	c := h.b.Counters()
	assert.Equal(t, uint64(10), c.Failures, "monotonic counts survive the transitions")
	assert.Equal(t, uint64(10+defaultProbes), c.Successes)
	assert.Equal(t, uint64(1), c.Opens)
}

// gobreaker's closed state counts over a fixed interval and drops every
// count at its end, so just after the boundary a handful of calls is judged
// alone: 20 failures read as 100% although the last five seconds also held
// 90 successes.
// https://github.com/sony/gobreaker/issues/21
func TestPeer_GobreakerIntervalResetJudgesOnTinySample(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	for i := 0; i < defaultBuckets; i++ { // 10 successes in each 500 ms bucket, 0 to 5 s
		h.at(time.Duration(i) * 500 * time.Millisecond)
		h.calls(10, nil)
	}
	h.at(defaultWindow) // the boundary a fixed interval would reset at
	h.calls(20, errBoom)
	h.requireState(Closed)
	// The window slid by one bucket: the first bucket's 10 left, 90 stayed.
	assert.Equal(t, Snapshot{Counted: 110, Failures: 20}, h.b.Snapshot())
}

// Old Go circuit breakers reset only the current bucket when a call came
// in, so after an idle gap longer than the window the old buckets still
// counted: ten-second-old failures tripped the breaker.
// https://github.com/rubyist/circuitbreaker/pull/36
func TestPeer_RubyistWindowStaleAfterIdleGap(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(defaultMinRequests-1, errBoom)
	h.at(time.Minute) // idle far longer than the window
	h.calls(1, errBoom)
	h.requireState(Closed)
	assert.Equal(t, Snapshot{Counted: 1, Failures: 1}, h.b.Snapshot())
	h.calls(defaultMinRequests-2, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
}

// resilience4j admitted more calls than permittedNumberOfCallsInHalfOpenState
// when many threads arrived as the cooldown ended: several of them saw the
// state as open-and-expired and each became a probe.
// https://github.com/resilience4j/resilience4j/issues/1432
func TestPeer_Resilience4jThunderingHerdAtHalfOpen(t *testing.T) {
	const callers = 32
	h := newHarness(t, DefaultPolicy())
	for round := 0; round < 10; round++ {
		h.b.Reset()
		h.trip()
		h.add(defaultOpenFor) // every caller arrives as the cooldown ends

		var admitted, refused, notProbe atomic.Int32
		release := make(chan struct{})
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := h.b.Do(context.Background(), func(ctx context.Context) error {
					if !IsProbe(ctx) {
						notProbe.Add(1)
					}
					admitted.Add(1)
					<-release
					return nil
				})
				if errors.Is(err, ErrOpen) {
					refused.Add(1)
				}
			}()
		}
		close(start)
		spinUntil(t, func() bool { return admitted.Load()+refused.Load() == callers }, "every caller admitted or refused")
		assert.Equal(t, int32(defaultProbes), admitted.Load(), "round %d: probes admitted", round)
		assert.Equal(t, int32(callers-defaultProbes), refused.Load(), "round %d: calls refused", round)
		assert.Zero(t, notProbe.Load(), "round %d: a half-open call was not marked as a probe", round)
		close(release)
		waitFor(t, chanOf(&wg), "probes returning")
		h.requireState(Closed)
	}
}

// Polly's half-open state let every call through while the first trial
// call was still running; against a hanging downstream that is a full
// cooldown's worth of traffic at once.
// https://github.com/App-vNext/Polly/issues/216
func TestPeer_PollyHalfOpenAdmitsMoreWhileProbePending(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.halfOpen()
	var probes []*blocked
	for i := 0; i < defaultProbes; i++ {
		bl := h.start(context.Background())
		require.True(t, bl.admitted && bl.probe, "probe %d", i)
		probes = append(probes, bl)
	}
	before := h.b.Counters().Rejected
	for step := 0; step < 10; step++ { // ten seconds of traffic while the probes hang
		for i := 0; i < 5; i++ {
			require.ErrorIs(t, h.call(nil), ErrOpen)
		}
		h.add(time.Second)
		h.requireState(HalfOpen)
	}
	assert.Equal(t, before+50, h.b.Counters().Rejected)
	for _, bl := range probes {
		require.NoError(t, bl.finish(nil))
	}
	h.requireState(Closed)
}

// In resilience4j an ignored exception on the last half-open call neither
// recorded a result nor gave its permission back, so the breaker stayed
// half-open with no permits left, refusing everything for good.
// https://github.com/resilience4j/resilience4j/issues/544
func TestPeer_Resilience4jIgnoredErrorWedgesHalfOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.halfOpen()
	require.True(t, h.probeCall(nil))
	require.True(t, h.probeCall(nil))
	require.True(t, h.probeCall(Ignore(errBoom)), "the last probe ends with an ignored error")
	h.requireState(HalfOpen)
	c := h.b.Counters()
	assert.Equal(t, uint64(2), c.ProbesPassed)
	assert.Zero(t, c.ProbesFailed)
	assert.Equal(t, uint64(1), c.Ignored)
	require.True(t, h.probeCall(nil), "the freed slot goes to the next call")
	h.requireState(Closed)
}

// A Polly user's HTTP timeouts (an exception the breaker did not handle)
// still used up the single half-open trial; with another library's
// two-outcome model the same unhandled error counts as a success and closes
// the breaker. An ignored outcome must do neither.
// https://github.com/App-vNext/Polly/issues/311
func TestPeer_PollyUnhandledErrorCountsAsTheHalfOpenAttempt(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	h.halfOpen()
	for i := 0; i < 5; i++ {
		require.True(t, h.probeCall(Ignore(errBoom)), "ignored probe %d", i)
		h.requireState(HalfOpen) // neither closed nor reopened
	}
	c := h.b.Counters()
	assert.Zero(t, c.ProbesPassed, "an ignored outcome passed a probe")
	assert.Zero(t, c.ProbesFailed, "an ignored outcome failed a probe")
	require.True(t, h.probeCall(nil))
	h.requireState(Closed)
}

// Polly v8: a probe that ended with an unhandled exception left the breaker
// half-open, and no further probe was ever allowed. Here the probe is a
// two-step call whose caller gave up: no verdict, and the slot comes back.
// https://github.com/App-vNext/Polly/issues/1979
func TestPeer_PollyUnhandledProbeResultWedgesHalfOpen(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	h.halfOpen()
	ctx, cancel := context.WithCancel(context.Background())
	call, done, err := h.b.Allow(ctx)
	require.NoError(t, err)
	require.True(t, IsProbe(call))
	_, _, err = h.b.Allow(context.Background())
	require.ErrorIs(t, err, ErrOpen, "the only slot is taken")
	cancel()
	done(context.Canceled) // the caller's own cancellation: says nothing of the downstream
	h.requireState(HalfOpen)
	assert.Equal(t, uint64(1), h.b.Counters().Ignored)

	call, done, err = h.b.Allow(context.Background())
	require.NoError(t, err, "the slot was not given back")
	require.True(t, IsProbe(call))
	done(nil)
	h.requireState(Closed)
}

// A call started while Polly's breaker was closed could return after it had
// opened and gone half-open, and its result then closed or reopened the
// breaker as if it were the trial call.
// https://github.com/App-vNext/Polly/issues/217
func TestPeer_PollyOverhangingCallResolvesHalfOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	slowOK := h.start(context.Background())
	slowBad := h.start(context.Background())
	require.False(t, slowOK.probe)
	h.halfOpen()

	require.NoError(t, slowOK.finish(nil))
	h.requireState(HalfOpen)
	require.ErrorIs(t, slowBad.finish(errBoom), errBoom)
	h.requireState(HalfOpen)
	c := h.b.Counters()
	assert.Zero(t, c.ProbesPassed, "a call from the closed state passed a probe")
	assert.Zero(t, c.ProbesFailed, "a call from the closed state failed a probe")

	for i := 0; i < defaultProbes-1; i++ {
		require.True(t, h.probeCall(nil))
		h.requireState(HalfOpen) // still one probe short
	}
	require.True(t, h.probeCall(nil))
	h.requireState(Closed)
	assert.Equal(t, []string{"closed>open:error_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}, h.transitions())
}

// Failures of slow calls that returned after Polly's breaker had opened
// fired its onBreak delegate again, once per late failure, for the same
// outage.
// https://github.com/App-vNext/Polly/issues/219
func TestPeer_PollyOnBreakRepeatedByLateFailures(t *testing.T) {
	t.Run("late failures", func(t *testing.T) {
		h := newHarness(t, DefaultPolicy())
		var late []*blocked
		for i := 0; i < 5; i++ {
			late = append(late, h.start(context.Background()))
		}
		h.trip()
		for _, bl := range late {
			require.ErrorIs(t, bl.finish(errBoom), errBoom)
		}
		h.requireState(Open)
		assert.Equal(t, []string{"closed>open:error_ratio"}, h.transitions())
		c := h.b.Counters()
		assert.Equal(t, uint64(1), c.Opens)
		assert.Equal(t, uint64(defaultMinRequests+5), c.Failures, "late failures still count in the metrics")
	})
	t.Run("forcing open an open breaker", func(t *testing.T) {
		h := newHarness(t, DefaultPolicy())
		h.trip()
		require.NoError(t, h.b.SetMode(ModeForcedOpen))
		assert.Equal(t, []string{"closed>open:error_ratio"}, h.transitions(), "no second break event")
		assert.Equal(t, uint64(1), h.b.Counters().Opens, "an open breaker forced open has not opened again")
	})
}

// hystrix-go returned to the caller when a command timed out but left the
// command's function running in its own goroutine, which never stopped if
// the function ignored its deadline.
// https://github.com/afex/hystrix-go/issues/81
func TestPeer_HystrixGoTimeoutLeavesRunFuncRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second }))
	in := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	var deadlineFired atomic.Bool
	go func() {
		done <- h.b.Do(context.Background(), func(ctx context.Context) error {
			close(in)
			<-release // ignores ctx
			deadlineFired.Store(ctx.Err() != nil)
			return nil
		})
	}()
	waitFor(t, in, "call admitted")
	h.add(2 * time.Second) // past Policy.CallTimeout
	select {
	case <-done:
		t.Fatal("Do returned while its function was still running")
	default:
	}
	close(release)
	require.NoError(t, waitFor(t, done, "Do returning after fn"), "Do returns fn's error unchanged")
	assert.True(t, deadlineFired.Load(), "the call's context carried the Policy.CallTimeout deadline")
	assert.Equal(t, uint64(1), h.b.Counters().Timeouts, "a late success is a timeout")
	assert.Equal(t, Snapshot{Counted: 1, Failures: 1, Timeouts: 1}, h.b.Snapshot())
	goleak.VerifyNone(t, ignore)
}

// hystrix-go starts monitor goroutines for every circuit, and they were
// seen to pile up under load and never exit. A breaker here has no
// goroutine at all, however many there are and whatever their state.
// https://github.com/afex/hystrix-go/issues/95
func TestPeer_HystrixGoMonitorGoroutinePerCircuit(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	clk := clock.NewMock()
	g, err := NewGroup(GroupConfig{IdleAfter: time.Minute}, WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = "orders.Create@10.0." + itoa(uint64(i/250)) + "." + itoa(uint64(i%250))
		for j := 0; j < defaultMinRequests; j++ {
			_ = g.Do(ctx, keys[i], func(context.Context) error { return errBoom })
		}
	}
	assert.Equal(t, 500, g.Len())
	for _, k := range keys {
		b, err := g.Get(k)
		require.NoError(t, err)
		require.Equal(t, Open, b.State(), k)
	}
	clk.Add(defaultOpenFor)
	for _, k := range keys[:100] {
		_ = g.Do(ctx, k, func(context.Context) error { return nil }) // probes
	}
	goleak.VerifyNone(t, ignore) // no goroutine for 500 breakers, open, half-open or closed
}

// hystrix-go read the circuit's open flag without a lock while another
// goroutine set it: a data race, and decisions made on a torn state. Run
// under -race; the totals must also add up exactly once the calls are done.
// https://github.com/afex/hystrix-go/pull/71
func TestPeer_HystrixGoReportEventRace(t *testing.T) {
	clk := clock.NewMock()
	b, err := New("inventory.GetStock", policy(func(p *Policy) {
		p.MinRequests = 10
		p.OpenFor = time.Second
		p.MaxOpenFor = 4 * time.Second
	}), WithClock(clk), OnTransition(func(Event) {}))
	require.NoError(t, err)

	const workers, each = 4, 400
	var ok, failed, refused atomic.Uint64
	stop := make(chan struct{})
	var readers, wg sync.WaitGroup
	readers.Add(1)
	go func() { // a metrics scrape and an operator
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = b.State()
			_ = b.Counters()
			_ = b.Snapshot()
			_ = b.Status()
			if i%50 == 0 {
				clk.Add(250 * time.Millisecond)
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				fail := (w+i)%2 == 0
				err := b.Do(context.Background(), func(context.Context) error {
					if fail {
						return errBoom
					}
					return nil
				})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrOpen):
					refused.Add(1)
				default:
					failed.Add(1)
				}
			}
		}(w)
	}
	waitFor(t, chanOf(&wg), "workers")
	close(stop)
	waitFor(t, chanOf(&readers), "reader")

	c := b.Counters()
	assert.Equal(t, uint64(workers*each), c.Admitted+c.Rejected, "every call admitted or refused exactly once")
	assert.Equal(t, ok.Load(), c.Successes)
	assert.Equal(t, failed.Load(), c.Failures)
	assert.Equal(t, refused.Load(), c.Rejected)
	assert.Equal(t, c.Successes+c.Failures+c.Timeouts+c.Ignored, c.Admitted)
}

// hystrix-go could open the circuit as a side effect of recording a
// success: the success brought the volume up to the threshold while the
// error percentage was still high.
// https://github.com/afex/hystrix-go/pull/49
func TestPeer_HystrixGoSuccessOpensCircuit(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(10, errBoom)
	h.calls(9, nil)
	h.requireState(Closed) // 19 counted, under MinRequests
	h.calls(1, nil)        // 20 counted at 50%: a success never trips
	h.requireState(Closed)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 10}, h.b.Snapshot())
	h.calls(1, errBoom) // the next failure is judged on the full window
	h.requireState(Open)
}

// Reported against resilience4j as a bug: the slow-call rate looked as if
// it skipped the minimum-number-of-calls gate (the failure-rate check turned
// out to guard it). Here the slow-call rule waits for MinRequests like every
// ratio rule.
// https://github.com/resilience4j/resilience4j/issues/808
func TestPeer_Resilience4jSlowCallMinimumCalls(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) {
		p.SlowCall = 100 * time.Millisecond
		p.SlowRatio = 0.5
	}))
	slow := func() {
		require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
			h.add(101 * time.Millisecond)
			return nil
		}))
	}
	for i := 0; i < defaultMinRequests-1; i++ {
		slow()
	}
	h.requireState(Closed) // 19 of 19 slow, but under the gate
	assert.Equal(t, uint64(defaultMinRequests-1), h.b.Snapshot().Slow)
	slow()
	h.requireState(Open)
	assert.Equal(t, ReasonSlowRatio, h.eventLog()[0].Reason)
}

// resilience4j published its "rate exceeded" event twice when the failure
// rate and the slow-call rate crossed their thresholds on the same call.
// Here one trip is one event, even with several rules holding and several
// goroutines failing at once.
// https://github.com/resilience4j/resilience4j/issues/1437
func TestPeer_Resilience4jTwoRulesExceededPublishTwice(t *testing.T) {
	t.Run("two rules", func(t *testing.T) {
		h := newHarness(t, policy(func(p *Policy) {
			p.SlowCall = 100 * time.Millisecond
			p.SlowRatio = 0.5
			p.ErrorCount = defaultMinRequests
			p.ConsecutiveFailures = defaultMinRequests
		}))
		slowFail := func() error {
			return h.b.Do(context.Background(), func(context.Context) error {
				h.add(101 * time.Millisecond)
				return errBoom
			})
		}
		for i := 0; i < defaultMinRequests; i++ {
			require.ErrorIs(t, slowFail(), errBoom)
		}
		h.requireState(Open)
		assert.Equal(t, []string{"closed>open:error_ratio"}, h.transitions(), "one trip, one event, first rule named")
		assert.Equal(t, uint64(1), h.b.Counters().Opens)
	})
	t.Run("concurrent failures", func(t *testing.T) {
		for round := 0; round < 20; round++ {
			h := newHarness(t, DefaultPolicy())
			h.calls(defaultMinRequests-2, errBoom) // two failures short of tripping
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < 4; i++ {
						_ = h.call(errBoom)
					}
				}()
			}
			close(start)
			waitFor(t, chanOf(&wg), "concurrent failures")
			require.Equal(t, []string{"closed>open:error_ratio"}, h.transitions(), "round %d", round)
			require.Equal(t, uint64(1), h.b.Counters().Opens, "round %d", round)
		}
	})
}

// resilience4j counted one refused call three times in its not-permitted
// metric. A refusal here is counted once, in Rejected, and nowhere else:
// not as a failure, not in the window; a fallback served for it is counted
// apart.
// https://github.com/resilience4j/resilience4j/issues/1653
func TestPeer_Resilience4jNotPermittedCountedThreeTimes(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	before, snap := h.b.Counters(), h.b.Snapshot()

	require.ErrorIs(t, h.call(nil), ErrOpen)
	c := h.b.Counters()
	assert.Equal(t, before.Rejected+1, c.Rejected)
	assert.Equal(t, before.Failures, c.Failures)
	assert.Equal(t, before.Admitted, c.Admitted)
	assert.Equal(t, snap, h.b.Snapshot())

	v, err := Fallback(context.Background(), h.b,
		func(context.Context) (int, error) { return 1, nil },
		func(context.Context, error) (int, error) { return 2, nil })
	require.NoError(t, err)
	assert.Equal(t, 2, v)
	c2 := h.b.Counters()
	assert.Equal(t, c.Rejected+1, c2.Rejected)
	assert.Equal(t, c.Fallbacks+1, c2.Fallbacks)
	assert.Equal(t, c.Failures, c2.Failures, "a fallback is not a failure")
	assert.Equal(t, snap, h.b.Snapshot(), "refusals never enter the window")
}

// resilience4j cannot change a running breaker's configuration: users
// replace the breaker, losing its state, its counts and a half-open
// breaker's progress. Here SetPolicy keeps them all, and probes already in
// flight still give their verdicts.
// https://github.com/resilience4j/resilience4j/issues/2325
func TestPeer_Resilience4jReconfigureLosesState(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	before, snap := h.b.Counters(), h.b.Snapshot()
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.ErrorRatio = 0.6 })))
	h.requireState(Open)
	assert.Equal(t, before, h.b.Counters())
	assert.Equal(t, snap, h.b.Snapshot(), "same geometry: the window is kept")

	h.add(defaultOpenFor)
	h.requireState(HalfOpen)
	var probes []*blocked
	for i := 0; i < defaultProbes; i++ {
		probes = append(probes, h.start(context.Background()))
	}
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.ErrorRatio = 0.7; p.OpenFor = time.Minute; p.MaxOpenFor = 4 * time.Minute })))
	h.requireState(HalfOpen)
	require.ErrorIs(t, h.call(nil), ErrOpen, "the slots stay taken")
	for _, bl := range probes {
		require.True(t, bl.probe)
		require.NoError(t, bl.finish(nil))
	}
	h.requireState(Closed)
	assert.Equal(t, uint64(defaultProbes), h.b.Counters().ProbesPassed)
}

// resilience4j could stay half-open for good when permitted calls never
// reported a result: the permits were used up and nothing gave them back.
// Here a probe that never reports reopens the breaker one cooldown after it
// was admitted. Time spent half-open before any probe arrived does not
// count, so a quiet breaker is not reopened the moment its probes come.
// https://github.com/resilience4j/resilience4j/issues/935
func TestPeer_Resilience4jLostProbeWedgesHalfOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.halfOpen()
	h.add(10 * time.Minute) // no traffic for a long while
	h.requireState(HalfOpen)

	var lost []func(error)
	for i := 0; i < defaultProbes; i++ {
		_, done, err := h.b.Allow(context.Background())
		require.NoError(t, err)
		lost = append(lost, done) // never called while the episode lasts
	}
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(HalfOpen) // the probes are fresh: no probe timeout yet
	h.add(defaultOpenFor - time.Nanosecond)
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(HalfOpen)
	h.add(time.Nanosecond) // one cooldown since the probes were admitted
	h.requireState(Open)
	tr := h.transitions()
	require.NotEmpty(t, tr)
	assert.Equal(t, "half_open>open:probe_timeout", tr[len(tr)-1])

	h.add(2 * defaultOpenFor) // the doubled cooldown
	for i := 0; i < defaultProbes; i++ {
		require.True(t, h.probeCall(nil))
	}
	h.requireState(Closed)
	for _, done := range lost {
		done(errBoom) // stale: their episode is over
	}
	h.requireState(Closed)
	assert.Equal(t, uint64(defaultProbes), h.b.Counters().ProbesPassed)
	assert.Zero(t, h.b.Counters().ProbesFailed)
}

// A failsafe-go user saw the breaker stay open after its delay had passed:
// nothing moved it to half-open. Here no timer is needed: the first look at
// the breaker after the cooldown, a call or a State read, finds it
// half-open.
// https://github.com/failsafe-go/failsafe-go/issues/97
func TestPeer_FailsafeGoOpenDoesNotMoveToHalfOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.add(defaultOpenFor - time.Second)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, time.Second, oe.RetryAfter())
	h.add(time.Second)
	assert.Equal(t, HalfOpen, h.b.State(), "no call needed")
	assert.Equal(t, "open>half_open:cooldown_elapsed", h.transitions()[1])

	h2 := newHarness(t, DefaultPolicy())
	h2.trip()
	h2.add(defaultOpenFor)
	require.True(t, h2.probeCall(nil), "the first call after the cooldown is a probe, without a State read first")
}

// In failsafe (Java), an exception thrown while recording a result skipped
// the decrement of the half-open execution count, so the breaker stayed
// half-open refusing everything. The same can happen to a breaker whose
// classifier panics on a probe's error: the probe's slot must come back.
// https://github.com/failsafe-lib/failsafe/issues/32
func TestPeer_FailsafeRecordingErrorLeaksHalfOpenSlot(t *testing.T) {
	errOdd := errors.New("odd")
	classify := func(err error) Outcome {
		if errors.Is(err, errOdd) {
			panic("classifier bug")
		}
		return DefaultClassifier(err)
	}
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }), WithClassifier(classify))
	h.halfOpen()
	func() {
		defer func() { _ = recover() }() // the panic may go on up; not this test's point
		_ = h.b.Do(context.Background(), func(context.Context) error { return errOdd })
	}()
	switch h.b.State() {
	case HalfOpen:
		require.True(t, h.probeCall(nil), "the slot of the probe whose classifier panicked was not given back")
	case Open:
		h.add(2 * defaultOpenFor)
		require.True(t, h.probeCall(nil))
	}
	h.requireState(Closed)
}

// cep21/circuit's ForceOpen setting did not refuse calls: a circuit
// configured forced open still ran them.
// https://github.com/cep21/circuit/pull/92
func TestPeer_Cep21ForceOpenConfigIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	ran := false
	var oe *OpenError
	require.ErrorAs(t, h.b.Do(context.Background(), func(context.Context) error { ran = true; return nil }), &oe)
	assert.False(t, ran)
	assert.Equal(t, ReasonForcedOpen, oe.Reason)
	h.add(time.Hour) // no cooldown ends a forced open
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(Open)

	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.calls(5*defaultMinRequests, errBoom)
	h.requireState(Closed)
	assert.Equal(t, uint64(5*defaultMinRequests), h.b.Counters().Failures, "a disabled breaker still measures")
}

// Hystrix (Java): after Hystrix.reset() the circuit was seen open again
// shortly afterwards. A reset that lets older calls count in the new window
// does exactly that; here calls in flight when Reset is called are not
// counted in it.
// https://github.com/Netflix/Hystrix/issues/1680
func TestPeer_HystrixResetThenReopens(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	var inflight []*blocked
	for i := 0; i < 2*defaultMinRequests; i++ {
		inflight = append(inflight, h.start(context.Background()))
	}
	h.trip()
	h.b.Reset()
	h.requireState(Closed)
	for _, bl := range inflight {
		require.ErrorIs(t, bl.finish(errBoom), errBoom)
	}
	h.requireState(Closed)
	assert.Equal(t, Snapshot{}, h.b.Snapshot(), "calls from before the reset entered the new window")
	h.calls(defaultMinRequests-1, errBoom)
	h.requireState(Closed)
}

// goHystrix did not recover a panic in the command: the call hung until
// its timeout instead of failing, and the panic was not counted for what it
// was. Here a panic counts as a failure and goes on with its own value; a
// panicking probe gives its slot back.
// https://github.com/dahernan/goHystrix/pull/10
func TestPeer_GoHystrixPanicInRunNotCounted(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	type sentinel struct{}
	panicky := func() (v any) {
		defer func() { v = recover() }()
		_ = h.b.Do(context.Background(), func(context.Context) error { panic(sentinel{}) })
		return nil
	}
	for i := 0; i < defaultMinRequests; i++ {
		require.Equal(t, sentinel{}, panicky(), "call %d: the panic did not go on unchanged", i)
	}
	h.requireState(Open)
	assert.Equal(t, ReasonErrorRatio, h.eventLog()[0].Reason)
	assert.Equal(t, uint64(defaultMinRequests), h.b.Counters().Failures)

	h.add(defaultOpenFor)
	require.Equal(t, sentinel{}, panicky())
	h.requireState(HalfOpen)
	require.True(t, h.probeCall(nil), "the panicking probe's slot was not given back")
	h.requireState(Closed)
}

// hoglet measured its open period on the wall clock, so a clock step could
// pin a circuit open or skip the open period. The default clock here is the
// monotonic one; an injected clock that steps back must not freeze the
// window either: calls older than Window by the clock as it now runs leave
// it.
// https://github.com/exaring/hoglet/pull/25
func TestPeer_HogletWallClockJump(t *testing.T) {
	t.Run("default clock is monotonic", func(t *testing.T) {
		// internal/timebase checks that the real clock's base is monotonic.
		tb := timebase.New(nil)
		a := tb.Now()
		b := tb.Now()
		assert.GreaterOrEqual(t, b, a)
	})
	t.Run("injected clock stepping back", func(t *testing.T) {
		h := newHarness(t, DefaultPolicy())
		h.at(time.Hour)
		h.calls(10, nil)
		h.clk.Set(h.t0.Add(time.Minute)) // 59 minutes back
		h.calls(5, errBoom)
		h.requireState(Closed)
		h.add(2 * defaultWindow) // those 15 calls are now more than a window old
		h.calls(10, errBoom)
		h.requireState(Closed) // 10 counted, under MinRequests
		assert.Equal(t, Snapshot{Counted: 10, Failures: 10}, h.b.Snapshot(), "the window froze at the old head")
	})
}

// opossum: concurrent failures each called open(); the second call
// cancelled the timer the first had started, without starting another, so
// the circuit never left the open state. Here late failures on an open
// breaker neither restart nor cancel its cooldown: it ends when it said it
// would.
// https://github.com/nodeshift/opossum/issues/385
func TestPeer_OpossumSimultaneousFailuresNeverHalfOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	var late []*blocked
	for i := 0; i < 10; i++ {
		late = append(late, h.start(context.Background()))
	}
	h.trip()
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	until := oe.Until
	h.add(defaultOpenFor / 2)
	for _, bl := range late {
		require.ErrorIs(t, bl.finish(errBoom), errBoom)
	}
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, until, oe.Until, "late failures moved the end of the cooldown")
	h.add(defaultOpenFor/2 - time.Nanosecond)
	h.requireState(Open)
	h.add(time.Nanosecond)
	h.requireState(HalfOpen)
}

// Polly's consecutive-failure breaker did not reset its count on a
// success, so failures separated by successes added up until it broke.
// https://github.com/App-vNext/Polly/issues/131
func TestPeer_PollyConsecutiveCountNotResetBySuccess(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) {
		p.ConsecutiveFailures = 5
		p.ErrorRatio = 1 // with a success in every five calls, only the run rule can trip
	}))
	for i := 0; i < 20; i++ { // 80 failures, never five in a row
		h.calls(4, errBoom)
		h.calls(1, nil)
	}
	h.requireState(Closed)
	h.calls(5, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutiveFailures, h.eventLog()[0].Reason)
}
