// Package window is a circuit breaker's sliding window: the totals of the
// outcomes recorded in it (Tally), bucketed snapshots of those totals
// that make it slide (Window), and the gates that let a failure skip the
// trip check while no failure rule can hold (Window.Check).
//
// Times are int64 nanoseconds on a clock that never goes backwards.
// Everything here is safe for concurrent use; recording never blocks and
// never allocates.
package window

import (
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/govkit/breaker/internal/timebase"
)

// Counts is what a window holds at one instant.
type Counts struct {
	Counted  uint64 // calls that count: successes, failures and timeouts
	Failures uint64 // failures, timeouts included
	Timeouts uint64 // failures that were timeouts
	Slow     uint64 // counted calls slower than the slow-call threshold
}

// Window is a sliding window of n buckets over the monotonic totals of
// its own tally. Its sum at now is the totals minus the snapshot of the
// oldest bucket still inside the window, taken just before that bucket's
// first call: every call recorded since, and nothing older. Every bucket
// of the window has a slot, empty ones included, so a sum reads one slot
// whatever n. A Window is 80 bytes, a size class of the allocator.
type Window struct {
	width int64 // bucket width, ns
	// headEnd is the end of the newest bucket (math.MinInt64 before the
	// first call): the one value the recording path loads.
	headEnd atomic.Int64
	slots   *slot // the first of n, one per bucket (see ring)
	n       int64
	tally   Tally
	// serial holds the gates of a tally that has not spread, made at
	// its first check (see Check).
	serial atomic.Pointer[serialGates]
}

// Slot epochs that are not bucket indices. Real indices are floor(now/width)
// with width >= 1 ms, less at most n, so they never come near MinInt64.
const (
	slotEmpty = math.MinInt64     // never written
	slotBusy  = math.MinInt64 + 1 // being written
)

// slot is one bucket of the window: its index and the low 32 bits of each
// total at its start. Differences are taken modulo 2^32, exact while a
// window holds fewer than four billion calls.
type slot struct {
	epoch                             atomic.Int64
	counted, failures, timeouts, slow atomic.Uint32
}

// snap32 is a slot's snapshot, read.
type snap32 struct{ counted, failures, timeouts, slow uint32 }

// write makes s the slot of bucket idx with snapshot snap, unless a newer
// bucket already owns it. The snapshot is written before the epoch, so a
// reader never takes a stale snapshot for the bucket's.
func (s *slot) write(idx int64, snap Counts) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			runtime.Gosched() // another writer, a few stores from done
			continue
		}
		if e >= idx {
			return
		}
		if s.epoch.CompareAndSwap(e, slotBusy) {
			break
		}
	}
	s.counted.Store(uint32(snap.Counted))
	s.failures.Store(uint32(snap.Failures))
	s.timeouts.Store(uint32(snap.Timeouts))
	s.slow.Store(uint32(snap.Slow))
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

// New returns an empty window of n buckets of width ns each (width > 0,
// n > 0).
func New(width, n int64) *Window {
	slots := make([]slot, n)
	w := &Window{width: width, slots: &slots[0], n: n}
	w.headEnd.Store(math.MinInt64)
	for i := range slots {
		slots[i].epoch.Store(slotEmpty)
	}
	return w
}

// ring is the window's slots. They are held as a pointer and a count
// rather than a slice, whose capacity would take the window past 80 bytes.
func (w *Window) ring() []slot { return unsafe.Slice(w.slots, w.n) }

// bucket is the index of the bucket holding now. The last bucket whose
// end, (index+1)·width, is representable takes every later time, so that
// the end never overflows.
func (w *Window) bucket(now int64) int64 {
	i := timebase.FloorDiv(now, w.width)
	if i > 0 && i*w.width > math.MaxInt64-w.width {
		i--
	}
	return i
}

// Touch makes sure the bucket holding now has its slot before the caller
// adds to the tally. A call inside the newest bucket, the common case, is
// one load and one compare. A time older than the newest bucket (a call
// that read the clock just before another moved the window on) counts in
// the newest bucket: history is never rewritten.
func (w *Window) Touch(now int64) {
	if now >= w.headEnd.Load() {
		w.advance(now)
	}
}

// advance makes the bucket holding now the newest one, and writes its slot
// and those of the empty buckets since the previous newest (at most n-1),
// all with the same snapshot: nothing was recorded in between.
func (w *Window) advance(now int64) {
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
			from := idx - w.n + 1
			if he != math.MinInt64 {
				from = max(from, he/w.width) // he/width: the old head's index + 1
			}
			slots := w.ring()
			for i := from; i <= idx; i++ {
				slots[timebase.FloorMod(i, w.n)].write(i, snap)
			}
			return
		}
	}
}

// Sum returns what the window holds at now: the calls recorded since the
// start of the oldest bucket that is still inside the window. It reads one
// slot and the totals.
func (w *Window) Sum(now int64) Counts {
	c, _ := w.read(now, nil)
	return c
}

// read is Sum that also returns the end of the newest bucket (headEnd) the
// sum was taken against, and, if fs is not nil, fills it with each
// stripe's failures as of the same reading (see Tally.windowTotals).
// While headEnd stays at that value, a reader at any time before it sums
// from the same slot, so the window changes only by what is added to the
// totals: the gates (gate.go) rely on it.
func (w *Window) read(now int64, fs *[maxStripes]uint64) (Counts, int64) {
	for {
		he := w.headEnd.Load()
		if he == math.MinInt64 {
			return Counts{}, he
		}
		head := he/w.width - 1 // he is a multiple of width
		oldest := max(w.bucket(now), head) - w.n + 1
		if oldest > head {
			return Counts{}, he // the newest call has left the window
		}
		s := &w.ring()[timebase.FloorMod(oldest, w.n)]
		e, snap := s.read()
		for e < oldest {
			// The bucket is published but its slot not yet written: the
			// writer that moved the head is a few instructions away.
			runtime.Gosched()
			e, snap = s.read()
		}
		if e != oldest {
			continue // a newer bucket took the slot: the window moved on
		}
		// Totals are read after the snapshot, so they are never behind it.
		tot := w.tally.windowTotals(fs)
		out := Counts{
			Counted:  uint64(uint32(tot.Counted) - snap.counted),
			Failures: uint64(uint32(tot.Failures) - snap.failures),
			Timeouts: uint64(uint32(tot.Timeouts) - snap.timeouts),
			Slow:     uint64(uint32(tot.Slow) - snap.slow),
		}
		// A slow call whose two adds straddle the bucket's snapshot is
		// slow in this window but counted in the one before: keep the
		// slow ratio at most 1.
		out.Slow = min(out.Slow, out.Counted)
		return out, he
	}
}
