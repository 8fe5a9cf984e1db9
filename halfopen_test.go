package breaker

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Half-open: exactly Probes calls are admitted; the fourth
// is refused while three are in flight.
func TestHalfOpen_FourthCallIsRefusedWhileThreeProbesAreInFlight(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	var probes []*blocked
	for i := 0; i < 3; i++ {
		bl := h.start(context.Background())
		require.True(t, bl.admitted, "probe %d", i+1)
		require.True(t, bl.probe)
		probes = append(probes, bl)
	}
	err := h.call(nil)
	require.ErrorIs(t, err, ErrOpen, "the fourth call must be refused")
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, HalfOpen, oe.State)
	assert.Zero(t, oe.RetryAfter(), "probes are in flight; no fixed retry time")

	for _, bl := range probes[:2] {
		require.NoError(t, bl.finish(nil))
	}
	require.ErrorIs(t, h.call(nil), ErrOpen, "slots are not reissued after a pass")
	h.requireState(HalfOpen)
	require.NoError(t, probes[2].finish(nil))
	h.requireState(Closed)
}

// behaviour.md §4 Half-open: all probes pass → Closed, with an empty window.
func TestHalfOpen_AllProbesPassClosesOnAnEmptyWindow(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.OpenFor = time.Second; p.MaxOpenFor = 2 * time.Second }))
	h.trip()
	h.at(time.Second) // the tripping failures are still inside the 5 s window
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, Snapshot{}, h.b.Snapshot(), "window must be empty after closing")
	h.calls(19, errBoom)
	h.requireState(Closed) // the old failures would have tripped it
	assert.Equal(t, []string{
		"closed>open:error_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed",
	}, h.transitions())
	c := h.b.Counters()
	assert.Equal(t, uint64(3), c.ProbesPassed)
}

// behaviour.md §4 Half-open: one failing probe reopens at once, cooldown
// doubled.
func TestHalfOpen_OneTimedOutProbeReopensWithADoubledCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(2, nil)
	require.NoError(t, h.call(nil) /* slot 3 */)
	// closed now; trip again right away to test the doubled cooldown from
	// a failed probe instead.
	h2 := newHarness(t, DefaultPolicy())
	h2.trip()
	h2.at(30 * time.Second)
	h2.calls(1, nil)
	require.ErrorIs(t, h2.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h2.requireState(Open)
	ev := h2.eventLog()
	last := ev[len(ev)-1]
	assert.Equal(t, ReasonProbeFailed, last.Reason)
	assert.Equal(t, 60*time.Second, last.Cooldown)
	assert.Equal(t, 1, last.Doublings)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 20}, last.Snapshot, "reopen reports the trip that began the outage")
	h2.at(90*time.Second - 1)
	h2.requireState(Open)
	h2.at(90 * time.Second)
	h2.requireState(HalfOpen)
	assert.Equal(t, uint64(1), h2.b.Counters().ProbesFailed)
	assert.Equal(t, uint64(2), h2.b.Counters().Opens)
}

// behaviour.md §3 Outcomes: a probe that gets an answer, even an error
// (a 500, say), shows the downstream is back and passes; only a timeout
// fails it, unless StrictProbes is set.
func TestHalfOpen_AnErrorAnswerPassesAProbeUnlessStrict(t *testing.T) {
	for _, strict := range []bool{false, true} {
		h := newHarness(t, policy(func(p *Policy) { p.StrictProbes = strict }))
		h.trip()
		h.at(30 * time.Second)
		require.ErrorIs(t, h.call(errBoom), errBoom)
		if strict {
			h.requireState(Open)
			continue
		}
		h.calls(2, errBoom)
		h.requireState(Closed)
	}
}

// behaviour.md §3 Outcomes: an ignored probe gives no verdict and frees its
// slot.
func TestHalfOpen_AnIgnoredProbeFreesItsSlot(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	p1 := h.start(context.Background())
	p2 := h.start(context.Background())
	p3 := h.start(context.Background())
	require.True(t, p1.admitted && p2.admitted && p3.admitted)
	require.ErrorIs(t, h.call(nil), ErrOpen)
	notOurFault := Ignore(errors.New("invalid sku"))
	require.Equal(t, notOurFault, p1.finish(notOurFault))
	h.requireState(HalfOpen)
	// The freed slot goes to the next call.
	p4 := h.start(context.Background())
	require.True(t, p4.admitted && p4.probe)
	for _, p := range []*blocked{p2, p3, p4} {
		require.NoError(t, p.finish(nil))
	}
	h.requireState(Closed)
	c := h.b.Counters()
	assert.Equal(t, uint64(3), c.ProbesPassed)
	assert.Equal(t, uint64(1), c.Ignored)
}

// behaviour.md §3 Outcomes: a panic is counted, the probe slot released,
// then re-raised.
func TestHalfOpen_APanickingProbeFreesItsSlotAndThePanicGoesOn(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	assert.PanicsWithValue(t, "probe bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { panic("probe bug") })
	})
	h.requireState(HalfOpen)
	h.calls(3, nil) // all three slots are free again
	h.requireState(Closed)
	assert.Equal(t, uint64(21), h.b.Counters().Failures, "20 trips + 1 panic")
}

// A probe whose classifier panics frees its slot, as a probe whose function
// panics does: the panic goes on, the call counts as a failure, and three
// more probes close the breaker.
// Regression (c92ab56): the slot stayed taken; the episode ended in probe_timeout.
func TestHalfOpen_APanickingClassifierDoesNotLeakAProbeSlot(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithClassifier(panickyClassifier))
	h.trip()
	h.at(30 * time.Second)
	assert.PanicsWithValue(t, "classifier bug", func() { _ = h.call(errOdd) })
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Equal(t, uint64(21), h.b.Counters().Failures, "20 trips + 1 panic")
}

// With StrictProbes, a probe whose function panics fails the episode: the
// breaker reopens with probe_failed and a doubled cooldown.
// Regression (1f24f82): the breaker stayed half-open, the slot freed.
func TestHalfOpen_AStrictProbeThatPanicsReopens(t *testing.T) {
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

// behaviour.md §4 Half-open: a probe whose function ignores its context
// cannot wedge the breaker; after one cooldown without a verdict it
// reopens.
func TestHalfOpen_HungProbesReopenAfterOneCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	var hung []*blocked
	for i := 0; i < 3; i++ {
		hung = append(hung, h.start(context.Background()))
	}
	h.at(60*time.Second - 1)
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.requireState(HalfOpen)
	h.at(60 * time.Second)
	h.requireState(Open)
	ev := h.eventLog()
	assert.Equal(t, ReasonProbeTimeout, ev[len(ev)-1].Reason)
	assert.Equal(t, 60*time.Second, ev[len(ev)-1].Cooldown)
	// The hung probes finally return: stale, they change nothing.
	for _, bl := range hung {
		require.NoError(t, bl.finish(nil))
	}
	h.requireState(Open)
	assert.Zero(t, h.b.Counters().ProbesPassed)
}

// The probe timeout runs from the admission of the probes in flight, so thin
// traffic closes the breaker however slowly its probes come: probe 1 passes
// as the cooldown ends, traffic pauses for longer than a cooldown, then
// probes 2 and 3 are in flight when a fourth call comes and is refused; both
// pass, and the breaker closes.
// Regression (9a2f134): timed from the episode's start, the fourth call reopened it.
func TestHalfOpen_LowTrafficClosesHoweverSlowlyProbesArrive(t *testing.T) {
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
	assert.Equal(t, []string{"closed>open:error_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}, h.transitions())
}

// A read that moves the breaker half-open starts no probe timeout: with a
// metrics scrape every 15 s reading the state, and healthy bursts every 5
// minutes (three calls in flight and a fourth beside them), the first burst
// closes the breaker.
// Regression (9a2f134): each burst's fourth call reopened it, for the whole hour.
func TestHalfOpen_AMetricsScrapeDoesNotStartTheProbeTimeout(t *testing.T) {
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

// The probe timeout runs from the admission of the oldest probe still in
// flight: probes admitted 70 s into the episode are timed out one cooldown
// after their admission, not by a scrape a second after it.
// Regression (9a2f134): that scrape reopened the breaker with probe_timeout.
func TestHalfOpen_AScrapeWhileProbesAreInFlightDoesNotReopen(t *testing.T) {
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

// A probe that has freed its slot (its caller gave up, so it has no
// verdict) no longer counts toward the probe timeout of later ones, and the
// timeout runs from the oldest probe still in flight, not the newest.
// Regression (9a2f134): the probe timeout ran from the episode's start.
func TestHalfOpen_TheProbeTimeoutCountsOnlyProbesStillInFlight(t *testing.T) {
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

// An episode closes once it has the passes the policy in force asks for:
// two probes are in flight when SetPolicy lowers Probes from 3 to 1, and
// the first to pass closes the breaker; the second is stale.
// Regression (632857a): passes counted against 3; it reopened with probe_timeout.
func TestHalfOpen_LoweringProbesMidEpisodeCloses(t *testing.T) {
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

// Lowering Probes to the passes an episode already has closes it at once:
// two probes have passed and a third is in flight when Probes is lowered to
// 2, and the third's result is stale.
// Regression (632857a): passes counted against the old Probes.
func TestHalfOpen_LoweringProbesBelowThePassesClosesAtOnce(t *testing.T) {
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

var errPanic = errors.New("panic")

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
			require.Equal(t, int64(math.MaxInt64), b.transitionDue.Load(), "round %d: no probe timeout pending", round)
		}
		b.mu.Unlock()
	}
}

func TestIsProbe_FalseOutsideProbesAndForNil(t *testing.T) {
	assert.False(t, IsProbe(nil)) //lint:ignore SA1012 testing nil ctx
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.Do(context.Background(), func(ctx context.Context) error {
		assert.False(t, IsProbe(ctx))
		return nil
	}))
}

// The probe mark describes one hop. Inside an outer breaker's probe, an
// inner breaker that admitted a call otherwise than as its own probe
// (closed, timed, forced closed, shadow-admitted, by Do or by Allow) used
// to hand it the outer probe's context, so IsProbe was true and its
// integration tagged the call breaker_probe: 1. Each such call now gets a
// context where IsProbe is false; the outer probe's own context is still
// a probe after them, and an inner breaker's own probe is one.
func TestIsProbe_FalseForAnotherBreakersCallsInsideAProbe(t *testing.T) {
	outer := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	outer.halfOpen()

	inner := func(p Policy, setup func(h *harness)) *Breaker {
		h := newHarness(t, p)
		if setup != nil {
			setup(h)
		}
		return h.b
	}
	timed := policy(func(p *Policy) { p.CallTimeout = time.Second })
	slow := policy(func(p *Policy) { p.SlowCall, p.SlowRatio = time.Second, 0.5 })
	adaptive := policy(func(p *Policy) { p.AdaptiveTimeout.Enabled, p.AdaptiveTimeout.Max = true, time.Second })
	inners := []struct {
		name string
		b    *Breaker
	}{
		{"closed", inner(DefaultPolicy(), nil)},
		{"closed, Timeout", inner(timed, nil)},
		{"closed, SlowCall", inner(slow, nil)},
		{"closed, AdaptiveTimeout", inner(adaptive, nil)},
		{"forced closed", inner(DefaultPolicy(), func(h *harness) {
			require.NoError(t, h.b.SetMode(ModeForcedClosed))
		})},
		{"shadow, open", inner(DefaultPolicy(), func(h *harness) {
			require.NoError(t, h.b.SetMode(ModeShadow))
			h.calls(20, errBoom)
			require.Equal(t, Open, h.b.State())
		})},
	}
	ran := false
	require.NoError(t, outer.b.Do(context.Background(), func(ctx context.Context) error {
		ran = true
		require.True(t, IsProbe(ctx), "the outer probe")
		for _, in := range inners {
			require.NoError(t, in.b.Do(ctx, func(c context.Context) error {
				assert.False(t, IsProbe(c), "%s: Do", in.name)
				return nil
			}))
			call, done, err := in.b.Allow(ctx)
			require.NoError(t, err, in.name)
			assert.False(t, IsProbe(call), "%s: Allow", in.name)
			done(nil)
			assert.True(t, IsProbe(ctx), "%s: the outer probe after the inner call", in.name)
		}
		// An inner breaker's own probe is a probe.
		h := newHarness(t, DefaultPolicy())
		h.halfOpen()
		require.NoError(t, h.b.Do(ctx, func(c context.Context) error {
			assert.True(t, IsProbe(c), "the inner breaker's own probe")
			return nil
		}))
		return nil
	}))
	require.True(t, ran)
	outer.requireState(Closed)
}

// A probe is a probe until its result is in: once Do's function has
// returned, or Allow's done has been called, IsProbe is false in its
// context, and a call made with that context later (by a goroutine the
// probe started) is not a probe either.
func TestIsProbe_FalseOnceTheProbeHasReported(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 2 }))
	h.halfOpen()
	var kept context.Context
	require.NoError(t, h.b.Do(context.Background(), func(ctx context.Context) error {
		require.True(t, IsProbe(ctx))
		kept = ctx
		return nil
	}))
	assert.False(t, IsProbe(kept), "Do has returned")
	call, done, err := h.b.Allow(context.Background())
	require.NoError(t, err)
	require.True(t, IsProbe(call))
	done(nil)
	assert.False(t, IsProbe(call), "done has been called")
	h.requireState(Closed)

	other := newHarness(t, DefaultPolicy())
	for _, ctx := range []context.Context{kept, call} {
		require.NoError(t, other.b.Do(ctx, func(c context.Context) error {
			assert.False(t, IsProbe(c))
			return nil
		}))
	}
}

// A probe whose result never comes (an Allow whose done is never called)
// stops being a probe when its episode ends, here by the probe timeout:
// its mark must not stay live for ever, since while any mark is live,
// every breaker's closed calls look for one in their contexts.
func TestIsProbe_FalseOnceItsEpisodeHasEnded(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	h.halfOpen()
	before := liveProbes.Load()
	call, done, err := h.b.Allow(context.Background())
	require.NoError(t, err)
	require.True(t, IsProbe(call))
	require.Equal(t, before+1, liveProbes.Load())
	h.add(h.b.Policy().OpenFor)
	h.requireState(Open)
	assert.False(t, IsProbe(call), "the episode ended by the probe timeout")
	assert.Equal(t, before, liveProbes.Load())
	done(nil) // stale
	assert.Equal(t, before, liveProbes.Load())
	h.requireState(Open)
}

// A half-open breaker removed from its group while a probe whose result
// never comes is in flight makes no more transitions, so its episode never
// ends: the probe's mark must end when the breaker is dropped.
func TestIsProbe_FalseOnceItsBreakerIsDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(defaultOpenFor)
	b, err := gh.g.Get("inventory.GetStock")
	require.NoError(t, err)
	require.Equal(t, HalfOpen, b.State())
	before := liveProbes.Load()
	call, done, err := b.Allow(context.Background())
	require.NoError(t, err)
	require.True(t, IsProbe(call))
	require.True(t, gh.g.Remove("inventory.GetStock"))
	assert.False(t, IsProbe(call), "the breaker was dropped")
	assert.Equal(t, before, liveProbes.Load())
	done(nil)
	assert.Equal(t, before, liveProbes.Load())
}

// A call that read the state word while the breaker was open and its
// cooldown over, and reached the cooldown check only after another caller
// had moved the breaker half-open, read the field that then holds the
// probe deadline as the end of the cooldown, and was refused with every
// probe slot free: of 32 callers arriving as a cooldown ended, as few as
// one was admitted. A refusal is now made only on the word it was decided
// from.
func TestHalfOpen_ACallThatSawTheBreakerOpenTakesAFreeSlot(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.add(defaultOpenFor)
	stale := h.b.state.Load() // open, its cooldown over
	h.b.toHalfOpen(h.b.opt.tb.Now(), stale)
	tok, err := h.b.admitNotClosed(stale, h.b.rules.Load())
	require.NoError(t, err)
	assert.Equal(t, roleProbe, tok.role)
	h.b.finish(context.Background(), tok, nil, h.b.rules.Load())
	assert.Equal(t, uint64(1), h.b.Counters().ProbesPassed)
}

// Scenario: three callers arrive together as a cooldown ends. The first
// moves the breaker to half-open; the end of the cooldown and the probe
// deadline share one field, which was written before the state word, so
// a caller that had read the word while it still said open read the
// deadline of "no probe yet" (never) as the end of the cooldown and was
// refused with two probe slots free. The episode then never reached its
// probe timeout, which needs every slot taken. Every caller of an episode
// must be admitted.
func TestHalfOpen_CallersArrivingAsTheCooldownEndsAreAllAdmitted(t *testing.T) {
	episodes := 2000
	if raceEnabled {
		episodes = 400
	}
	h := newHarness(t, policy(func(p *Policy) { p.OpenFor = time.Second; p.MaxOpenFor = time.Second }))
	h.trip()
	refusedWithSlotsFree := 0
	for range episodes {
		h.add(time.Second)
		var wg sync.WaitGroup
		start := make(chan struct{})
		var refused atomic.Int32
		for range defaultProbes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if errors.Is(h.call(errBoom), ErrOpen) {
					refused.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if refused.Load() > 0 {
			refusedWithSlotsFree++
		}
		for h.b.State() == Closed {
			h.call(errBoom)
		}
	}
	assert.Zero(t, refusedWithSlotsFree, "episodes of %d in which a caller was refused with a probe slot free", episodes)
}
