package breaker

import (
	"math"
	"runtime"
	"sync/atomic"
)

// The window is built on cumulative counters rather than per-bucket ones.
//
// A window keeps one set of monotonic totals (its tally, tally.go).
// Recording a call is one atomic add to a total; it is never reset, so no
// write can be lost to a bucket being cleared under it, after an idle gap
// or otherwise. A new window (after a Reset, a close, or a SetPolicy that
// changes its geometry) has totals of its own, so that nothing added to an
// older window can show in it (see Breaker.endGenLocked). Each of the
// window's slots holds the bucket index it stands for (its epoch) and a
// snapshot of the totals taken just before the bucket's first call. The
// window's sum at time t is then the totals minus the snapshot of the
// oldest bucket still inside [t-Window, t]: every call recorded since that
// bucket began, and nothing older.
//
// Every bucket of the window has a slot, empty ones included: the call
// that opens a bucket after a gap also writes the buckets of the gap, with
// the same snapshot (nothing was recorded in between). So the sum reads
// one slot, the oldest, whatever the number of buckets: a failure, which
// checks the trip rules, costs the same in a window of 10 buckets or of
// 1,000, and in a young window as in an old one. The gap costs the call
// that ends it one slot write per bucket, at most Buckets-1: every bucket
// is written once, so it averages out to one write per bucket of elapsed
// time. A slot is overwritten, snapshot first and epoch last, before the
// window reads it as current, so a stale slot is never summed.
//
// Rejected alternatives: a ring of per-bucket counters that each writer
// clears when it moves to a new bucket. Clearing races with writers still
// adding to the old bucket (cep21/circuit lost writes after idle gaps this
// way), and the monotonic metrics would need a second add on every call.
// Snapshots of non-empty buckets only, with the sum walking forward from
// the oldest bucket to the first that has one: that walk is Buckets slot
// reads in a window younger than Window or after a lull, which is where a
// breaker is at the onset of an outage after a quiet spell and right
// after it recovers, when failures are frequent.
//
// The file reads in that order: what a window holds (totals, Snapshot),
// the slots, recording (touch, advance), and reading (sum). A new
// quantity of the window is a window kind in the tally (tally.go), a
// field of totals read by tally.windowTotals, a field of slot written by
// slot.write and read by slot.read, and a field of Snapshot set by sum.

// totals is one reading of the tally's totals, of the quantities the
// window holds. It is a struct of scalars rather than an array so that it
// travels in registers (see tally.windowTotals).
type totals struct {
	counted  uint64 // calls that count: successes, failures and timeouts
	failures uint64 // failures, timeouts included
	timeouts uint64 // timeouts
	slow     uint64 // calls slower than Policy.SlowCall
}

// Snapshot is what a breaker's window holds at one instant: the evidence
// the trip rules judge, and so the evidence of a trip. Totals since the
// breaker was made are its [Counters]; both are in its [Status].
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

// Slot epochs that are not bucket indices. Real indices are floor(now/width)
// with width >= 1 ms, less at most MaxBuckets, so they never come near
// MinInt64.
const (
	slotEmpty = math.MinInt64     // never written
	slotBusy  = math.MinInt64 + 1 // being written
)

// slot is one bucket of the window: its index and the totals at its start.
//
// The snapshot holds the low 32 bits of each total. Differences are taken
// modulo 2^32, exact while a window holds fewer than four billion calls;
// it keeps a slot at 24 bytes.
type slot struct {
	epoch                             atomic.Int64
	counted, failures, timeouts, slow atomic.Uint32
}

// snap32 is a slot's snapshot, read.
type snap32 struct{ counted, failures, timeouts, slow uint32 }

// write makes s the slot of bucket idx with snapshot snap, unless a newer
// bucket already owns it.
func (s *slot) write(idx int64, snap totals) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			// Another writer of this slot, for another bucket, is
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
	s.counted.Store(uint32(snap.counted))
	s.failures.Store(uint32(snap.failures))
	s.timeouts.Store(uint32(snap.timeouts))
	s.slow.Store(uint32(snap.slow))
	s.epoch.Store(idx)
}

// read returns a consistent epoch and snapshot of s, waiting out a writer.
func (s *slot) read() (int64, snap32) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			runtime.Gosched()
			continue
		}
		snap := snap32{s.counted.Load(), s.failures.Load(), s.timeouts.Load(), s.slow.Load()}
		if s.epoch.Load() == e {
			return e, snap
		}
	}
}

// window is the bucketed sliding window over its tally's totals. All
// methods are safe for concurrent use; recording never blocks. It is 80
// bytes, a size class of the allocator: a field more costs every breaker
// 16.
type window struct {
	width int64 // bucket width, ns; the bucket count is len(slots)
	// headEnd is the end of the newest bucket (math.MinInt64 before the
	// first call): the one value the recording path loads.
	headEnd atomic.Int64
	slots   []slot
	tally   tally // the outcomes recorded in this window
}

func newWindow(width, n int64) *window {
	w := &window{width: width, slots: make([]slot, n)}
	w.headEnd.Store(math.MinInt64)
	for i := range w.slots {
		w.slots[i].epoch.Store(slotEmpty)
	}
	return w
}

// bucket is the index of the bucket holding now. The last bucket whose
// end, (index+1)·width, is representable takes every later time, so that
// the end never overflows.
func (w *window) bucket(now int64) int64 {
	i := floorDiv(now, w.width)
	if i > 0 && i*w.width > math.MaxInt64-w.width {
		i--
	}
	return i
}

// touch makes sure the bucket holding now has a snapshot before the caller
// adds to the totals. The common case, a call inside the newest bucket, is
// one load and one compare. A time older than the newest bucket (a call
// that read the clock just before another moved the window on) is counted
// in the newest bucket: history is never rewritten. The breaker's own time
// never goes backwards (see Clock), so a clock that stepped back does not
// reach here.
func (w *window) touch(now int64) {
	if now >= w.headEnd.Load() {
		w.advance(now)
	}
}

// advance makes the bucket holding now the newest one, and writes its slot
// and those of the empty buckets since the previous newest.
func (w *window) advance(now int64) {
	idx := w.bucket(now)
	end := (idx + 1) * w.width
	for {
		he := w.headEnd.Load()
		if now < he || end <= he {
			return
		}
		// The snapshot is read before the new bucket is published, so
		// every add made by a writer that sees the new bucket comes after
		// it and is inside the bucket.
		snap := w.tally.windowTotals(nil)
		if w.headEnd.CompareAndSwap(he, end) {
			// The buckets between the previous head and this one had no
			// call, so they start where this one does. Before the first
			// call, every bucket of the window is such a bucket.
			n := int64(len(w.slots))
			from := idx - n + 1
			if he != math.MinInt64 {
				from = max(from, he/w.width) // he/width: the old head's index + 1
			}
			for i := from; i <= idx; i++ {
				w.slots[floorMod(i, n)].write(i, snap)
			}
			return
		}
	}
}

// sum returns what the window holds at now: the calls recorded since the
// start of the oldest bucket that is still inside the window. It reads one
// slot and the totals.
func (w *window) sum(now int64) Snapshot {
	s, _ := w.read(now, nil)
	return s
}

// read is sum that also returns the end of the newest bucket (headEnd) the
// sum was taken against, and, if fs is not nil, fills it with each
// stripe's failures as of the same reading (see tally.windowTotals).
// While headEnd stays at that value, a reader at any time before it sums
// from the same slot, so the window changes only by what is added to the
// totals: the gates (gate.go) rely on it.
func (w *window) read(now int64, fs *[maxStripes]uint64) (Snapshot, int64) {
	for {
		he := w.headEnd.Load()
		if he == math.MinInt64 {
			return Snapshot{}, he
		}
		head := he/w.width - 1 // he is a multiple of width
		n := int64(len(w.slots))
		oldest := max(w.bucket(now), head) - n + 1
		if oldest > head {
			return Snapshot{}, he // the newest call has left the window
		}
		s := &w.slots[floorMod(oldest, n)]
		e, snap := s.read()
		for e < oldest {
			// The bucket is published but its slot not yet written: the
			// writer that moved the head is a few instructions away.
			runtime.Gosched()
			e, snap = s.read()
		}
		if e != oldest {
			// A newer bucket took the slot while this reader was
			// between its loads: the window has moved on; read it anew.
			continue
		}
		// Totals are read after the snapshot, so they are never behind it.
		tot := w.tally.windowTotals(fs)
		out := Snapshot{
			Counted:  uint64(uint32(tot.counted) - snap.counted),
			Failures: uint64(uint32(tot.failures) - snap.failures),
			Timeouts: uint64(uint32(tot.timeouts) - snap.timeouts),
			Slow:     uint64(uint32(tot.slow) - snap.slow),
		}
		// A slow call whose two adds straddle the bucket's snapshot (its
		// outcome before, its slowness after) is slow in this window but
		// counted in the one before. Only calls in flight at the instant
		// a bucket began can do that; the clamp keeps the ratio at most 1
		// in a window that holds little else.
		out.Slow = min(out.Slow, out.Counted)
		return out, he
	}
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
