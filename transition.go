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
	})
}

// tripLocked opens a closed breaker. b.mu must be held.
func (b *Breaker) tripLocked(now int64, r *rules, reason Reason, snap Snapshot) {
	if b.outageEdge != never && now-b.outageEdge < r.maxOpenFor {
		// Not stable for MaxOpenFor since the last outage: back off further.
		b.setDoublings(min(b.doublings()+1, maxLevel))
	} else {
		b.setDoublings(0)
	}
	b.outageEdge = now
	b.openLocked(now, r, reason, reason, snap)
}

// reopenLocked sends a half-open breaker back to open with a longer
// cooldown. b.mu must be held.
func (b *Breaker) reopenLocked(now int64, r *rules, reason Reason) {
	b.setDoublings(min(b.doublings()+1, maxLevel))
	cause, snap := b.trip()
	b.openLocked(now, r, reason, cause, snap)
}

// maxLevel bounds the doublings; OpenFor·2^62 overflows nothing we
// compute because baseCooldown checks before shifting.
const maxLevel = 62

// trip is the reason and window that began the outage, from its error.
func (b *Breaker) trip() (Reason, Snapshot) {
	if e := b.openErr.Load(); e != nil {
		return e.TripReason, e.Snapshot
	}
	return "", Snapshot{}
}

// openLocked opens the breaker for a cooldown: reason is what opened it
// now, cause and snap what began the outage. b.mu must be held.
func (b *Breaker) openLocked(now int64, r *rules, reason, cause Reason, snap Snapshot) {
	cd := b.cooldown(r)
	until := now + cd
	if until < now {
		until = math.MaxInt64
	}
	b.openErr.Store(&OpenError{
		Name:       b.name,
		State:      Open,
		Reason:     reason,
		TripReason: cause,
		Snapshot:   snap,
		Since:      b.opt.tb.Time(b.outageEdge),
		Until:      b.opt.tb.Time(until),
		Cooldown:   time.Duration(cd),
		b:          b,
	})
	b.countOpenLocked()
	b.transitionLocked(now, Open, b.state.Load().mode(), reason, snap, cd)
	b.transitionDue.Store(until) // after the state word: see transitionDue
}

// countOpenLocked counts a transition to Open about to be made, not a
// forced open of an open breaker. b.mu must be held.
func (b *Breaker) countOpenLocked() {
	if b.state.Load().state() != Open {
		b.histLocked().opens++
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
// from [1-Jitter, 1+Jitter].
func (b *Breaker) cooldown(r *rules) int64 {
	d := b.baseCooldown(r)
	if j := r.p.Jitter; j > 0 {
		u := b.opt.random()
		d = int64(float64(d) * (1 - j + 2*j*u))
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
	_, snap := b.trip()
	if e := b.openErr.Load(); e != nil {
		he := *e
		he.State = HalfOpen
		he.Until = time.Time{}
		he.Cooldown = 0
		b.openErr.Store(&he)
	}
	b.transitionLocked(now, HalfOpen, m, reason, snap, 0)
	// After the state word (see transitionDue).
	b.transitionDue.Store(math.MaxInt64)
}

// closeLocked closes the breaker on an empty window, stored after the
// generation has moved on (see recordSuccess).
func (b *Breaker) closeLocked(now int64, m Mode, reason Reason) {
	if b.state.Load().state() != Closed && b.outageEdge != never {
		b.histLocked().openTotal += max(0, now-b.outageEdge)
	}
	b.outageEdge = now
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
		if reason := b.tripReason(r, snap); reason != "" {
			b.tripLocked(now, r, reason, snap)
		}
	}
	b.mu.Unlock()
	b.flush()
}

// tripReason names the trip rule of r that snap or the run of
// consecutive failures meets, or is "".
func (b *Breaker) tripReason(r *rules, snap Snapshot) Reason {
	switch r.trip.Holds(window.Counts(snap)) {
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
