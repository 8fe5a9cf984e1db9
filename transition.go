package breaker

import (
	"math"
	"time"

	"github.com/govkit/breaker/internal/window"
)

// never is the offset of "no such instant yet".
const never = math.MinInt64

// transitionLocked moves the breaker to state to (mode m), ending the
// generation and the run, and queues the event. b.mu must be held.
func (b *Breaker) transitionLocked(now int64, to State, m Mode, reason Reason, snap Snapshot, cooldown int64) {
	b.endGenLocked(b.state.Load().gen(), false)
	if h := b.hist; h != nil && h.thrEnded && h.thrWhy == "" {
		h.thrWhy = string(reason)
	}
	var from State
	for {
		w := b.state.Load()
		from = w.state()
		if b.state.CompareAndSwap(w, w.next(to, m)) {
			break
		}
	}
	if from == to {
		return
	}
	if from == HalfOpen {
		b.endProbesLocked()
	}
	b.countTransitionLocked(from, to, reason)
	if !b.opt.observed() {
		return
	}
	var out *Outage
	if o, ok := b.outageLocked(now); ok {
		out = &o
	}
	b.queueLocked(Event{
		Name:      b.name,
		From:      from,
		To:        to,
		Reason:    reason,
		Time:      b.opt.tb.Time(now),
		Snapshot:  snap,
		Cooldown:  time.Duration(cooldown),
		Doublings: int(b.doublings()),
		Mode:      m,
		Outage:    out,
	})
}

// tripLocked opens a closed breaker on rule reason and the evidence snap.
// b.mu must be held.
func (b *Breaker) tripLocked(now int64, r *rules, reason Reason, snap Snapshot) {
	t := Trip{Reason: reason, Window: snap, SlowCall: time.Duration(r.slowCall)}
	if r.consec > 0 {
		t.Run = b.runLength()
	}
	b.histLocked().lastTrip = reason
	if b.beginOutageLocked(now, r, t, true) {
		b.setDoublings(0)
	} else {
		// Not settled since the last close: back off further.
		b.setDoublings(b.nextLevel(r))
	}
	b.openLocked(now, r, reason, snap)
}

// reopenLocked sends a half-open breaker back to open with a longer
// cooldown. b.mu must be held.
func (b *Breaker) reopenLocked(now int64, r *rules, reason Reason) {
	b.setDoublings(b.nextLevel(r))
	h := b.histLocked()
	h.out.reopens++
	b.openLocked(now, r, reason, h.out.trip.Window)
}

// maxLevel bounds the doublings; OpenFor·2^62 overflows nothing we
// compute because baseCooldown checks before shifting.
const maxLevel = 62

// nextLevel is the doublings after one more reopen under r: one more,
// until the cooldown has reached MaxOpenFor, where it stays, so that
// Event.Doublings counts the doublings in effect. b.mu must be held.
func (b *Breaker) nextLevel(r *rules) uint8 {
	l := b.doublings()
	if l >= maxLevel || r.openFor > r.maxOpenFor>>l || r.openFor<<l >= r.maxOpenFor {
		return l
	}
	return l + 1
}

// openLocked opens the breaker for a cooldown: reason is what opened it
// now, snap the window of this transition's event. b.mu must be held.
func (b *Breaker) openLocked(now int64, r *rules, reason Reason, snap Snapshot) {
	cd := b.cooldown(r)
	until := now + cd
	if until < now {
		until = math.MaxInt64
	}
	b.openErr.Store(b.openError(Open, reason, until, cd))
	b.countOpenLocked(now)
	b.transitionLocked(now, Open, b.state.Load().mode(), reason, snap, cd)
	b.transitionDue.Store(until) // after the state word: see transitionDue
}

// openError is the error of the calls refused in state s for reason,
// with the cooldown cd ending at until (0, never: none). b.mu must be
// held.
func (b *Breaker) openError(s State, reason Reason, until, cd int64) *OpenError {
	o := b.histLocked().out
	e := &OpenError{
		Name:     b.name,
		State:    s,
		Reason:   reason,
		Trip:     o.trip,
		Since:    b.opt.tb.Time(o.since),
		Cooldown: time.Duration(cd),
		b:        b,
	}
	if until != never {
		e.Until = b.opt.tb.Time(until)
	}
	return e
}

// countOpenLocked counts a transition to Open about to be made, not a
// forced open of an open breaker, and notes when the breaker left Closed.
// b.mu must be held.
func (b *Breaker) countOpenLocked(now int64) {
	h := b.histLocked()
	switch b.state.Load().state() {
	case Closed:
		h.openedAt = now
		fallthrough
	case HalfOpen:
		h.opens++
	}
}

// baseCooldown is min(OpenFor·2^level, MaxOpenFor).
func (b *Breaker) baseCooldown(r *rules) int64 {
	if l := b.doublings(); l < maxLevel && r.openFor <= r.maxOpenFor>>l {
		return min(r.openFor<<l, r.maxOpenFor)
	}
	return r.maxOpenFor
}

// cooldown is the base cooldown scaled by a jitter factor drawn uniformly
// from [1-Jitter, 1+Jitter]; the draw is kept in b.draw (0.5, a factor of
// 1, without jitter) for a cut. b.mu must be held.
func (b *Breaker) cooldown(r *rules) int64 {
	h := b.histLocked()
	h.draw = 0.5
	if r.p.Jitter > 0 {
		h.draw = b.opt.random()
	}
	return b.jittered(r)
}

// jittered is r's base cooldown scaled by the factor of b.draw under r's
// jitter. b.mu must be held.
func (b *Breaker) jittered(r *rules) int64 {
	d := b.baseCooldown(r)
	if j := r.p.Jitter; j > 0 {
		d = int64(float64(d) * (1 - j + 2*j*b.histLocked().draw))
	}
	return max(d, 1)
}

// halfOpenLocked lets probes through. There is no probe timeout until a
// probe is admitted (admitProbe).
func (b *Breaker) halfOpenLocked(now int64, m Mode, reason Reason) {
	if h := b.hist; h != nil {
		h.passed = 0
		b.endProbesLocked()
		h.inflight = h.inflight[:0]
	}
	why := reason
	if e := b.openErr.Load(); e != nil {
		why = e.Reason
	}
	b.openErr.Store(b.openError(HalfOpen, why, never, 0))
	b.transitionLocked(now, HalfOpen, m, reason, b.histLocked().out.trip.Window, 0)
	// After the state word (see transitionDue).
	b.transitionDue.Store(math.MaxInt64)
}

// closeLocked closes the breaker on an empty window, stored after the
// generation has moved on (see recordSuccess).
func (b *Breaker) closeLocked(now int64, m Mode, reason Reason) {
	h := b.histLocked()
	if h.openedAt != never {
		h.openTotal += max(0, now-h.openedAt)
	}
	h.openedAt, h.closedAt = never, now
	b.openErr.Store(nil)
	b.transitionLocked(now, Closed, m, reason, Snapshot{}, 0)
	b.win.Store(b.nextWindow(b.rules.Load()))
}

// nextWindow is a new, empty window for r, spread over stripes at once
// if the current one's tally had spread.
func (b *Breaker) nextWindow(r *rules) *window.Window {
	w := window.New(r.width, r.buckets)
	if b.win.Load().Striped() {
		w.Spread()
	}
	return w
}

// bumpGenLocked starts a new generation without a transition, keeping the
// run of consecutive failures. b.mu must be held.
func (b *Breaker) bumpGenLocked() {
	b.endGenLocked(b.state.Load().gen(), true)
	for {
		w := b.state.Load()
		if b.state.CompareAndSwap(w, w.bump()) {
			return
		}
	}
}

// endGenLocked is the first step of every change of generation, before
// the word leaves gen: it seals the window, moving its final totals to the
// history, and hands the run to gen+1 (its length kept if keepRun), so no
// result of gen reaches a later window or run (see recordSuccess). b.mu
// must be held.
func (b *Breaker) endGenLocked(gen uint64, keepRun bool) {
	var got [window.Kinds]uint64
	b.win.Load().Seal(&got)
	if got != [window.Kinds]uint64{} {
		h := b.histLocked()
		for k := range got {
			h.sealed[k] += got[k]
		}
	}
	b.handRunLocked(gen+1, keepRun)
	b.endThrottleLocked(gen + 1)
}

// toHalfOpen moves an open breaker whose cooldown has ended to half-open.
func (b *Breaker) toHalfOpen(now int64, seen word) {
	b.mu.Lock()
	w := b.state.Load()
	if w == seen && w.state() == Open && w.mode() != ModeForcedOpen && now >= b.transitionDue.Load() {
		b.halfOpenLocked(now, w.mode(), ReasonCooldown)
	}
	b.mu.Unlock()
	b.flush()
}

// probeTimeout reopens a half-open breaker whose slots are all taken and
// whose oldest probe has been in flight for one cooldown (see admitProbe).
func (b *Breaker) probeTimeout(now int64, seen word) {
	b.mu.Lock()
	w := b.state.Load()
	r := b.rules.Load()
	if w.gen() == seen.gen() && w.state() == HalfOpen &&
		w.issued() >= r.probes && now >= b.transitionDue.Load() {
		b.reopenLocked(now, r, ReasonProbeTimeout)
	}
	b.mu.Unlock()
	b.flush()
}

// evaluate trips the breaker if it is still closed in gen, not forced
// closed, and a rule in force holds on its current window. The lock-free
// check that called it only filters: its window or rules may have just
// been replaced.
func (b *Breaker) evaluate(now int64, gen uint64) {
	b.mu.Lock()
	w := b.state.Load()
	if w.gen() == gen && w.state() == Closed && w.mode() != ModeForcedClosed {
		r := b.rules.Load()
		snap := snapshot(b.win.Load(), now)
		if reason := b.tripReason(r, snap, now, gen); reason != "" {
			b.tripLocked(now, r, reason, snap)
		}
	}
	b.mu.Unlock()
	b.flush()
}

// tripReason names the trip rule of r that snap or the run of
// consecutive failures meets at now in generation gen, or is "". While
// the throttle refuses calls, the ratio rule holds only when the failure
// ratio is above ErrorRatio with confidence (see throttle.go).
func (b *Breaker) tripReason(r *rules, snap Snapshot, now int64, gen uint64) Reason {
	rule := r.trip.Holds(window.Counts(snap))
	if rule == window.ErrorRatioRule && b.throttling(r, now, gen) && !confidentlyAbove(snap.Failures, snap.Counted, r.p.ErrorRatio) {
		others := r.trip
		others.ErrorRatio = 0
		rule = others.Holds(window.Counts(snap))
	}
	switch rule {
	case window.ErrorRatioRule:
		return ReasonErrorRatio
	case window.ErrorCountRule:
		return ReasonErrorCount
	case window.SlowRatioRule:
		return ReasonSlowRatio
	}
	if r.consec > 0 && b.runLength() >= r.consec {
		return ReasonConsecutiveFailures
	}
	return ""
}
