package breaker

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// The state machine, and what the modes do to it:
//
//	                 a trip rule holds
//	    +------------------------------------+
//	    |                                    v
//	  Closed                               Open <------------+
//	    ^                                    |                |
//	    | every probe passed                 | cooldown over  | a probe failed,
//	    |                                    v                | or probe timeout
//	    +------------------------------ HalfOpen -------------+
//
//	ModeAuto          the machine above; refusals return ErrOpen
//	ModeShadow        the same machine, but a refused call is admitted
//	                  and counted off the window (Counters.ShadowRejected)
//	ModeForcedOpen    entered from any state: Open, no cooldown ends it;
//	                  leaving it for ModeAuto or ModeShadow goes to
//	                  HalfOpen (released)
//	ModeForcedClosed  entered from any state: Closed, no rule trips it
//	Reset             from any state to Closed; a forced mode ends

// State is the position of a breaker in its state machine.
type State uint8

const (
	// Closed: calls go through and their outcomes fill the window.
	Closed State = iota
	// Open: calls are refused with ErrOpen until the cooldown ends.
	Open
	// HalfOpen: the next Policy.Probes calls go through as probes, the
	// rest are refused (see the diagram above).
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "state(" + itoa(uint64(s)) + ")"
}

// MarshalText writes the state's name, so states read well in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name, so a JSON snapshot decodes back.
func (s *State) UnmarshalText(b []byte) error {
	for c := Closed; c <= HalfOpen; c++ {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown state %q", b)
}

// Reason says why a transition happened; a trip's names its rule.
type Reason string

const (
	ReasonErrorRatio          Reason = "error_ratio"          // Policy.ErrorRatio reached
	ReasonErrorCount          Reason = "error_count"          // Policy.ErrorCount reached
	ReasonSlowRatio           Reason = "slow_ratio"           // Policy.SlowRatio reached
	ReasonConsecutiveFailures Reason = "consecutive_failures" // Policy.ConsecutiveFailures reached
	ReasonCooldown            Reason = "cooldown_elapsed"     // open → half-open
	ReasonProbesPassed        Reason = "probes_passed"        // half-open → closed
	ReasonProbeFailed         Reason = "probe_failed"         // half-open → open
	ReasonProbeTimeout        Reason = "probe_timeout"        // every slot taken, a probe in flight for a cooldown → open
	ReasonForcedOpen          Reason = "forced_open"          // SetMode(ModeForcedOpen)
	ReasonForcedClosed        Reason = "forced_closed"        // SetMode(ModeForcedClosed)
	ReasonReleased            Reason = "released"             // a forced mode ended
	ReasonReset               Reason = "reset"                // Reset
	// ReasonTimeoutAdapted: not a transition (From equals To); the
	// adaptive timeout changed, as Event.Timeout says.
	ReasonTimeoutAdapted Reason = "timeout_adapted"
)

// Mode is how a breaker applies its state machine. The zero value,
// ModeAuto, is normal operation.
type Mode uint8

const (
	// ModeAuto: the breaker trips, refuses and recovers on its own.
	ModeAuto Mode = iota
	// ModeShadow: the breaker runs and reports as in ModeAuto but refuses
	// nothing: calls it would refuse are counted in ShadowRejected and
	// left out of the window. Use it to try a policy on live traffic.
	ModeShadow
	// ModeForcedOpen: every call is refused until the mode changes;
	// leaving it goes to half-open.
	ModeForcedOpen
	// ModeForcedClosed: every call is admitted and measured; it never trips.
	ModeForcedClosed
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeShadow:
		return "shadow"
	case ModeForcedOpen:
		return "forced_open"
	case ModeForcedClosed:
		return "forced_closed"
	}
	return "mode(" + itoa(uint64(m)) + ")"
}

// MarshalText writes the mode's name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode's name.
func (m *Mode) UnmarshalText(b []byte) error {
	for c := ModeAuto; c <= ModeForcedClosed; c++ {
		if string(b) == c.String() {
			*m = c
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown mode %q", b)
}

// word is the state word: everything the hot path needs, in one atomic
// load.
//
//	bits 0-1   State
//	bits 2-3   Mode
//	bit  4     dropped: the breaker's group has let go of it (group.go)
//	bits 8-15  probes issued in the current half-open episode
//	bits 16-63 generation, bumped on every transition
//
// Invariants (docs/internals.md, "The state word"):
//   - issued is 0 outside HalfOpen, and a slot is claimed or given back
//     by a CAS on the whole word, so only in the episode its caller saw;
//   - issued never wraps, and exceeds Probes only after SetPolicy lowers it;
//   - history.passed never exceeds issued;
//   - the dropped bit, once set, survives every transition.
//
// A transition writes everything else under b.mu before it publishes the
// word, except transitionDue and a new window, stored after it.
type word uint64

const (
	stateMask   = 0x3
	modeShift   = 2
	modeMask    = 0x3 << modeShift
	issuedShift = 8
	issuedMask  = 0xFF << issuedShift
	issuedOne   = 1 << issuedShift
	maxIssued   = 0xFF // admission stops short of the mask: issued never wraps
	genShift    = 16
	genOne      = 1 << genShift
)

// The methods are small enough to inline.

func (w word) state() State   { return State(w & stateMask) }
func (w word) mode() Mode     { return Mode((w & modeMask) >> modeShift) }
func (w word) issued() uint64 { return uint64(w&issuedMask) >> issuedShift }
func (w word) gen() uint64    { return uint64(w >> genShift) }
func (w word) dropped() bool  { return w&droppedBit != 0 }

// plain reports whether w is closed, in any mode, and not dropped.
func (w word) plain() bool { return w&(stateMask|droppedBit) == 0 }

// refusing reports whether a call on w is refused until transitionDue
// without further ado: ModeAuto, not dropped, and open, or half-open with
// no slot left.
func (w word) refusing(probes uint64) bool {
	switch w & (stateMask | modeMask | droppedBit) {
	case word(Open):
		return true
	case word(HalfOpen):
		issued := w.issued()
		return issued >= probes || issued >= maxIssued
	}
	return false
}

// next is w after a transition to state to in mode m: the next generation,
// no probe issued, the dropped bit kept.
func (w word) next(to State, m Mode) word {
	return word((w.gen()+1)<<genShift|uint64(m)<<modeShift|uint64(to)) | w&droppedBit
}

// withMode is w in mode m, in the same state and generation.
func (w word) withMode(m Mode) word { return w&^modeMask | word(m)<<modeShift }

// claim is w with one more probe issued; release with one fewer.
func (w word) claim() word   { return w + issuedOne }
func (w word) release() word { return w - issuedOne }

// bump is w in the next generation, with nothing else changed.
func (w word) bump() word { return w + genOne }

// drop is w dropped: closed, ModeAuto, the next generation.
func (w word) drop() word { return word((w.gen()+1)<<genShift) | droppedBit }

// stateWord is the atomic home of a breaker's word.
type stateWord struct{ v atomic.Uint64 }

func (s *stateWord) Load() word { return word(s.v.Load()) }

func (s *stateWord) CompareAndSwap(old, new word) bool {
	return s.v.CompareAndSwap(uint64(old), uint64(new))
}

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
func (b *Breaker) nextWindow(r *rules) *slidingWindow {
	w := newSlidingWindow(r.width, r.buckets)
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
	var got [numKinds]uint64
	b.win.Load().Seal(&got)
	if got != [numKinds]uint64{} {
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
	rule := r.trip.Holds(snap)
	if rule == ruleErrorRatio && b.marginLocked(r, now, gen) && !confidentlyAbove(snap.Failures, snap.Counted, r.p.ErrorRatio) {
		others := r.trip
		others.ErrorRatio = 0
		rule = others.Holds(snap)
	}
	switch rule {
	case ruleErrorRatio:
		return ReasonErrorRatio
	case ruleErrorCount:
		return ReasonErrorCount
	case ruleSlowRatio:
		return ReasonSlowRatio
	}
	if r.consec > 0 && b.runLength() >= r.consec {
		return ReasonConsecutiveFailures
	}
	return ""
}
