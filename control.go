package breaker

import (
	"fmt"
	"math"
	"time"
)

// SetPolicy replaces the breaker's policy. An invalid p is refused with a
// *[PolicyError] and nothing of it is applied. The state is kept, and the
// window unless Window or Buckets change. The new policy judges every
// result recorded from now on, also of calls already in flight; a running
// cooldown may be cut, never lengthened. docs/behaviour.md (§4) has the
// rules in full.
func (b *Breaker) SetPolicy(p Policy) error {
	r, err := compileShared(p)
	if err != nil {
		return err
	}
	b.setRules(r)
	return nil
}

// setRules puts r in force.
func (b *Breaker) setRules(r *rules) {
	now := b.opt.tb.Now()
	b.mu.Lock()
	if r.timed {
		r = r.own(b.rules.Load(), now) // keeps the latency histogram
	} else {
		r = r.carried(b.rules.Load()) // keeps its totals
	}
	r, throttling := r.withThrottle(b, b.rules.Load()) // keeps its throttle
	if h := b.hist; h != nil && b.settledLocked(now, b.rules.Load()) {
		// Settled under the old MaxOpenFor: a longer one does not bring it back.
		h.out.active = false
	}
	old := b.rules.Swap(r)
	if old.width != r.width || old.buckets != r.buckets {
		if b.state.Load().state() == Closed {
			// Calls in flight were admitted for the old window: a new
			// generation, bumped before the store, makes them stale.
			b.bumpGenLocked()
		}
		b.win.Store(b.nextWindow(r))
	}
	if old.consec != r.consec {
		// Trip on failures seen under the new rule only.
		b.handRunLocked(b.state.Load().gen(), false)
	}
	if w := b.state.Load(); w.state() == Open {
		b.shortenCooldownLocked(r)
	} else if w.state() == HalfOpen {
		if uint64(b.probesPassed()) >= r.probes {
			// Probes was lowered below the passes this episode already has.
			b.closeLocked(now, w.mode(), ReasonProbesPassed)
		} else {
			b.refreshProbeDeadlineLocked() // OpenFor or MaxOpenFor may have changed
		}
	}
	b.mu.Unlock()
	b.flush()
	b.rethrottlePolicy(now, throttling)
}

// shortenCooldownLocked cuts the running cooldown to what r gives it (its
// doublings, its jitter at the running cooldown's draw) when that is
// shorter. b.mu must be held.
func (b *Breaker) shortenCooldownLocked(r *rules) {
	e := b.openErr.Load()
	if e == nil || e.Until.IsZero() || e.Cooldown <= 0 {
		return
	}
	cd := int64(e.Cooldown)
	ncd := b.jittered(r)
	if ncd >= cd {
		return
	}
	start := b.transitionDue.Load() - cd
	b.transitionDue.Store(start + ncd)
	ne := *e
	ne.Until = b.opt.tb.Time(start + ncd)
	ne.Cooldown = time.Duration(ncd)
	b.openErr.Store(&ne)
}

// SetMode changes how the breaker applies its state machine; see [Mode].
// ModeForcedOpen opens it and ModeForcedClosed closes it, with an event if
// the state changes; leaving ModeForcedOpen goes half-open. ModeAuto and
// ModeShadow keep the state. An unknown mode is an error and changes
// nothing.
func (b *Breaker) SetMode(m Mode) error {
	if m > ModeForcedClosed {
		return fmt.Errorf("breaker: unknown mode %d", m)
	}
	if b.opt.overflow && m != ModeForcedClosed {
		// It carries the calls of every key past the cap: in another
		// mode it would pool their failures and refuse them all.
		return fmt.Errorf("breaker: %s is the overflow breaker of its group, forced closed: mode %s refused", b.name, m)
	}
	now := b.opt.tb.Now()
	b.mu.Lock()
	w := b.state.Load()
	from := w.mode()
	switch {
	case from == m:
	case m == ModeForcedOpen:
		if w.state() == Closed && b.beginOutageLocked(now, b.rules.Load(), Trip{Reason: ReasonForcedOpen}, false) {
			// Settled: the doubling starts over, as on a trip.
			b.setDoublings(0)
		}
		if w.state() == Closed {
			b.histLocked().lastTrip = ReasonForcedOpen
		}
		b.openErr.Store(b.openError(Open, ReasonForcedOpen, never, 0))
		b.countOpenLocked(now)
		b.transitionLocked(now, Open, m, ReasonForcedOpen, b.histLocked().out.trip.Window, 0)
		// No cooldown: it ends with the mode. After the state word.
		b.transitionDue.Store(math.MaxInt64)
	case m == ModeForcedClosed:
		if w.state() != Closed {
			b.closeLocked(now, m, ReasonForcedClosed)
		} else {
			b.setModeLocked(m)
		}
	case from == ModeForcedOpen:
		b.endForcedOpenLocked(now)
		b.halfOpenLocked(now, m, ReasonReleased)
	default:
		b.setModeLocked(m)
	}
	b.mu.Unlock()
	b.flush()
	return nil
}

// setModeLocked changes the mode bits only, keeping state and generation.
func (b *Breaker) setModeLocked(m Mode) {
	for {
		w := b.state.Load()
		if b.state.CompareAndSwap(w, w.withMode(m)) {
			return
		}
	}
}

// Reset returns the breaker to Closed with an empty window and the cooldown
// back at Policy.OpenFor, as if new. A forced mode ends; ModeShadow stays.
// Results of calls in flight count only in [Breaker.Counters].
func (b *Breaker) Reset() {
	now := b.opt.tb.Now()
	b.mu.Lock()
	m := b.state.Load().mode()
	switch {
	case b.opt.overflow:
		m = ModeForcedClosed // the overflow breaker stays forced closed
	case m != ModeShadow:
		m = ModeAuto
	}
	b.setDoublings(0)
	h := b.histLocked()
	h.out.active, h.lastTrip = false, "" // Reset ends the outage
	b.closeLocked(now, m, ReasonReset)
	h.closedAt = never // as settled as a new breaker
	b.mu.Unlock()
	b.flush()
}

// endForcedOpenLocked starts the outage afresh when a forced open ends, so
// that its length and its counts run from the release; it keeps its trip,
// and OpenTime keeps the forced time. b.mu must be held.
func (b *Breaker) endForcedOpenLocked(now int64) {
	h := b.histLocked()
	h.out = outage{active: true, since: now, trip: h.out.trip, refused0: b.tally.Load(countRejected)}
	if e := b.openErr.Load(); e != nil {
		ne := *e
		ne.Since = b.opt.tb.Time(now)
		b.openErr.Store(&ne)
	}
}
