package breaker

import (
	"context"

	"github.com/govkit/breaker/internal/window"
)

// recordSuccess is record for the common case, an in-time success in the
// closed state: one clock read; loads of the rules, the warmup marks, the
// window and its head, and the state word; one counter increment (a load,
// a test of the seal and a compare-and-swap, see window.Window.AddBase).
// Like record, it applies the rules in force now, not those the call was
// admitted under.
//
// A result counts in the window of the generation its call was admitted
// in, while that generation lasts, or in none: never in a window that
// started after its call was admitted (a Reset, a close, a SetPolicy that
// changes the window), nor in one that a trip has frozen. Each window has
// totals of its own; every end of a generation first seals the window
// then current, which makes every later add to it fail, and a transition
// that starts a window stores it after the generation has moved on. This
// path loads the window, then checks the generation, then adds:
//
//   - if it loaded a window stored after generation gen ended, the check
//     fails: the store came after the end;
//   - if the check passes, gen had not ended, so win is gen's window (or,
//     for a call admitted just after a transition, the window before it,
//     sealed already);
//   - the add succeeds only before win is sealed, so before gen ends, and
//     only win's own totals hold it. An add that fails goes to record,
//     which waits for the transition under way and then puts the result
//     in the window that replaced win if gen is still current, or counts
//     it as stale.
//
// (Atomic operations are sequentially consistent in Go.) The trip rules
// are decided on the current window under the lock (evaluate).
//
// The warmup check comes before the window load because it may read the
// caller's context, which is user code.
func (b *Breaker) recordSuccess(caller context.Context, gen uint64) {
	now := b.opt.tb.Now()
	r := b.rules.Load()
	cold := b.coldFast(caller, now, r)
	win := b.win.Load()
	if b.state.Load().gen() != gen || cold {
		b.record(caller, now, gen, Success, false, r)
		return
	}
	win.Touch(now)
	if !win.AddBase(window.Success) { // Add, its common case inlined
		if _, ok := win.Add(window.Success); !ok {
			b.record(caller, now, gen, Success, false, r) // win was sealed
			return
		}
	}
	if r.consec > 0 && uint32(b.consec.Load()) != 0 {
		b.endRun(gen)
	}
}

// record puts a closed-state outcome into the window and checks the trip
// rules after a failure or a slow call.
func (b *Breaker) record(caller context.Context, now int64, gen uint64, o Outcome, slow bool, r *rules) {
	if o == Ignored {
		b.tally.Inc(countIgnored)
		return
	}
	// The same order as recordSuccess, for the same reason.
	cold := b.cold(caller, now, r)
	win := b.win.Load()
	w := b.state.Load()
	b.land(caller, now, gen, win, w, cold, o, slow, r)
}

// land is record after its loads: win and w are the window and the state
// word a result of generation gen found, in that order.
func (b *Breaker) land(caller context.Context, now int64, gen uint64, win *window.Window, w word, cold bool, o Outcome, slow bool, r *rules) {
	var at *window.Stripe
	for {
		if w.gen() != gen {
			if b.divert(caller, now, gen, w, o, slow) {
				return
			}
			// Admitted before a transition: its result belongs to an
			// episode that is over. It counts in the metrics, never in
			// the window.
			b.countOutcome(o)
			return
		}
		if cold {
			b.other[oExempt].Add(1)
			b.countOutcome(o)
			return
		}
		win.Touch(now)
		k := outcomeKind(o)
		if win.AddBase(k) {
			break // to the base counters: at stays nil
		}
		var ok bool
		if at, ok = win.Add(k); ok {
			break
		}
		// win was sealed after the check: a change of generation is under
		// way, or, for a call admitted just after one, was made before
		// the window that replaced win was stored. Both hold b.mu from the
		// seal to the store; past them, the result is stale, or of the
		// generation now current, whose window it goes to.
		b.mu.Lock()
		b.mu.Unlock() // empty: the wait is the point
		win, w = b.win.Load(), b.state.Load()
	}
	// The outcome is added before the slowness; readers load them in the
	// other order. A seal between the two leaves the call counted and not
	// slow.
	if slow {
		win.Add(window.Slow)
	}
	run := false
	if o == Success {
		if r.consec > 0 && uint32(b.consec.Load()) != 0 {
			b.endRun(gen)
		}
		if !slow {
			return
		}
	} else if r.consec > 0 {
		// Only while the rule is on: the run is a counter every core's
		// failures write, and without the rule nothing reads it (a
		// SetPolicy that changes the rule starts the run at 0).
		run = b.failRun(gen) >= r.consec
	}
	if w.mode() == ModeForcedClosed {
		return
	}
	// The trip check: a failure below its gate skips reading the window
	// (see window.Window.Check); a slow call always reads it, its slowness
	// being ungated.
	if run || win.Check(now, &r.trip, at, !slow) != window.NoRule {
		b.evaluate(now, gen)
	}
}

// The run of consecutive failures (Policy.ConsecutiveFailures) lives in
// Breaker.consec: its length in the low 32 bits, and in the high 32 the
// low 32 bits of the generation it belongs to. A failure adds to it, and a
// success ends it, only if it belongs to the failure's or the success's
// generation, in one compare-and-swap; every end of a generation hands the
// run to the next one before the state word moves on (endGenLocked). So a
// result checked before a Reset never lengthens, nor ends, the run that
// starts with it. (A result would have to be in flight for 2^32
// transitions to find its generation's tag again.)

// maxRun is the longest run counted; a longer one counts as maxRun (see
// compile).
const maxRun = 1<<32 - 1

// failRun adds a failure of generation gen to the run and returns its
// length, or 0 if the run belongs to another generation.
func (b *Breaker) failRun(gen uint64) uint64 {
	for {
		v := b.consec.Load()
		if uint32(v>>32) != uint32(gen) {
			return 0
		}
		n := v
		if uint32(v) < maxRun {
			n++
		}
		if n == v || b.consec.CompareAndSwap(v, n) {
			return uint64(uint32(n))
		}
	}
}

// endRun ends the run on a success of generation gen, if the run belongs
// to it.
func (b *Breaker) endRun(gen uint64) {
	for {
		v := b.consec.Load()
		if uint32(v) == 0 || uint32(v>>32) != uint32(gen) {
			return
		}
		if b.consec.CompareAndSwap(v, v&^maxRun) {
			return
		}
	}
}

// runLength is the length of the run.
func (b *Breaker) runLength() uint64 { return uint64(uint32(b.consec.Load())) }

// handRunLocked gives the run to generation gen, its length kept if keep,
// else 0. b.mu must be held.
func (b *Breaker) handRunLocked(gen uint64, keep bool) {
	for {
		v := b.consec.Load()
		n := uint64(uint32(gen)) << 32
		if keep {
			n |= v & maxRun
		}
		if b.consec.CompareAndSwap(v, n) {
			return
		}
	}
}

// countOutcome counts an outcome that does not go into the window.
func (b *Breaker) countOutcome(o Outcome) {
	switch o {
	case Success:
		b.other[oSuccess].Add(1)
	case Ignored:
		b.tally.Inc(countIgnored)
	case Timeout:
		b.other[oTimeout].Add(1)
	default:
		b.other[oFailure].Add(1)
	}
}
