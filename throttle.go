package breaker

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"

	"github.com/govkit/breaker/internal/window"
)

// ReasonThrottled is the Reason of a call refused by Policy.Throttle while
// the breaker is closed. It names no transition: throttling is not a
// state.
const ReasonThrottled Reason = "throttled"

// Client-side throttling (Policy.Throttle) hangs off the rules: a breaker
// whose policy throttles, or once did, applies its own copy of the rules,
// whose thr is its throttle, carried from one policy to the next (see
// withThrottle). The hot path, which loads the rules anyway, tests thr
// for nil and, if it is set, loads its probability: one atomic load, and
// none for a breaker that has never throttled.
//
// The probability in force, throttle.p, holds the probability × 2^32 in
// its low 32 bits and the low 32 bits of the generation it was judged in
// in its high 32. Every change of generation stores 0 under the new one
// before the state word moves on (endGenLocked), and a judged value is
// stored only by a compare-and-swap from a value of its own generation,
// so no probability outlives the window it was judged on.
//
// The probability is judged after every failure that lands in the window
// (once the trip rules have been applied to it), at the admission of
// every closed-state call while it is above 0, so after every success and
// every throttled refusal and as the window slides, and by SetPolicy. A
// healthy breaker, whose probability is 0, judges nothing.

// throttleOne is probability 1 in throttle.p's fixed point.
const throttleOne = 1 << 32

// throttle is a breaker's throttling state.
type throttle struct {
	// p is the refusal probability in force (see above).
	p atomic.Uint64
	// win counts the calls throttled in the current generation, as
	// window.Success, over buckets of the breaker's window. A change of
	// generation replaces it. It is never sealed: a refusal counted in a
	// window that has just been replaced only misses the formula.
	win atomic.Pointer[window.Window]
	// total counts every throttled call, in its window.Success counter
	// (Counters.Throttled); it is never sealed.
	total window.Tally
	// err is the error of every throttled call.
	err *OpenError
}

// withThrottle returns r as breaker b, whose rules were prev (nil for a
// new breaker), applies it: r itself if neither throttles, else a copy
// carrying prev's throttle, or a new one. A throttle that r turns off
// keeps its count of refusals and gets probability 0; a new window
// geometry empties its window and sets its probability to 0. It reports
// whether the probability in force was above 0. b.mu must be held, or b
// not yet shared.
func (r *rules) withThrottle(b *Breaker, prev *rules) (*rules, bool) {
	var t *throttle
	if prev != nil {
		t = prev.thr
	}
	if t == nil && !r.throttle {
		return r, false
	}
	gen := uint64(uint32(b.state.Load().gen())) << 32
	c := *r
	if t == nil {
		t = &throttle{err: &OpenError{Name: b.name, State: Closed, Reason: ReasonThrottled, b: b}}
		t.win.Store(window.New(r.width, r.buckets))
		t.p.Store(gen)
		c.thr = t
		return &c, false
	}
	c.thr = t
	was := uint32(t.p.Load()) != 0
	reshaped := prev.width != r.width || prev.buckets != r.buckets
	if reshaped {
		t.win.Store(window.New(r.width, r.buckets))
	}
	if !r.throttle || reshaped {
		t.p.Store(gen)
	}
	return &c, was
}

// throttleProbability is the formula of Policy.Throttle: the probability
// of refusing a call when the window holds requests requests, accepts of
// them successes, in throttle.p's fixed point.
func throttleProbability(requests, accepts uint64, k float64, minRequests uint64) uint32 {
	if requests < minRequests || requests == 0 {
		return 0
	}
	p := (float64(requests) - k*float64(accepts)) / (float64(requests) + 1)
	if !(p > 0) {
		return 0
	}
	return uint32(min(p*throttleOne, throttleOne-1))
}

// throttleNow is the probability the windows give at now under r for a
// breaker whose state word is w, with the window's snapshot and the
// refusals in it: 0 unless w is closed, not forced closed, and r
// throttles.
func (b *Breaker) throttleNow(now int64, w word, r *rules, t *throttle) (q uint32, s Snapshot, throttled uint64) {
	if !r.throttle || w.state() != Closed || w.mode() == ModeForcedClosed {
		return 0, Snapshot{}, 0
	}
	s = snapshot(b.win.Load(), now)
	throttled = t.win.Load().Sum(now).Counted
	return throttleProbability(s.Counted+throttled, s.Counted-s.Failures, r.p.Throttle.K, r.thrMin), s, throttled
}

// rethrottle judges the probability at now in generation gen and puts it
// in force, unless the generation has moved on. It returns the
// probability in force afterwards (another caller's, if one stored
// first) and the window it was judged on, and logs when throttling
// starts or ends.
func (b *Breaker) rethrottle(now int64, gen uint64) (uint32, Snapshot) {
	r := b.rules.Load()
	t := r.thr
	if t == nil {
		return 0, Snapshot{}
	}
	v := t.p.Load()
	w := b.state.Load()
	if uint32(v>>32) != uint32(gen) || w.gen() != gen {
		return 0, Snapshot{}
	}
	q, s, throttled := b.throttleNow(now, w, r, t)
	if uint32(v) == q {
		return q, s
	}
	// The windows are read after v: a change of generation since has
	// changed v, and fails the swap.
	if !t.p.CompareAndSwap(v, v&^math.MaxUint32|uint64(q)) {
		return uint32(t.p.Load()), s
	}
	if (uint32(v) == 0) != (q == 0) {
		b.logThrottle(q, s, throttled)
	}
	return q, s
}

// throttleAdmit decides a closed-state call while the probability in
// force is above 0: it judges the probability anew, draws, and admits the
// call (roleCounted), refuses it (the throttle's error), or, for a shadow
// breaker, admits it as one it would have refused (roleShadow). A
// throttled call counts in the throttle's window, in Counters.Throttled,
// and in Counters.Rejected or Counters.ShadowRejected.
func (b *Breaker) throttleAdmit(w word) (uint8, error) {
	now := b.opt.tb.Now()
	q, s := b.rethrottle(now, w.gen())
	r := b.rules.Load()
	t := r.thr
	if q == 0 || t == nil || !(b.opt.random() < float64(q)/throttleOne) {
		return roleCounted, nil
	}
	// The trip rules keep their sample: while the window holds fewer
	// than MinRequests counted calls, the call goes through.
	if s.Counted < uint64(r.p.MinRequests) {
		return roleCounted, nil
	}
	win := t.win.Load()
	win.Touch(now)
	win.Add(window.Success)
	t.total.Inc(window.Success)
	if w.mode() == ModeShadow {
		b.tally.Inc(countShadowRejected)
		return roleShadow, nil
	}
	b.tally.Inc(countRejected)
	return 0, t.err
}

// endThrottleLocked starts the throttle of generation gen: no probability
// and an empty window. Part of every change of generation (endGenLocked).
// b.mu must be held.
func (b *Breaker) endThrottleLocked(gen uint64) {
	r := b.rules.Load()
	if t := r.thr; t != nil {
		t.p.Store(uint64(uint32(gen)) << 32)
		t.win.Store(window.New(r.width, r.buckets))
	}
}

// rethrottlePolicy puts in force the probability the policy SetPolicy has
// just set gives, and logs the end of throttling if the policy ended it
// (was: the probability in force before it was above 0).
func (b *Breaker) rethrottlePolicy(now int64, was bool) {
	t := b.rules.Load().thr
	if t == nil {
		return
	}
	q, _ := b.rethrottle(now, b.state.Load().gen())
	if was && q == 0 && uint32(t.p.Load()) == 0 {
		b.logThrottle(0, snapshot(b.win.Load(), now), 0)
	}
}

// throttleProbabilityNow is Status.ThrottleProbability: the probability
// with which the breaker refuses its next call, judged at now, or 0 while
// the probability in force is 0.
func (b *Breaker) throttleProbabilityNow(now int64) float64 {
	r := b.rules.Load()
	t := r.thr
	if t == nil {
		return 0
	}
	v := t.p.Load()
	w := b.state.Load()
	if uint32(v) == 0 || uint32(v>>32) != uint32(w.gen()) {
		return 0
	}
	q, _, _ := b.throttleNow(now, w, r, t)
	return float64(q) / throttleOne
}

// throttledTotal is Counters.Throttled.
func (b *Breaker) throttledTotal() uint64 {
	if t := b.rules.Load().thr; t != nil {
		return t.total.Load(window.Success)
	}
	return 0
}

// logThrottle records the start (q > 0) or the end (q == 0) of throttling,
// at Info:
//
//	level=INFO msg="breaker throttling" breaker.name=orders.Create breaker.probability=0.2 breaker.counted=40 breaker.failures=24 breaker.throttled=0 breaker.window=5s
func (b *Breaker) logThrottle(q uint32, s Snapshot, throttled uint64) {
	l := b.opt.logger
	if l == nil {
		return
	}
	msg := "breaker throttling ended"
	if q > 0 {
		msg = "breaker throttling"
	}
	p := math.Round(float64(q)/throttleOne*1000) / 1000
	l.LogAttrs(context.Background(), slog.LevelInfo, msg, slog.Attr{Key: logGroup, Value: slog.GroupValue(
		slog.String("name", b.name),
		slog.Float64("probability", p),
		slog.Uint64("counted", s.Counted),
		slog.Uint64("failures", s.Failures),
		slog.Uint64("throttled", throttled),
		slog.String("window", b.rules.Load().p.Window.String()))})
}
