package breaker

// The state word packs everything the hot path needs into one atomic load:
//
//	bits 0-1   State
//	bits 2-3   Mode
//	bit  4     dropped: the breaker's group has let go of it (group.go)
//	bits 8-15  probes admitted in the current half-open episode
//	bits 16-63 generation, bumped on every transition
//
// Admission reads it once; a half-open probe claims its slot with a
// compare-and-swap on it, so a slot can only be claimed in the episode the
// caller saw. Everything else about a transition is written under b.mu
// before the new word is published with a CAS, so a goroutine that sees the
// new generation also sees the deadline and the open error of that
// generation (atomic operations are sequentially consistent in Go). The one
// exception is a new window, stored after the bump; recordSuccess says why.
const (
	stateMask   = 0x3
	modeShift   = 2
	modeMask    = 0x3 << modeShift
	issuedShift = 8
	issuedMask  = 0xFF << issuedShift
	issuedOne   = 1 << issuedShift
	genShift    = 16
	genOne      = 1 << genShift
)

func wordState(w uint64) State { return State(w & stateMask) }
func wordMode(w uint64) Mode   { return Mode((w & modeMask) >> modeShift) }
func wordIssued(w uint64) uint64 {
	return (w & issuedMask) >> issuedShift
}
func wordGen(w uint64) uint64 { return w >> genShift }
