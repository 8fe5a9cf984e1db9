package breaker

import (
	"fmt"
	"math"
	"time"
)

// SetPolicy replaces the breaker's policy. An invalid p is refused with a
// *[PolicyError] and the breaker keeps its old policy; nothing of p is
// applied. The state is kept. The window is kept too, unless Window or
// Buckets change, in which case it starts empty (counts from buckets of
// another width cannot be compared), and no result of a call admitted
// before counts in it.
//
// The new policy applies at once to the results of calls already in
// flight: a result is judged by the policy in force when it is recorded,
// whatever policy admitted its call (only the deadline of Policy.CallTimeout,
// already given to the call, stays). A half-open breaker whose passed
// probes reach a lowered Probes closes at once. An open breaker's running
// cooldown is cut when the new OpenFor or MaxOpenFor make it shorter (to
// what the new policy gives, with the same jitter, from when it began;
// if that has passed, the next call probes), and never lengthened.
func (b *Breaker) SetPolicy(p Policy) error {
	r, err := compileShared(p)
	if err != nil {
		return err
	}
	b.setRules(r)
	return nil
}

// setRules puts r in force. Results recorded from now on are judged by r,
// whenever their call was admitted.
func (b *Breaker) setRules(r *rules) {
	now := b.opt.tb.Now()
	b.mu.Lock()
	if r.timed {
		r = r.own(b.rules.Load(), now) // keeps the latency histogram
	} else {
		r = r.carried(b.rules.Load()) // keeps its totals
	}
	old := b.rules.Swap(r)
	if old.width != r.width || old.buckets != r.buckets {
		if b.state.Load().state() == Closed {
			// Calls in flight were admitted for the old window: a new
			// generation makes their results stale, like a close does.
			// The bump comes before the store (see recordSuccess).
			b.bumpGenLocked()
		}
		b.win.Store(b.nextWindow(r))
	}
	if old.consec != r.consec {
		// The run counted under the old rule may be longer than the new
		// one allows; trip on failures seen under the new rule only.
		b.handRunLocked(b.state.Load().gen(), false)
	}
	if w := b.state.Load(); w.state() == Open {
		b.shortenCooldownLocked(old, r)
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
}

// shortenCooldownLocked cuts the running cooldown to what r would have
// drawn for it, with the same jitter factor, when that is shorter: a
// policy that lowers OpenFor or MaxOpenFor during an outage takes effect
// in the outage, while one that raises them waits for the next cooldown.
// A forced open has no cooldown to cut. b.mu must be held.
func (b *Breaker) shortenCooldownLocked(old, r *rules) {
	e := b.openErr.Load()
	if e == nil || e.Until.IsZero() || e.Cooldown <= 0 {
		return
	}
	oldBase, newBase := b.baseCooldown(old), b.baseCooldown(r)
	if newBase >= oldBase {
		return
	}
	cd := int64(e.Cooldown)
	until := b.transitionDue.Load()
	start := until - cd
	ncd := max(int64(float64(cd)*float64(newBase)/float64(oldBase)), 1)
	if ncd >= cd {
		return
	}
	b.transitionDue.Store(start + ncd)
	ne := *e
	ne.Until = b.opt.tb.Time(start + ncd)
	ne.Cooldown = time.Duration(ncd)
	b.openErr.Store(&ne)
}

// SetMode changes how the breaker applies its state machine; see [Mode].
// Entering ModeForcedOpen opens the breaker and entering ModeForcedClosed
// closes it, each with an event if the state changes (forcing open an open
// breaker is no transition: no event, and Counters.Opens stays); leaving
// ModeForcedOpen goes to half-open, so the downstream is probed before
// traffic returns. Switching between ModeAuto and ModeShadow keeps the
// state, and calls in flight still report into it. An unknown mode is an
// error and changes nothing.
func (b *Breaker) SetMode(m Mode) error {
	if m > ModeForcedClosed {
		return fmt.Errorf("breaker: unknown mode %d", m)
	}
	now := b.opt.tb.Now()
	b.mu.Lock()
	w := b.state.Load()
	from := w.mode()
	switch {
	case from == m:
	case m == ModeForcedOpen:
		cause, snap := b.trip()
		if w.state() == Closed {
			cause = ReasonForcedOpen
			if b.outageEdge != never && now-b.outageEdge >= b.rules.Load().maxOpenFor {
				// Stable for MaxOpenFor: the doubling starts over, whatever
				// ends the closed spell (a trip does the same).
				b.setDoublings(0)
			}
			b.outageEdge = now
		}
		b.openErr.Store(&OpenError{
			Name:       b.name,
			State:      Open,
			Reason:     ReasonForcedOpen,
			TripReason: cause,
			Snapshot:   snap,
			Since:      b.opt.tb.Time(b.outageEdge),
			b:          b,
		})
		b.countOpenLocked()
		b.transitionLocked(now, Open, m, ReasonForcedOpen, snap, 0)
		// A forced open has no cooldown to wait out: it ends only when
		// the mode is left. After the state word: see transitionDue.
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

// setModeLocked changes the mode bits only, keeping state and generation so
// that calls in flight still report.
func (b *Breaker) setModeLocked(m Mode) {
	for {
		w := b.state.Load()
		if b.state.CompareAndSwap(w, w.withMode(m)) {
			return
		}
	}
}

// Reset returns the breaker to Closed with an empty window and the cooldown
// back at Policy.OpenFor, as if it had just been created. A forced mode
// ends; ModeShadow stays. The results of calls in flight when Reset is
// called never count in the new window, nor in its run of consecutive
// failures, however late they arrive; [Breaker.Counters] counts them.
func (b *Breaker) Reset() {
	now := b.opt.tb.Now()
	b.mu.Lock()
	m := b.state.Load().mode()
	if m != ModeShadow {
		m = ModeAuto
	}
	b.setDoublings(0)
	b.closeLocked(now, m, ReasonReset)
	b.outageEdge = never // as stable as a new breaker
	b.mu.Unlock()
	b.flush()
}

// endForcedOpenLocked starts the outage afresh when a forced open ends. A forced
// open is an operator's decision, not a failing downstream: measured from
// its start, a breaker released after a two-hour maintenance window would
// be a P1 the moment its first probe went out. From the release on, the
// breaker is judged like any other, and if its probes fail the alert
// counts from the release. The time spent open so far, forced time
// included, stays in Counters.OpenTime. The open error, which the
// half-open episode's refusals copy, says the same. b.mu must be held.
func (b *Breaker) endForcedOpenLocked(now int64) {
	if b.outageEdge != never {
		b.histLocked().openTotal += max(0, now-b.outageEdge)
	}
	b.outageEdge = now
	if e := b.openErr.Load(); e != nil {
		ne := *e
		ne.Since = b.opt.tb.Time(now)
		b.openErr.Store(&ne)
	}
}
