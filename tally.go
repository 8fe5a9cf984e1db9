package breaker

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The tally: monotonic totals, spread over stripes when goroutines collide
// on them. A breaker holds two kinds of tally: each of its windows has one
// of its own (window.go), for the outcomes recorded in that window, and the
// breaker has one for what it counts whatever the window (Breaker.tally).

// Kinds of a window's tally. A closed-state call adds one to exactly one
// outcome kind, so that a reader sees each outcome whole or not at all:
// counted calls and failures are sums of the outcome kinds, never
// counters of their own. (When a failure added to counted, failures and
// timeouts in turn, a reader between the adds saw more failures than
// calls, and Successes, derived by subtraction, went down.) A slow call
// adds to kSlow after its outcome, and readers load kSlow before the
// outcomes, so a reading never has a slow call without its outcome.
//
// Rejected alternative: six outcome kinds, one per outcome with and
// without slowness, which would make a slow call one add too. It costs two
// more counters in every window, 16 bytes that take an idle breaker past
// 512, for an exactness the window cannot use: see window.sum.
const (
	kSuccess = iota // closed-state successes
	kFailure        // closed-state failures other than timeouts
	kTimeout        // closed-state timeouts
	kSlow           // closed-state calls slower than Policy.SlowCall
)

// Kinds of a breaker's own tally.
const (
	kRejected       = iota // calls refused without calling fn
	kFallbacks             // results served by a fallback instead of the downstream
	kIgnored               // admitted calls whose outcome was Ignored
	kShadowRejected        // calls a shadow breaker admitted but would have refused
)

// nKinds is the number of kinds of either tally.
const nKinds = 4

// outcomeKind is the kind a closed-state outcome o (not Ignored) adds to.
func outcomeKind(o Outcome) int {
	switch o {
	case Timeout:
		return kTimeout
	case Failure:
		return kFailure
	}
	return kSuccess
}

type counters [nKinds]atomic.Uint64

// stripe is a counters padded to 128 bytes, two cache lines, so that two
// cores adding to neighbouring stripes do not invalidate each other's
// lines. One line is not enough: processors that fetch lines in pairs
// (the adjacent-line prefetcher) make two cores writing neighbouring lines
// contend as if they shared one. Measured at -cpu=2 with 64-byte stripes,
// a failing call took 32 ns in most runs and 70 to 90 ns in the runs
// whose two goroutines landed on a pair; with 128, 32 to 35 in every run.
// Its gate (gate.go) tells a failure added to this stripe whether the
// trip rules need checking; it shares the line because a failure reads it
// right after its add.
type stripe struct {
	c    counters
	gate atomic.Uint64
	_    [128 - nKinds*8 - 8]byte
}

// tally is a set of monotonic counters that starts as one plain set and
// spreads over per-goroutine stripes the first time two goroutines collide
// on it, like java.util.concurrent.atomic.LongAdder. An idle or lightly used
// breaker stays small; a breaker hammered from every core stops bouncing one
// cache line between them (measured: with one shared line, two cores doing
// clock-read-plus-add take 49 ns an operation against 29 ns for one core).
type tally struct {
	base    counters
	stripes atomic.Pointer[stripes]
}

// inc adds one to kind k of a tally that is never sealed (a breaker's
// own). It uses a compare-and-swap, which costs the same as an add when
// nobody else is writing and, when it fails, is the signal that two
// goroutines are colliding on one line.
func (t *tally) inc(k int) { t.add(k) }

// add adds one to kind k, unless the tally is sealed, and reports whether
// it did, with the stripe it added to (nil for the base set), which a
// failure's trip check gates on. A sealed tally never changes again (see
// seal).
func (t *tally) add(k int) (*stripe, bool) {
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

// addBase is add's common case, small enough to inline, for the closed
// path: it adds to the base counter of a tally that has not spread, if
// that counter is not sealed and the compare-and-swap succeeds. Otherwise
// it adds nothing and reports false, and add takes over.
func (t *tally) addBase(k int) bool {
	if t.stripes.Load() != nil {
		return false
	}
	c := &t.base[k]
	v := c.Load()
	return v&sealBit == 0 && c.CompareAndSwap(v, v+1)
}

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
	t.stripes.CompareAndSwap(nil, &stripes{shift: uint(64 - bits), cells: make([]stripe, n)})
	return t.stripes.Load()
}

// maxStripes bounds a tally's memory at 8 KiB and the cost of summing it.
const maxStripes = 64

// maxRehash bounds how often a tally reshuffles its goroutine-to-stripe
// mapping. With more running goroutines than stripes, collisions cannot all
// be avoided, and reshuffling for ever would only add a write.
const maxRehash = 32

type stripes struct {
	shift uint          // 64 - log2(len(cells))
	salt  atomic.Uint64 // changes the mapping; written at most maxRehash times
	cells []stripe
	gates gates // see gate.go
}

// local picks the stripe of the calling goroutine. A goroutine's stack lives
// in its own memory, so the address of a local variable, shifted right by
// 11 bits (the 2 KiB of a new goroutine's stack), tells goroutines apart and
// stays the same for one goroutine at one call depth: affinity without
// thread-local storage. The address and the salt are mixed by a Fibonacci
// hash. A collision only costs speed, never a count.
func (s *stripes) local() *stripe {
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

// load returns the current total of kind k.
func (t *tally) load(k int) uint64 {
	v := t.base[k].Load()
	if s := t.stripes.Load(); s != nil {
		for i := range s.cells {
			v += s.cells[i].c[k].Load()
		}
	}
	return v
}

// outcomes returns the totals of a window's tally, indexed by kind, or
// zeros once it is sealed: seal hands its totals over. kSlow is read
// first: a slow call's outcome is added before its slowness, so every slow
// call in the reading has its outcome in it too. It must not run
// concurrently with seal.
func (t *tally) outcomes() (out [nKinds]uint64) {
	if t.base[kSuccess].Load()&sealBit != 0 {
		return out
	}
	out[kSlow] = t.load(kSlow)
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

// sealBit, once set in a counter of a window's tally, stops every add to
// it (see seal). Counts never come near it; the window's snapshots, taken
// modulo 2^32 (see slot), never see it.
const sealBit = 1 << 63

// seal stops t: every add to it from now on fails and changes nothing, so
// that what t holds is fixed for good. Each counter is sealed by one
// atomic OR, which returns its count at that instant, and seal adds those
// counts, by kind, to into: every add to t either precedes the OR of its
// counter, and is in into, or fails. A tally that has not spread gets the
// sealed stripes first, so that an add that finds its base counter
// contended and spreads it adds to a sealed stripe, never to fresh ones.
// Sealing a sealed tally adds nothing. Seals of one tally must not run
// concurrently (the breaker seals under b.mu).
func (t *tally) seal(into *[nKinds]uint64) {
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
	for k := nKinds - 1; k >= 0; k-- {
		into[k] += t.base[k].Or(sealBit)
	}
}

// sealedStripes are the stripes of every sealed tally that had not spread:
// one stripe whose counters are all sealed. Nothing is ever added to it,
// and no gate is ever set in it (see Breaker.evaluate).
var sealedStripes = func() *stripes {
	s := &stripes{shift: 64, cells: make([]stripe, 1)} // h>>64 is 0: every goroutine's stripe
	for k := range s.cells[0].c {
		s.cells[0].c[k].Store(sealBit)
	}
	return s
}()

// windowTotals returns the totals the window snapshots. Counted,
// failures and timeouts are sums of one read of each outcome kind, so
// Timeouts <= Failures <= Counted holds for the totals and for the
// difference of any two readings of them. kSlow is read first, as in
// outcomes.
//
// It reads the counters into scalars rather than through outcomes: an
// array is returned through memory, and reading back as one wide load
// what was stored as several narrow ones stalls store forwarding, which
// made the copies cost more than the loads on the trip check's path.
//
// If fs is not nil, it also gets each stripe's failures, timeouts
// included, from the same loads (for the gates, gate.go).
func (t *tally) windowTotals(fs *[maxStripes]uint64) totals {
	slow := t.load(kSlow)
	ok, failed, timedOut := t.base[kSuccess].Load(), t.base[kFailure].Load(), t.base[kTimeout].Load()
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
	return totals{
		counted:  ok + failed + timedOut,
		failures: failed + timedOut,
		timeouts: timedOut,
		slow:     slow,
	}
}
