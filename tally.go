package breaker

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// kind is one counter of a tally. A window's tally counts the outcomes
// kSuccess, kFailure, kTimeout and kSlow; other tallies give their numKinds
// meanings of their own.
type kind uint8

// The counters of a window's tally. A call adds one to exactly one of
// kSuccess, kFailure and kTimeout, so that a reader sees each outcome whole
// or not at all: counted calls and failures are sums of them. A slow call
// adds to kSlow after its outcome, and readers load kSlow first, so a
// reading never has a slow call without its outcome.
const (
	kSuccess kind = iota // successes
	kFailure             // failures other than timeouts
	kTimeout             // timeouts
	kSlow                // calls slower than the slow-call threshold
)

// numKinds is the number of counters of a tally.
const numKinds = 4

type counters [numKinds]atomic.Uint64

// tallyStripe is one of a tally's per-goroutine sets of counters, padded to two
// cache lines (see docs/internals.md, "The trip check's gates"). Its gate
// tells a failure added to it whether the trip rules need checking.
type tallyStripe struct {
	c    counters
	gate atomic.Uint64
	_    [128 - numKinds*8 - 8]byte
}

// tally is a set of monotonic counters that starts as one plain set (its
// base) and spreads over per-goroutine stripes the first time two
// goroutines collide on it. The zero value is an empty tally.
type tally struct {
	base    counters
	stripes atomic.Pointer[stripes]
}

// Inc adds one to counter k of a tally that is never sealed.
func (t *tally) Inc(k kind) { t.add(k) }

// add adds one to counter k, unless the tally is sealed, and reports
// whether it did, with the stripe it added to (nil for the base). Its
// compare-and-swap costs what an add does when nobody else writes, and
// its failure is the signal that goroutines collide.
func (t *tally) add(k kind) (*tallyStripe, bool) {
	s := t.stripes.Load()
	if s == nil {
		c := &t.base[k]
		v := c.Load()
		if v&sealBit != 0 {
			return nil, false
		}
		if c.CompareAndSwap(v, v+1) {
			return nil, true
		}
		s = t.spread()
	}
	for {
		st := s.local()
		c := &st.c[k]
		v := c.Load()
		if v&sealBit != 0 {
			return nil, false
		}
		if c.CompareAndSwap(v, v+1) {
			return st, true
		}
		s.rehash()
	}
}

// addBase is add's common case, small enough to inline: it adds to the
// base of a tally that has not spread, if that counter is not sealed and
// the compare-and-swap succeeds. Otherwise it adds nothing and reports
// false, and add takes over.
func (t *tally) addBase(k kind) bool {
	if t.stripes.Load() != nil {
		return false
	}
	c := &t.base[k]
	v := c.Load()
	return v&sealBit == 0 && c.CompareAndSwap(v, v+1)
}

// Spread makes the tally striped now rather than at its first collision.
func (t *tally) Spread() { t.spread() }

func (t *tally) spread() *stripes {
	if s := t.stripes.Load(); s != nil {
		return s
	}
	n, bits := 1, 0
	for n < 4*runtime.GOMAXPROCS(0) && n < maxStripes {
		n <<= 1
		bits++
	}
	// Losing this race only wastes the loser's allocation.
	t.stripes.CompareAndSwap(nil, &stripes{shift: uint(64 - bits), cells: make([]tallyStripe, n)})
	return t.stripes.Load()
}

// maxStripes bounds a tally's memory at 8 KiB and the cost of summing it.
const maxStripes = 64

// maxRehash bounds how often a tally reshuffles its goroutine-to-stripe
// mapping: with more running goroutines than stripes, collisions cannot
// all be avoided.
const maxRehash = 32

type stripes struct {
	shift uint          // 64 - log2(len(cells))
	salt  atomic.Uint64 // changes the mapping; written at most maxRehash times
	cells []tallyStripe
	gates gates // see gate.go
}

// local picks the stripe of the calling goroutine: the address of a local
// variable, shifted past the 2 KiB of a new goroutine's stack, differs
// between goroutines and stays put for one at one call depth. It is mixed
// with the salt by a Fibonacci hash. A collision costs speed, never a
// count.
func (s *stripes) local() *tallyStripe {
	var probe byte
	h := (uint64(uintptr(unsafe.Pointer(&probe)))>>11 + s.salt.Load()) * 0x9E3779B97F4A7C15
	return &s.cells[h>>s.shift]
}

// rehash moves every goroutine to another stripe after a collision; two
// goroutines that shared one then part with probability 1-1/len(cells).
func (s *stripes) rehash() {
	if v := s.salt.Load(); v < maxRehash {
		s.salt.CompareAndSwap(v, v+1)
	}
}

// Load returns the current total of counter k.
func (t *tally) Load(k kind) uint64 {
	v := t.base[k].Load()
	if s := t.stripes.Load(); s != nil {
		for i := range s.cells {
			v += s.cells[i].c[k].Load()
		}
	}
	return v
}

// outcomes returns the totals of a window's tally, by kind, or zeros once
// it is sealed: Seal hands its totals over. kSlow is read first. It must
// not run concurrently with Seal.
func (t *tally) outcomes() (out [numKinds]uint64) {
	if t.base[kSuccess].Load()&sealBit != 0 {
		return out
	}
	out[kSlow] = t.Load(kSlow)
	for k := range kSlow {
		out[k] = t.base[k].Load()
	}
	if s := t.stripes.Load(); s != nil {
		for i := range s.cells {
			c := &s.cells[i].c
			for k := range kSlow {
				out[k] += c[k].Load()
			}
		}
	}
	return out
}

// sealBit, once set in a counter, stops every add to it (see seal).
// Snapshot never come near it; the window's snapshots, taken modulo 2^32,
// never see it.
const sealBit = 1 << 63

// seal stops t: every add from now on fails and changes nothing. Each
// counter is sealed by one atomic OR, which returns its count at that
// instant; seal adds those counts, by kind, to into, so every add either
// precedes the OR of its counter and is in into, or fails. A tally that
// has not spread gets sealedStripes first, so that an add that collides
// and spreads it finds sealed stripes. Sealing a sealed tally adds
// nothing. Seals of one tally must not run concurrently.
func (t *tally) seal(into *[numKinds]uint64) {
	if t.base[kSuccess].Load()&sealBit != 0 {
		return // sealed already: base[kSuccess] is sealed last
	}
	t.stripes.CompareAndSwap(nil, sealedStripes)
	if s := t.stripes.Load(); s != sealedStripes {
		for i := range s.cells {
			for k := range s.cells[i].c {
				into[k] += s.cells[i].c[k].Or(sealBit)
			}
		}
	}
	for k := numKinds - 1; k >= 0; k-- {
		into[k] += t.base[k].Or(sealBit)
	}
}

// sealedStripes are the stripes of every sealed tally that had not spread:
// one stripe whose counters are all sealed. Nothing is ever added to it,
// and no gate is ever set in it (see slidingWindow.Check).
var sealedStripes = func() *stripes {
	s := &stripes{shift: 64, cells: make([]tallyStripe, 1)} // h>>64 is 0: every goroutine's stripe
	for k := range s.cells[0].c {
		s.cells[0].c[k].Store(sealBit)
	}
	return s
}()

// windowTotals returns the totals the window snapshots, read into scalars
// (see docs/internals.md, "How the window works"). Counted, failures and
// timeouts are sums of one read of each outcome counter, so Timeouts <=
// Failures <= Counted holds for the totals and for the difference of any
// two readings. kSlow is read first, as in outcomes. If fs is not nil, it
// also gets each stripe's failures, timeouts included, from the same
// loads, or, if the tally has not spread, the base's in fs[0] (for the
// gates).
func (t *tally) windowTotals(fs *[maxStripes]uint64) Snapshot {
	slow := t.Load(kSlow)
	ok, failed, timedOut := t.base[kSuccess].Load(), t.base[kFailure].Load(), t.base[kTimeout].Load()
	if fs != nil {
		fs[0] = failed + timedOut
	}
	if s := t.stripes.Load(); s != nil {
		for i := range s.cells {
			c := &s.cells[i].c
			f, to := c[kFailure].Load(), c[kTimeout].Load()
			ok += c[kSuccess].Load()
			failed += f
			timedOut += to
			if fs != nil {
				fs[i] = f + to
			}
		}
	}
	return Snapshot{
		Counted:  ok + failed + timedOut,
		Failures: failed + timedOut,
		Timeouts: timedOut,
		Slow:     slow,
	}
}

// The window's tally, as the breaker records into it.

// AddBase adds one to counter k of the window's tally if the tally has not
// spread, is not sealed, and the add meets no other writer; otherwise it
// adds nothing and returns false, and Add takes over. It inlines into the
// caller: the closed path's add.
func (w *slidingWindow) AddBase(k kind) bool { return w.tally.addBase(k) }

// Add adds one to counter k of the window's tally unless the window is
// sealed, and reports whether it did, with the stripe it added to (nil
// for the base counters), which Check's gates use.
func (w *slidingWindow) Add(k kind) (*tallyStripe, bool) { return w.tally.add(k) }

// Outcomes returns the window's totals by kind, or zeros once it is
// sealed. It must not run concurrently with Seal.
func (w *slidingWindow) Outcomes() [numKinds]uint64 { return w.tally.outcomes() }

// Seal stops the window: every later Add fails, so its totals are final,
// and they are added to into. Seals of one window must not run
// concurrently.
func (w *slidingWindow) Seal(into *[numKinds]uint64) { w.tally.seal(into) }

// Spread stripes the window's tally now rather than at its first
// collision.
func (w *slidingWindow) Spread() { w.tally.spread() }

// Striped reports whether the window's tally has spread over stripes,
// sealed or not: goroutines have collided on it.
func (w *slidingWindow) Striped() bool {
	s := w.tally.stripes.Load()
	return s != nil && s != sealedStripes
}
