package breaker

import "context"

// recordSuccess is record for the common case, an in-time success in the
// closed state: one clock read; loads of the rules, the warmup marks, the
// window and its head, and the state word; one counter increment (a load
// and a compare-and-swap, see tally.inc). Like record, it applies the
// rules in force now, not those the call was admitted under.
//
// A result must never land in a window that started after its call was
// admitted (a Reset, a close, a SetPolicy that changes the window). The
// order of the three loads below and of the transition's two writes makes
// sure of it. A transition that starts a window bumps the generation
// first and stores the new window after (closeLocked, setRules); this
// path loads the window first and checks the generation after. If the
// load returns the new window, the store, and so the bump before it, came
// first, and the check fails: the result is stale. If the check passes,
// the bump has not happened yet, so neither has the store, and win is the
// window of generation gen. (Atomic operations are sequentially
// consistent in Go.) A call admitted just after the bump may still load
// the old window; its result then counts in the old window, never in a
// newer one, and the trip rules are decided on the current window under
// the lock (evaluate).
//
// The warmup check comes before the window load because it may read the
// caller's context, which is user code: only the touch separates the
// check from the add. The window's totals are shared by its successive
// windows, so one case is left: a result that passes the check just
// before a transition and is descheduled between the check and the add
// for as long as the transition and a call of the new generation take
// counts in the new window.
func (b *Breaker) recordSuccess(caller context.Context, gen uint64) {
	now := b.opt.tb.now()
	r := b.rules.Load()
	cold := b.coldFast(caller, now, r)
	win := b.win.Load()
	if b.state.Load().gen() != gen || cold {
		b.record(caller, now, gen, Success, false, r)
		return
	}
	win.touch(now, &b.tally)
	b.tally.inc(kSuccess)
	if r.consec > 0 && b.consec.Load() != 0 {
		b.consec.Store(0)
	}
}

// record puts a closed-state outcome into the window and checks the trip
// rules after a failure or a slow call.
func (b *Breaker) record(caller context.Context, now int64, gen uint64, o Outcome, slow bool, r *rules) {
	if o == Ignored {
		b.tally.inc(kIgnored)
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
func (b *Breaker) land(caller context.Context, now int64, gen uint64, win *window, w word, cold bool, o Outcome, slow bool, r *rules) {
	if w.gen() != gen {
		if b.divert(caller, now, gen, w, o, slow) {
			return
		}
		// Admitted before a transition: its result belongs to an episode
		// that is over. It counts in the metrics, never in the window.
		b.countOff(o)
		return
	}
	if cold {
		b.other[oExempt].Add(1)
		b.countOff(o)
		return
	}
	win.touch(now, &b.tally)
	// The outcome is added before the slowness; readers load them in the
	// other order (see tally.outcomes).
	var st *stripe
	if o == Success {
		b.tally.inc(kSuccess)
	} else {
		st = b.tally.incAt(outcomeKind(o))
	}
	if slow {
		b.tally.inc(kSlow)
	}
	if o == Success {
		if r.consec > 0 && b.consec.Load() != 0 {
			b.consec.Store(0)
		}
		if !slow {
			return
		}
	} else if r.consec > 0 {
		// Only while the rule is on: the run is a counter every core's
		// failures write, and without the rule nothing reads it (a
		// SetPolicy that changes the rule starts the run at 0).
		if b.consec.Add(1) >= r.consec {
			st = nil // the rule holds: check
		}
	}
	if w.mode() == ModeForcedClosed {
		return
	}
	if slow {
		st = nil // a slow call always checks (gate.go)
	}
	// A failure that its stripe's gate lets through cannot make a trip
	// rule hold (gate.go).
	if st != nil && b.tally.stripes.Load().skip(st, win, r) {
		return
	}
	b.evaluate(now, gen, r, win, st)
}

// countOff counts an outcome that does not go into the window.
func (b *Breaker) countOff(o Outcome) {
	switch o {
	case Success:
		b.other[oSuccess].Add(1)
	case Ignored:
		b.tally.inc(kIgnored)
	case Timeout:
		b.other[oTimeout].Add(1)
	default:
		b.other[oFailure].Add(1)
	}
}
