package breaker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression tests for wrong decisions of the state machine in rare paths.
// Each names the behaviour it protects; the comment tells the scenario that
// went wrong.

// lastReason is the reason of the last transition the harness saw.
func (h *harness) lastReason() Reason {
	ev := h.eventLog()
	if len(ev) == 0 {
		return ""
	}
	return ev[len(ev)-1].Reason
}

// Scenario: an open breaker is forced open. Its state does not change (no
// event), but Opens went up by one.
func TestRegression_ForcingOpenAnOpenBreakerIsNotAnOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(1), h.b.Counters().Opens)
	assert.Len(t, h.eventLog(), 1)
	// From half-open it is a transition, and counts.
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.requireState(HalfOpen)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(2), h.b.Counters().Opens)
}

// probePanicHandler is a log handler that panics on a probe record.
type probePanicHandler struct{ slog.Handler }

func (h probePanicHandler) Handle(ctx context.Context, r slog.Record) error {
	if isProbeRecord(r) {
		panic("handler bug")
	}
	return nil
}

func (h probePanicHandler) Enabled(context.Context, slog.Level) bool { return true }

// Scenario: the log handler panics on the record of the probe whose pass
// closes the breaker. The record was written between the unlock and the
// delivery of the events, so the close event stayed queued until some
// later transition.
func TestRegression_APanickingLogHandlerDoesNotStrandTheNextEvent(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithLogger(slog.New(probePanicHandler{slog.NewTextHandler(io.Discard, nil)})))
	h.trip()
	h.at(30 * time.Second)
	for i := 0; i < 3; i++ {
		assert.PanicsWithValue(t, "handler bug", func() { _ = h.call(nil) })
	}
	h.requireState(Closed)
	assert.Equal(t, []string{"closed>open:err_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}, h.transitions())
}

var errOdd = errors.New("odd")

// panickyClassifier panics on errOdd.
func panickyClassifier(err error) Outcome {
	if errors.Is(err, errOdd) {
		panic("classifier bug")
	}
	return DefaultClassifier(err)
}

// Scenario: the classifier panics on a probe's error. The panic went up
// through Do before the probe was settled, so its slot stayed taken for
// the rest of the episode: two probes could pass, never three, and the
// breaker reopened with probe_timeout. A panicking classifier now counts
// like a panicking function: a failure in the window, a freed slot for a
// probe.
func TestRegression_APanickingClassifierDoesNotLeakAProbeSlot(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithClassifier(panickyClassifier))
	h.trip()
	h.at(30 * time.Second)
	assert.PanicsWithValue(t, "classifier bug", func() { _ = h.call(errOdd) })
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, uint64(21), h.b.Counters().Failures, "20 trips + 1 panic")
}

// Scenario: the classifier panics on the twentieth failure of a window of
// nineteen. The call was not counted at all; like a panicking function it
// counts as a failure, and trips the breaker.
func TestRegression_APanickingClassifierCountsAFailure(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithClassifier(panickyClassifier))
	h.calls(19, errBoom)
	assert.PanicsWithValue(t, "classifier bug", func() { _ = h.call(errOdd) })
	h.requireState(Open)

	// The two-step form too, and its deadline is released.
	h2 := newHarness(t, policy(func(p *Policy) { p.Timeout = time.Second }), WithClassifier(panickyClassifier))
	h2.calls(19, errBoom)
	ctx, done, err := h2.b.Allow(context.Background())
	require.NoError(t, err)
	assert.PanicsWithValue(t, "classifier bug", func() { done(errOdd) })
	h2.requireState(Open)
	assert.ErrorIs(t, ctx.Err(), context.Canceled, "the call's context is released")
}

// Scenario: with StrictProbes, a probe whose function panics. A panic is a
// failure, and a strict episode fails on a failure, but the breaker stayed
// half-open with the slot freed.
func TestRegression_AStrictProbeThatPanicsReopens(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.StrictProbes = true }))
	h.trip()
	h.at(30 * time.Second)
	assert.PanicsWithValue(t, "probe bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { panic("probe bug") })
	})
	h.requireState(Open)
	assert.Equal(t, ReasonProbeFailed, h.lastReason())
	assert.Equal(t, uint64(1), h.b.Counters().ProbesFailed)
	assert.Equal(t, 60*time.Second, h.eventLog()[len(h.eventLog())-1].Cooldown)
}

// Scenario: 19 failures are in the window and one more call is in flight
// when SetPolicy raises MinRequests to 40. The call fails: with the policy
// in force, 20 counted calls are too few to trip, but the rules captured at
// the call's admission (MinRequests 20) tripped the breaker.
func TestRegression_AResultIsJudgedByThePolicyInForceWhenItIsRecorded(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(19, errBoom)
	inFlight := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.MinRequests = 40 })))
	require.ErrorIs(t, inFlight.finish(errBoom), errBoom)
	h.requireState(Closed)
	assert.Equal(t, uint64(20), h.b.Snapshot().Counted)
	h.calls(19, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
}

// Scenario: two probes are in flight when SetPolicy lowers Probes from 3
// to 1. The first passes: the episode has the one pass the policy asks for
// and must close. It stayed half-open (the verdict compared with the old
// count) and, with no slot left to admit a third probe, reopened with
// probe_timeout.
func TestRegression_LoweringProbesMidEpisodeCloses(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	p1 := h.start(context.Background())
	p2 := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Probes = 1 })))
	require.ErrorIs(t, h.call(nil), ErrOpen, "slots beyond the new count are taken")
	require.NoError(t, p1.finish(nil))
	h.requireState(Closed)
	assert.Equal(t, ReasonProbesPassed, h.lastReason())
	require.NoError(t, p2.finish(nil)) // stale now
	h.requireState(Closed)
}

// Scenario: two probes have passed and a third is in flight when Probes is
// lowered to 2: the passes already reach the new count, so the episode
// closes without waiting for the third.
func TestRegression_LoweringProbesBelowThePassesClosesAtOnce(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(2, nil)
	p3 := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Probes = 2 })))
	h.requireState(Closed)
	assert.Equal(t, ReasonProbesPassed, h.lastReason())
	require.ErrorIs(t, p3.finish(context.DeadlineExceeded), context.DeadlineExceeded) // stale
	h.requireState(Closed)
}

// Slots issued beyond a lowered Probes do not wedge the episode: two probes
// are in flight when SetPolicy lowers Probes from 3 to 1, and both end
// ignored. The slots are freed one by one; once none is taken, the next
// call is admitted as the one probe.
func TestHalfOpen_LoweringProbesThenIgnoredProbesDoesNotWedge(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	p1 := h.start(ctx)
	p2 := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Probes = 1 })))
	cancel()
	require.ErrorIs(t, <-p1.done, context.Canceled)
	require.ErrorIs(t, h.call(nil), ErrOpen, "p2 still holds the one slot")
	require.ErrorIs(t, p2.finish(Ignore(errBoom)), errBoom)
	require.NoError(t, h.call(nil))
	h.requireState(Closed)
}

// Scenario: probe 1 passes as soon as the cooldown ends, then traffic
// pauses for longer than a cooldown. Probes 2 and 3 arrive together and are
// in flight when a fourth call comes: the probe timeout was measured from
// the start of the half-open episode, so that call reopened the breaker at
// once (probe_timeout, cooldown doubled) although no probe had been in
// flight for more than an instant.
func TestRegression_LowTrafficHalfOpenClosesHoweverSlowlyProbesArrive(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	require.NoError(t, h.call(nil)) // probe 1 passes
	h.at(95 * time.Second)          // a long pause
	p2 := h.start(context.Background())
	p3 := h.start(context.Background())
	require.True(t, p2.probe && p3.probe)
	require.ErrorIs(t, h.call(nil), ErrOpen, "every slot is taken")
	h.requireState(HalfOpen)
	require.NoError(t, p2.finish(nil))
	require.NoError(t, p3.finish(nil))
	h.requireState(Closed)
	assert.Equal(t, []string{"closed>open:err_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}, h.transitions())
}

// Scenario: a metrics scrape every 15 s reads the state, which makes the
// lazy open → half-open transition as soon as the cooldown ends. Healthy
// traffic comes in bursts every 5 minutes: three calls in flight at once
// and a fourth beside them. The fourth found the half-open episode older
// than a cooldown and reopened the breaker, and the breaker stayed open for
// the whole hour although every call succeeded.
func TestRegression_AMetricsScrapeDoesNotStartTheProbeTimeout(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	for at := 15 * time.Second; at <= time.Hour; at += 15 * time.Second {
		h.at(at)
		_ = h.b.State() // the scrape
		if at%(5*time.Minute) != 0 {
			continue
		}
		var burst []*blocked
		for i := 0; i < 3; i++ {
			burst = append(burst, h.start(context.Background()))
		}
		_ = h.call(nil)
		for _, bl := range burst {
			require.NoError(t, bl.finish(nil))
		}
		if h.b.State() == Closed {
			break
		}
	}
	h.requireState(Closed)
	assert.Equal(t, 5*time.Minute, h.clk.Now().Sub(h.t0), "closed by the first burst")
	assert.Equal(t, uint64(1), h.b.Counters().Opens)
}

// Scenario: the breaker went half-open at the end of the cooldown (a
// scrape read it), and probes were admitted 70 s later. A scrape one second
// after their admission reopened the breaker with probe_timeout. The probe
// timeout must run from the admission of the oldest probe still in flight.
func TestRegression_AScrapeWhileProbesAreInFlightDoesNotReopen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.requireState(HalfOpen)
	h.at(100 * time.Second)
	var probes []*blocked
	for i := 0; i < 3; i++ {
		probes = append(probes, h.start(context.Background()))
	}
	h.at(101 * time.Second)
	h.requireState(HalfOpen)
	h.at(130*time.Second - 1)
	h.requireState(HalfOpen)
	require.NoError(t, probes[0].finish(nil))
	// The oldest probe in flight is now probes[1], admitted at 100 s too.
	h.at(130 * time.Second)
	h.requireState(Open)
	assert.Equal(t, ReasonProbeTimeout, h.lastReason())
	for _, bl := range probes[1:] {
		require.NoError(t, bl.finish(nil))
	}
	h.requireState(Open)
}

// Scenario: a probe admitted at the start of the episode frees its slot
// (its caller gave up, so it has no verdict), and three probes arrive much
// later. The first probe's admission must not count toward the timeout of
// the later ones, and a probe timeout is measured from the oldest probe
// still in flight, not the newest.
func TestRegression_TheProbeTimeoutCountsOnlyProbesStillInFlight(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := h.start(ctx)
	require.True(t, gaveUp.probe)
	cancel()
	require.ErrorIs(t, <-gaveUp.done, context.Canceled) // ignored: slot freed
	h.at(200 * time.Second)
	old := h.start(context.Background()) // in flight from 200 s
	h.at(220 * time.Second)
	p2 := h.start(context.Background())
	p3 := h.start(context.Background())
	h.at(230*time.Second - 1)
	h.requireState(HalfOpen)
	h.at(230 * time.Second) // old has been in flight for one cooldown
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(Open)
	assert.Equal(t, ReasonProbeTimeout, h.lastReason())
	for _, bl := range []*blocked{old, p2, p3} {
		require.NoError(t, bl.finish(nil))
	}
}

// resetCtx calls fire from its Value method once armed: the one place user
// code runs inside the recording of a closed-state result (it ran between
// the generation check and the window load).
type resetCtx struct {
	context.Context
	armed bool
	fire  func()
}

func (c *resetCtx) Value(key any) any {
	if c.armed {
		c.armed = false
		c.fire()
	}
	return c.Context.Value(key)
}

// Scenario: a call admitted before Reset records its result while Reset
// runs. Reset stored the new window before bumping the generation, so the
// call passed the generation check and then counted in the new, supposedly
// empty, window. Here the interleaving is forced by running Reset from the
// context lookup that recording makes when warmup marks are in use.
func TestRegression_AResultAdmittedBeforeResetNeverLandsInTheNewWindow(t *testing.T) {
	for _, err := range []error{nil, errBoom} {
		h := newHarness(t, DefaultPolicy())
		// A marked call of a long-started instance turns the breaker's
		// per-call lookup on for every later call.
		warm := WithInstanceStart(context.Background(), h.clk.Now().Add(-time.Hour))
		require.NoError(t, h.b.Do(warm, func(context.Context) error { return nil }))
		h.calls(5, errBoom)
		ctx := &resetCtx{Context: context.Background()}
		ctx.fire = func() {
			h.b.Reset()
			require.NoError(t, h.b.Do(context.Background(), func(context.Context) error { return nil }))
		}
		require.ErrorIs(t, h.b.Do(ctx, func(context.Context) error {
			ctx.armed = true
			return err
		}), err)
		require.False(t, ctx.armed, "reset ran")
		assert.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot(), "only the call made after the reset, err=%v", err)
	}
}

// Scenario: SetPolicy changes Window while a call is in flight. The window
// starts empty, but the call admitted before the change counted in it: the
// change did not start a new generation.
func TestRegression_AResultAdmittedBeforeAWindowChangeNeverLandsInTheNewWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(5, errBoom)
	inFlight := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Window = 10 * time.Second })))
	require.ErrorIs(t, inFlight.finish(errBoom), errBoom)
	assert.Equal(t, Snapshot{}, h.b.Snapshot())
	assert.Equal(t, uint64(6), h.b.Counters().Failures, "it still counts in the metrics")
	h.calls(1, nil)
	assert.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot())
}

// Scenario: the jitter source given with WithRand panics. It was called
// under the breaker's lock in the middle of a trip, so the panic left the
// lock held (the next call that needed it hung for ever) and the level
// raised with no transition made.
func TestRegression_APanickingJitterSourceLeavesTheBreakerUsable(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithRand(func() float64 { panic("rand bug") }))
	h.calls(19, errBoom)
	_ = h.call(errBoom)
	require.True(t, h.b.mu.TryLock(), "the lock is free")
	h.b.mu.Unlock()
	h.requireState(Open)
	assert.Equal(t, 30*time.Second, h.eventLog()[0].Cooldown, "no jitter")
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)
}

// Scenario: a low-traffic method with ConsecutiveFailures 5 and the
// default MinRequests 20 fails five times in a row. The run rule is its
// own sample requirement, meant for exactly such thin traffic, but it was
// evaluated only once the window held MinRequests calls, so it never
// tripped.
func TestRegression_ConsecutiveFailuresTripBelowMinRequests(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.ConsecutiveFailures = 5 }))
	h.calls(3, nil)
	h.calls(4, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutive, h.lastReason())
	assert.Equal(t, Snapshot{Counted: 8, Failures: 5}, h.eventLog()[0].Snapshot)
}

// The probe bookkeeping under concurrency: probes claim slots lock-free and
// register their admission under the lock. Whatever the interleaving of
// admissions, passes, ignored and panicking probes, once no call is in
// flight a half-open breaker holds exactly one slot per pass, no probe is
// registered as in flight, and there is no probe timeout pending.
func TestRace_ProbeSlotsAndAdmissionTimesStayConsistent(t *testing.T) {
	clk := clock.NewMock()
	b, err := New("probes", policy(func(p *Policy) { p.Probes = 4; p.Jitter = 0 }), WithClock(clk))
	require.NoError(t, err)
	outcomes := []error{nil, Ignore(errBoom), errBoom, nil, errPanic}
	for round := 0; round < 200; round++ {
		b.Reset()
		for i := 0; i < 20; i++ {
			_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
		}
		require.Equal(t, Open, b.State())
		clk.Add(time.Minute)
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				defer func() { _ = recover() }()
				res := outcomes[(round+g)%len(outcomes)]
				_ = b.Do(context.Background(), func(context.Context) error {
					if res == errPanic {
						panic(res)
					}
					return res
				})
			}(g)
		}
		wg.Wait()
		b.mu.Lock()
		w := b.state.Load()
		if w.state() == HalfOpen {
			require.Equal(t, uint64(b.probesPassed()), w.issued(), "round %d: one slot per pass", round)
			for _, p := range b.hist.inflight {
				require.Equal(t, int64(never), p.at, "round %d: nothing in flight", round)
				require.Nil(t, p.mark, "round %d: no mark kept", round)
			}
			require.Equal(t, int64(math.MaxInt64), b.probeDeadline(), "round %d: no probe timeout pending", round)
		}
		b.mu.Unlock()
	}
}

var errPanic = errors.New("panic")

// Scenario: a breaker reopens once (level 1), is forced closed, stays
// closed for MaxOpenFor and is then forced open for maintenance. Stable
// for MaxOpenFor, its cooldown should start over at OpenFor; it kept level
// 1, so the first failed probe after the release waited 4×OpenFor instead
// of 2×.
func TestRegression_ForcedOpenAfterAStableSpellStartsTheDoublingOver(t *testing.T) {
	p := policy(func(p *Policy) { p.Jitter = 0; p.MinRequests = 1; p.StrictProbes = true })
	h := newHarness(t, p)
	h.trip()
	h.add(p.OpenFor)
	h.calls(1, errBoom) // the probe fails: level 1
	ev := h.eventLog()
	require.Equal(t, 2*p.OpenFor, ev[len(ev)-1].Cooldown)
	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.add(p.MaxOpenFor)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	ev = h.eventLog()
	assert.Equal(t, 0, ev[len(ev)-1].Doublings, "stable for MaxOpenFor: doublings back to 0")
	require.NoError(t, h.b.SetMode(ModeAuto)) // half-open
	h.calls(1, errBoom)                       // the probe fails: level 1
	ev = h.eventLog()
	assert.Equal(t, 2*p.OpenFor, ev[len(ev)-1].Cooldown)
}

// Scenario: two hooks, the first panics on every event. The second hook,
// the group's subscribers and the events queued behind the panicking one
// (a hook that causes a transition queues one) never reached anyone until
// some later transition: the panic cut delivery short.
func TestRegression_APanickingHookHidesNoEventFromTheOthers(t *testing.T) {
	var seen []Reason
	var b *Breaker
	h := newHarness(t, policy(func(p *Policy) { p.MinRequests = 1 }),
		OnTransition(func(e Event) {
			if e.Reason == ReasonErrorRatio {
				b.Reset() // queues a second event
			}
			panic("hook bug")
		}),
		OnTransition(func(e Event) { seen = append(seen, e.Reason) }))
	b = h.b
	assert.PanicsWithValue(t, "hook bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { return errBoom })
	})
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonReset}, seen,
		"the second hook saw both events, the one queued by the first hook included")
	assert.PanicsWithValue(t, "hook bug", func() { _ = h.b.SetMode(ModeForcedOpen) })
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonReset, ReasonForcedOpen}, seen, "delivery was handed back")
}
