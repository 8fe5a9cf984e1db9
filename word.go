package breaker

import "sync/atomic"

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
