package breaker

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
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
//
// A judgement of 0 after throttling does not store 0 at once but
// qLinger, which refuses nothing and keeps the judgements going, until
// the probability has stayed 0 for one Window since it was last above 0
// (throttle.upAt): only then is 0 stored and the end recorded, so that a
// probability that touches 0 as the window slides does not end and start
// throttling again within a bucket.

// throttleOne is probability 1 in throttle.p's fixed point; qLinger, the
// least probability above 0, marks a throttle whose probability is 0 but
// whose end is not recorded yet (see above).
const (
	throttleOne = 1 << 32
	qLinger     = 1
)

// throttle is a breaker's throttling state.
type throttle struct {
	// p is the refusal probability in force (see above).
	p atomic.Uint64
	// win counts the calls throttled in the current generation, as
	// kSuccess, over buckets of the breaker's window. A change of
	// generation replaces it. It is never sealed: a refusal counted in a
	// window that has just been replaced only misses the formula.
	win atomic.Pointer[slidingWindow]
	// total counts every throttled call, in its kSuccess counter
	// (Counters.Throttled); it is never sealed.
	total tally
	// err is the error of every throttled call.
	err *OpenError
	// upAt is the offset at which the probability was last judged above
	// 0.
	upAt atomic.Int64
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
		t.win.Store(newSlidingWindow(r.width, r.buckets))
		t.p.Store(gen)
		c.thr = t
		return &c, false
	}
	c.thr = t
	was := uint32(t.p.Load()) != 0
	reshaped := prev.width != r.width || prev.buckets != r.buckets
	if reshaped {
		t.win.Store(newSlidingWindow(r.width, r.buckets))
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
	return uint32(min(max(p*throttleOne, qLinger+1), throttleOne-1))
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
	old := uint32(v)
	if q > qLinger {
		t.upAt.Store(now)
	} else if old != 0 {
		// Throttling ends once the probability has stayed 0 for a Window.
		q = qLinger
		if now-t.upAt.Load() >= r.width*int64(r.buckets) {
			q = 0
		}
	}
	if old == q {
		return q, s
	}
	// The windows are read after v: a change of generation since has
	// changed v, and fails the swap.
	if !t.p.CompareAndSwap(v, v&^math.MaxUint32|uint64(q)) {
		return uint32(t.p.Load()), s
	}
	if old == 0 || q == 0 {
		b.logThrottle(q, s, throttled, "")
	}
	return q, s
}

// throttleFloor is the counted calls below which the throttle refuses
// nothing, so that the trip rules keep a sample they can judge with
// confidence: throttleSample·MinRequests, and at least the calls that,
// every one failed, show a failure ratio of ErrorRatio with confidence
// (n/(n+z²) ≥ ErrorRatio), so that a fault that turns hard still trips.
func throttleFloor(r *rules) uint64 {
	floor := throttleSample * uint64(r.p.MinRequests)
	if e := r.p.ErrorRatio; e > 0 && e < 1 {
		floor = max(floor, uint64(math.Ceil(throttleZ*throttleZ*e/(1-e))))
	}
	return floor
}

// marginLocked reports whether the ratio rule asks for confidence at now
// in generation gen (tripReason): while the throttle's refusals thin the
// window (throttling has not ended: the probability in force is above 0,
// or lingers at qLinger, and the window holds calls it refused), and,
// where the throttle acts before the ratio rule (ErrorRatio above
// 1 − 1/K), while the breaker is closed in an outage that has not
// settled, whose window refills from empty. b.mu must be held.
func (b *Breaker) marginLocked(r *rules, now int64, gen uint64) bool {
	t := r.thr
	if t == nil || !r.throttle {
		return false
	}
	v := t.p.Load()
	if uint32(v) != 0 && uint32(v>>32) == uint32(gen) && t.win.Load().Sum(now).Counted > 0 {
		return true
	}
	return r.p.ErrorRatio > 1-1/r.p.Throttle.K && !b.settledLocked(now, r) && b.state.Load().state() == Closed
}

// throttleZ is the normal quantile of the one-sided confidence the ratio
// rule asks for while the throttle refuses calls: three standard errors.
const throttleZ = 3

// throttleSample is how many times MinRequests counted calls the throttle
// leaves in the window (throttleFloor).
const throttleSample = 3

// confidentlyAbove reports whether failures of counted calls show a
// failure ratio of at least ratio with confidence: the lower bound of the
// Wilson score interval at throttleZ reaches ratio (a ratio of 1 asks for
// every call to have failed).
func confidentlyAbove(failures, counted uint64, ratio float64) bool {
	if counted == 0 {
		return false
	}
	if ratio >= 1 {
		return failures >= counted
	}
	n, z := float64(counted), float64(throttleZ)
	f := float64(failures) / n
	lower := (f + z*z/(2*n) - z*math.Sqrt(f*(1-f)/n+z*z/(4*n*n))) / (1 + z*z/n)
	return lower >= ratio
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
	// The trip rules keep their sample: while the window holds fewer
	// than throttleFloor counted calls, the call goes through.
	if q <= qLinger || t == nil || s.Counted < throttleFloor(r) || !(b.opt.random() < float64(q)/throttleOne) {
		return roleCounted, nil
	}
	win := t.win.Load()
	win.Touch(now)
	win.Add(kSuccess)
	t.total.Inc(kSuccess)
	if w.mode() == ModeShadow {
		b.tally.Inc(countShadowRejected)
		return roleShadow, nil
	}
	b.tally.Inc(countRejected)
	return 0, t.err
}

// endThrottleLocked starts the throttle of generation gen: no probability
// and an empty window. Part of every change of generation (endGenLocked);
// a throttling that it ends is recorded by flush, after the lock. b.mu
// must be held.
func (b *Breaker) endThrottleLocked(gen uint64) {
	r := b.rules.Load()
	if t := r.thr; t != nil {
		if old := t.p.Swap(uint64(uint32(gen)) << 32); uint32(old) != 0 && b.opt.logger != nil {
			b.histLocked().thrEnded = true
		}
		t.win.Store(newSlidingWindow(r.width, r.buckets))
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
	if v := t.p.Load(); q == qLinger && uint32(v) == qLinger && t.p.CompareAndSwap(v, v&^math.MaxUint32) {
		q = 0 // a policy that ends throttling ends it at once
	} else if q != 0 || uint32(v) != 0 {
		return
	}
	if was {
		b.logThrottle(0, snapshot(b.win.Load(), now), 0, "policy")
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
	if uint32(v) <= qLinger || uint32(v>>32) != uint32(w.gen()) {
		return 0
	}
	q, s, _ := b.throttleNow(now, w, r, t)
	if s.Counted < throttleFloor(r) {
		return 0 // the floor lets the next call through
	}
	return float64(q) / throttleOne
}

// throttledTotal is Counters.Throttled.
func (b *Breaker) throttledTotal() uint64 {
	if t := b.rules.Load().thr; t != nil {
		return t.total.Load(kSuccess)
	}
	return 0
}

// logThrottle records the start (q > 0) or the end (q == 0) of throttling,
// at Info, with what ended it if not the probability (because: the
// transition's reason, or "policy"):
//
//	level=INFO msg="breaker throttling" breaker.name=orders.Create breaker.probability=0.2 breaker.counted=40 breaker.failures=24 breaker.throttled=0 breaker.window=5s
func (b *Breaker) logThrottle(q uint32, s Snapshot, throttled uint64, because string) {
	l := b.opt.logger
	if l == nil {
		return
	}
	msg := "breaker throttling ended"
	if q > 0 {
		msg = "breaker throttling"
	}
	p := math.Round(float64(q)/throttleOne*1000) / 1000
	attrs := []slog.Attr{slog.String("name", b.name), slog.Float64("probability", p)}
	if because == "" || because == "policy" {
		// A transition's record says what the window held.
		attrs = append(attrs,
			slog.Uint64("counted", s.Counted),
			slog.Uint64("failures", s.Failures),
			slog.Uint64("throttled", throttled),
			slog.String("window", b.rules.Load().p.Window.String()))
	}
	if because != "" {
		attrs = append(attrs, slog.String("because", because))
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, msg, slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}
