package breaker

import (
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The window is built on cumulative counters rather than per-bucket ones.
//
// A breaker keeps one set of monotonic totals (one per outcome of a
// counted call; plus rejected calls and fallbacks for metrics). Recording a
// call is one atomic add to a total; it is never reset, so no write can be
// lost to a bucket being cleared under it, after an idle gap or otherwise.
// Each of the window's slots holds the bucket index it stands for and a
// snapshot of the totals taken just before the bucket's first call. The
// window's sum at time t is then the totals minus the snapshot of the oldest
// bucket still inside [t-Window, t]: every call recorded since that bucket
// began, and nothing older. A slot is overwritten, snapshot first and epoch
// last, before the window reads it as current, so a stale slot is never
// summed.
//
// Rejected alternative: a ring of per-bucket counters that each writer
// clears when it moves to a new bucket. Clearing races with writers still
// adding to the old bucket (cep21/circuit lost writes after idle gaps this
// way), and the monotonic metrics would need a second add on every call.

// Counter kinds held by a tally. A closed-state call adds one to exactly
// one outcome kind, so that a reader sees each outcome whole or not at
// all: counted calls and failures are sums of the outcome kinds, never
// counters of their own. (When a failure added to counted, failures and
// timeouts in turn, a reader between the adds saw more failures than
// calls, and Successes, derived by subtraction, went down.) A slow call
// adds to kSlow after its outcome, and readers load kSlow before the
// outcomes, so a reading never has a slow call without its outcome.
//
// Rejected alternative: six outcome kinds, one per outcome with and
// without slowness, which would make a slow call one add too. It costs two
// more counters in every breaker, 16 bytes that take an idle breaker past
// 512, for an exactness the window cannot use: see window.sum.
const (
	kSuccess   = iota // closed-state successes
	kFailure          // closed-state failures other than timeouts
	kTimeout          // closed-state timeouts
	kSlow             // closed-state calls slower than Policy.SlowCall
	kRejected         // calls refused without calling fn
	kFallbacks        // results served by a fallback instead of the downstream
	nKinds
)

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

// stripe is a counters padded to a 64-byte cache line, so that two cores
// adding to neighbouring stripes do not invalidate each other's line.
type stripe struct {
	c counters
	_ [64 - nKinds*8]byte
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

// inc adds one to kind k. It uses a compare-and-swap, which costs the same
// as an add when nobody else is writing and, when it fails, is the signal
// that two goroutines are colliding on one line.
func (t *tally) inc(k int) {
	s := t.stripes.Load()
	if s == nil {
		c := &t.base[k]
		if v := c.Load(); c.CompareAndSwap(v, v+1) {
			return
		}
		s = t.spread()
	}
	c := &s.local()[k]
	if v := c.Load(); !c.CompareAndSwap(v, v+1) {
		s.rehash()
		c.Add(1)
	}
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

// maxStripes bounds a tally's memory at 4 KiB and the cost of summing it.
const maxStripes = 64

// maxRehash bounds how often a tally reshuffles its goroutine-to-stripe
// mapping. With more running goroutines than stripes, collisions cannot all
// be avoided, and reshuffling for ever would only add a write.
const maxRehash = 32

type stripes struct {
	shift uint          // 64 - log2(len(cells))
	salt  atomic.Uint64 // changes the mapping; written at most maxRehash times
	cells []stripe
}

// local picks the stripe of the calling goroutine. A goroutine's stack lives
// in its own memory, so the address of a local variable, shifted right by
// 11 bits (the 2 KiB of a new goroutine's stack), tells goroutines apart and
// stays the same for one goroutine at one call depth: affinity without
// thread-local storage. The address and the salt are mixed by a Fibonacci
// hash. A collision only costs speed, never a count.
func (s *stripes) local() *counters {
	var probe byte
	h := (uint64(uintptr(unsafe.Pointer(&probe)))>>11 + s.salt.Load()) * 0x9E3779B97F4A7C15
	return &s.cells[h>>s.shift].c
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

// outcomes returns the totals of the outcome kinds and of kSlow, indexed
// by kind. kSlow is read first: a slow call's outcome is added before its
// slowness, so every slow call in the reading has its outcome in it too.
func (t *tally) outcomes() (out [kSlow + 1]uint64) {
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

// windowTotals returns the totals the window snapshots, in Snapshot order:
// counted, failures, timeouts, slow. The first three are sums of one read
// of each outcome kind, so Timeouts <= Failures <= Counted holds for the
// totals and for the difference of any two readings of them.
func (t *tally) windowTotals() [4]uint64 {
	o := t.outcomes()
	failures := o[kFailure] + o[kTimeout]
	return [4]uint64{failures + o[kSuccess], failures, o[kTimeout], o[kSlow]}
}

// Slot epochs that are not bucket indices. Real indices are floor(now/width)
// with width >= 1 ms, so they never come near MinInt64.
const (
	slotEmpty = math.MinInt64     // never written
	slotBusy  = math.MinInt64 + 1 // being written
)

type slot struct {
	epoch atomic.Int64
	// snap holds the low 32 bits of the window totals at the bucket's
	// start. Differences are taken modulo 2^32, exact while a window holds
	// fewer than four billion calls; it keeps a slot at 24 bytes.
	snap [4]atomic.Uint32
}

// window is the bucketed sliding window over a tally's totals. All methods
// are safe for concurrent use; recording never blocks.
type window struct {
	width   int64 // bucket width, ns
	n       int64 // bucket count
	headEnd atomic.Int64
	slots   []slot
}

func newWindow(width, n int64) *window {
	w := &window{width: width, n: n, slots: make([]slot, n)}
	w.headEnd.Store(math.MinInt64)
	for i := range w.slots {
		w.slots[i].epoch.Store(slotEmpty)
	}
	return w
}

// touch makes sure the bucket holding now has a snapshot before the caller
// adds to the totals. The common case, a call inside the newest bucket, is
// one load and one compare. A time older than the newest bucket (a call
// that read the clock just before another moved the window on) is counted
// in the newest bucket: history is never rewritten. The breaker's own time
// never goes backwards (see Clock), so a clock that stepped back does not
// reach here.
func (w *window) touch(now int64, t *tally) {
	if now >= w.headEnd.Load() {
		w.advance(now, t)
	}
}

func (w *window) advance(now int64, t *tally) {
	idx := floorDiv(now, w.width)
	end := int64(math.MaxInt64)
	if idx < math.MaxInt64/w.width-1 {
		end = (idx + 1) * w.width
	}
	for {
		he := w.headEnd.Load()
		if now < he || end <= he {
			return
		}
		// The snapshot is read before the new bucket is published, so
		// every add made by a writer that sees the new bucket comes after
		// it and is inside the bucket.
		snap := t.windowTotals()
		if w.headEnd.CompareAndSwap(he, end) {
			w.publish(idx, snap)
			return
		}
	}
}

func (w *window) publish(idx int64, snap [4]uint64) {
	s := &w.slots[floorMod(idx, w.n)]
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			// Another claimer of this slot, one whole window older, is
			// mid-write; it will finish in a few instructions.
			runtime.Gosched()
			continue
		}
		if e >= idx {
			return // a newer bucket already owns the slot
		}
		if s.epoch.CompareAndSwap(e, slotBusy) {
			break
		}
	}
	for i, v := range snap {
		s.snap[i].Store(uint32(v))
	}
	s.epoch.Store(idx)
}

// read returns a consistent epoch and snapshot of s, waiting out a writer.
func (s *slot) read() (int64, [4]uint32) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			runtime.Gosched()
			continue
		}
		var snap [4]uint32
		for i := range snap {
			snap[i] = s.snap[i].Load()
		}
		if s.epoch.Load() == e {
			return e, snap
		}
	}
}

// Snapshot is the content of a breaker's window at one instant.
type Snapshot struct {
	// Counted is the number of calls in the window that count: successes,
	// failures and timeouts, not ignored or rejected calls.
	Counted uint64 `json:"counted"`
	// Failures is the number of counted calls that failed, timeouts
	// included.
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

// sum returns what the window holds at now: the calls recorded since the
// start of the oldest bucket that is still inside the window.
func (w *window) sum(now int64, t *tally) Snapshot {
	he := w.headEnd.Load()
	if he == math.MinInt64 {
		return Snapshot{}
	}
	head := floorDiv(he-1, w.width)
	cur := max(floorDiv(now, w.width), head)
	lo := cur - w.n + 1
	for idx := max(lo, head-w.n+1); idx <= head; idx++ {
		s := &w.slots[floorMod(idx, w.n)]
		e, snap := s.read()
		for idx == head && e < head {
			// The head bucket is claimed but its snapshot is not yet
			// written; the claimer is a few instructions away.
			runtime.Gosched()
			e, snap = s.read()
		}
		if e != idx {
			continue // no call fell in bucket idx
		}
		// Totals are read after the snapshot, so they are never behind it.
		tot := t.windowTotals()
		out := Snapshot{
			Counted:  uint64(uint32(tot[0]) - snap[0]),
			Failures: uint64(uint32(tot[1]) - snap[1]),
			Timeouts: uint64(uint32(tot[2]) - snap[2]),
			Slow:     uint64(uint32(tot[3]) - snap[3]),
		}
		// A slow call whose two adds straddle the bucket's snapshot (its
		// outcome before, its slowness after) is slow in this window but
		// counted in the one before. Only calls in flight at the instant
		// a bucket began can do that; the clamp keeps the ratio at most 1
		// in a window that holds little else.
		out.Slow = min(out.Slow, out.Counted)
		return out
	}
	return Snapshot{}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
