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
// Invariants:
//
//   - issued is 0 outside HalfOpen. Every transition (next) and a drop
//     start it at 0; the one generation bump without a transition
//     (bumpGenLocked) happens in Closed, where it is 0 already.
//   - A new generation clears issued, so a slot can only be claimed, and
//     given back, in the episode its caller saw: both are a CAS on the
//     whole word, generation included.
//   - A slot is claimed only while issued is below Policy.Probes and
//     maxIssued, so issued never wraps, and exceeds Probes only when
//     SetPolicy lowers Probes mid-episode.
//   - The probes passed in an episode (history.passed) never exceed
//     issued: a pass keeps its slot; only a probe without a verdict gives
//     its slot back.
//   - The dropped bit, once set, survives every transition.
//
// Admission reads the word once; a half-open probe claims its slot with a
// compare-and-swap on it. Everything else about a transition is written
// under b.mu before the new word is published with a CAS, so a goroutine
// that sees the new generation also sees the open error of that
// generation (atomic operations are sequentially consistent in Go). Two
// are stored after the word: transitionDue (see Breaker.transitionDue)
// and a new window (recordSuccess says why).
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

// The methods are small enough to inline: the closed path pays for none of
// them.

func (w word) state() State   { return State(w & stateMask) }
func (w word) mode() Mode     { return Mode((w & modeMask) >> modeShift) }
func (w word) issued() uint64 { return uint64(w&issuedMask) >> issuedShift }
func (w word) gen() uint64    { return uint64(w >> genShift) }
func (w word) dropped() bool  { return w&droppedBit != 0 }

// plain reports whether a call admitted on w is a plain closed-state call:
// closed, whatever the mode, and not dropped. One mask and compare.
func (w word) plain() bool { return w&(stateMask|droppedBit) == 0 }

// refusing reports whether a call on w is refused until the breaker's
// transitionDue without further ado: w is a breaker in ModeAuto that has
// not been dropped, and open, or half-open with no probe slot left of
// probes (see admitNotClosed). These are the refusals Do makes without
// the general path.
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

// drop is w dropped: closed, in ModeAuto, in the next generation (see
// droppedBit).
func (w word) drop() word { return word((w.gen()+1)<<genShift) | droppedBit }

// stateWord is the atomic home of a breaker's word.
type stateWord struct{ v atomic.Uint64 }

func (s *stateWord) Load() word { return word(s.v.Load()) }

func (s *stateWord) CompareAndSwap(old, new word) bool {
	return s.v.CompareAndSwap(uint64(old), uint64(new))
}
