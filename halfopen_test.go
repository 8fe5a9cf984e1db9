package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

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
		"closed>open:err_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed",
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
	timed := policy(func(p *Policy) { p.Timeout = time.Second })
	slow := policy(func(p *Policy) { p.SlowCall, p.SlowRatio = time.Second, 0.5 })
	adaptive := policy(func(p *Policy) { p.AdaptiveTimeout, p.TimeoutMax = true, time.Second })
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
	gh.clk.Add(DefaultOpenFor)
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
	h.add(DefaultOpenFor)
	stale := h.b.state.Load() // open, its cooldown over
	h.b.toHalfOpen(h.b.opt.tb.now(), stale)
	tok, err := h.b.admitSlow(stale, h.b.rules.Load())
	require.NoError(t, err)
	assert.Equal(t, roleProbe, tok.role)
	h.b.finish(context.Background(), tok, nil, h.b.rules.Load())
	assert.Equal(t, uint64(1), h.b.Counters().ProbesPassed)
}
