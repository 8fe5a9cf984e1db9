package breaker

import (
	"context"

	"github.com/govkit/breaker/internal/window"
)

// The window, its tally and its gates are in internal/window; a breaker
// holds its generation's window and a tally of its own.

// Snapshot is what a breaker's window holds at one instant: the evidence
// the trip rules judge.
type Snapshot struct {
	// Counted is the successes, failures and timeouts in the window.
	Counted uint64 `json:"counted"`
	// Failures is the counted calls that failed, timeouts included.
	Failures uint64 `json:"failures"`
	// Timeouts is the number of failures that were timeouts.
	Timeouts uint64 `json:"timeouts"`
	// Slow is the number of counted calls slower than Policy.SlowCall.
	Slow uint64 `json:"slow"`
}

// ErrorRatio is Failures/Counted, or 0 for an empty window.
func (s Snapshot) ErrorRatio() float64 {
	if s.Counted == 0 {
		return 0
	}
	return float64(s.Failures) / float64(s.Counted)
}

// SlowRatio is Slow/Counted, or 0 for an empty window.
func (s Snapshot) SlowRatio() float64 {
	if s.Counted == 0 {
		return 0
	}
	return float64(s.Slow) / float64(s.Counted)
}

// snapshot is what win holds at now.
func snapshot(win *window.Window, now int64) Snapshot { return Snapshot(win.Sum(now)) }

// The counters of a breaker's own tally.
const (
	countRejected       window.Kind = iota // calls refused without calling fn
	countFallbacks                         // results served by a fallback instead of the downstream
	countIgnored                           // admitted calls whose outcome was Ignored
	countShadowRejected                    // calls a shadow breaker admitted but would have refused
)

// outcomeKind is the window counter a closed-state outcome adds to.
func outcomeKind(o Outcome) window.Kind {
	switch o {
	case Timeout:
		return window.Timeout
	case Failure:
		return window.Failure
	}
	return window.Success
}

// recordSuccess is record for an in-time closed-state success: one clock
// read, a few loads and one counter increment (window.Window.AddBase),
// under the rules in force now.
//
// A result counts only in the window of its own generation, while it
// lasts. Every end of a generation seals its window first, and a new
// window is stored after the word has moved on; this path loads the
// window, then checks the generation, then adds. So a window stored after
// gen ended fails the check, and an add to a sealed one fails and goes to
// record (docs/internals.md, "Results that arrive after their generation").
// The warmup check, which may read the caller's context, comes first.
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
			// Stale: it counts in the metrics, never in the window.
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
		// win was sealed after the check: wait out the change of
		// generation, which holds b.mu from the seal to the new window's
		// store, then go to the window now current, or count as stale.
		b.mu.Lock()
		b.mu.Unlock() // empty: the wait is the point
		win, w = b.win.Load(), b.state.Load()
	}
	// Outcome before slowness, which readers load first, so Slow <=
	// Counted; a seal between the two leaves the call not slow.
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
		// Only while the rule is on: every core's failures write the
		// run, and a SetPolicy that changes the rule restarts it.
		run = b.failRun(gen) >= r.consec
	}
	if w.mode() == ModeForcedClosed {
		return
	}
	// The trip check: a failure below its gate skips it (see
	// window.Window.Check); a slow call always makes it.
	if run || win.Check(now, &r.trip, at, !slow) != window.NoRule {
		b.evaluate(now, gen)
	}
	if o != Success && r.throttle {
		b.rethrottle(now, gen) // Policy.Throttle, once the trip rules have had their say
	}
}

// The run of consecutive failures lives in Breaker.consec: its length in
// the low 32 bits, the low 32 bits of its generation in the high 32. A
// failure lengthens it, and a success ends it, only in a CAS that finds
// its own generation there; every end of a generation hands the run on
// before the state word moves (endGenLocked).

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
