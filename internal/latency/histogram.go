package latency

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker/internal/timebase"
)

// Hist is a histogram read from the window: cell 2i counts the calls
// measured in bin i, cell 2i+1 those censored in it.
type Hist [Cells]uint32

// Totals are a histogram's counts since the breaker began timing calls:
// calls measured, calls censored, and the sum of the measured durations.
type Totals struct {
	Count, Censored uint64
	Sum             time.Duration
}

// Slot epochs that are not bucket indices: bucket indices are
// floor(now/width) with width >= 1 ns, never this close to MinInt64.
const (
	slotEmpty = math.MinInt64     // never written
	slotBusy  = math.MinInt64 + 1 // being written
)

// slot is one bucket of the ring: its index and the counters at its start,
// modulo 2^32 (exact while a window holds fewer than four billion calls).
type slot struct {
	epoch atomic.Int64
	cells [Cells]atomic.Uint32
}

// Histogram is the histogram of a sliding window of buckets of a fixed
// width. It rolls as the breaker's window does: one set of cumulative
// counters, one atomic add per call, and a ring of slots, one per bucket,
// each holding a snapshot of the counters taken before its bucket's first
// call. The window's histogram is the counters minus the snapshot of the
// oldest bucket still in it; a bucket with no call has no slot, and a
// reader walks to the first that has one.
//
// Init it before use; it must not be copied after. All methods are safe
// for concurrent use; Add never blocks.
type Histogram struct {
	// Read on every call, written at most once a bucket: kept off the
	// lines of the counters, which are written at full rate.
	width, last, n int64 // bucket width (ns), last index, count
	slots          []slot
	headEnd        atomic.Int64 // the end of the newest bucket with a call
	_              [64]byte

	cells [Cells]atomic.Uint64
	base  Totals // what earlier histograms counted: Totals continues from it
}

// Init makes h an empty histogram of buckets buckets of width ns each,
// whose totals start at base.
func (h *Histogram) Init(width, buckets int64, base Totals) {
	h.width, h.last, h.n = width, math.MaxInt64/width-1, buckets
	h.slots = make([]slot, buckets)
	h.headEnd.Store(never)
	for i := range h.slots {
		h.slots[i].epoch.Store(slotEmpty)
	}
	h.base = base
}

// Fits reports whether h has buckets buckets of width ns.
func (h *Histogram) Fits(width, buckets int64) bool { return h.width == width && h.n == buckets }

func (h *Histogram) bucket(now int64) int64 { return min(timebase.FloorDiv(now, h.width), h.last) }

// Add records a call that ended at now after elapsed ns (elapsed >= 0):
// measured, or censored at elapsed.
func (h *Histogram) Add(now, elapsed int64, censored bool) {
	if now >= h.headEnd.Load() {
		h.advance(now)
	}
	h.cells[Cell(elapsed, censored)].Add(1)
}

// advance makes the bucket holding now the newest and writes its slot.
// The snapshot is taken before the bucket is published, so every Add by a
// writer that sees the new bucket lands inside it.
func (h *Histogram) advance(now int64) {
	idx := h.bucket(now)
	end := (idx + 1) * h.width
	var snap Hist
	for {
		he := h.headEnd.Load()
		if now < he || end <= he {
			return
		}
		for i := range snap {
			snap[i] = uint32(h.cells[i].Load())
		}
		if h.headEnd.CompareAndSwap(he, end) {
			h.slots[timebase.FloorMod(idx, h.n)].write(idx, &snap)
			return
		}
	}
}

// write makes s the slot of bucket idx, unless a newer bucket owns it.
func (s *slot) write(idx int64, snap *Hist) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			runtime.Gosched()
			continue
		}
		if e >= idx {
			return
		}
		if s.epoch.CompareAndSwap(e, slotBusy) {
			break
		}
	}
	for i := range snap {
		s.cells[i].Store(snap[i])
	}
	s.epoch.Store(idx)
}

// Window fills out with the histogram of the window at now and returns the
// calls measured and the calls censored in it.
//
// A bucket whose slot is still being written by the call that opened it
// looks empty, and the walk starts from a later one: that bucket's calls
// are missing from this one reading. Only a writer descheduled between
// publishing a bucket and writing its slot, while the window moves past
// another bucket, can cause it.
func (h *Histogram) Window(now int64, out *Hist) (count, censored uint64) {
	for {
		he := h.headEnd.Load()
		if he == never {
			return 0, 0
		}
		head := he/h.width - 1
		oldest := max(h.bucket(now), head) - h.n + 1
		if oldest > head {
			return 0, 0 // the newest call has left the window
		}
		found, moved := false, false
		for i := oldest; i <= head && !found && !moved; i++ {
			s := &h.slots[timebase.FloorMod(i, h.n)]
			e := s.epoch.Load()
			switch {
			case e == slotBusy:
				runtime.Gosched()
				i-- // read it again
			case e > head:
				moved = true
			case e == i:
				for k := range out {
					out[k] = s.cells[k].Load()
				}
				if s.epoch.Load() != e {
					moved = true
				} else {
					found = true
				}
			}
		}
		if !found {
			// The window moved on, or the head's slot is a few stores
			// away from being written: read it anew.
			runtime.Gosched()
			continue
		}
		// Counters are read after the snapshot: never behind it.
		for k := 0; k < Cells; k += 2 {
			out[k] = uint32(h.cells[k].Load()) - out[k]
			out[k+1] = uint32(h.cells[k+1].Load()) - out[k+1]
			count += uint64(out[k])
			censored += uint64(out[k+1])
		}
		return count, censored
	}
}

// Totals returns the counts since the breaker began timing calls, through
// every histogram it has had: calls measured, calls censored, and the sum
// of the measured durations estimated from their bins (within 3.1%).
func (h *Histogram) Totals() Totals {
	t := h.base
	s := float64(t.Sum)
	for i := 0; i < Bins; i++ {
		t.Censored += h.cells[2*i+1].Load()
		if c := h.cells[2*i].Load(); c > 0 {
			t.Count += c
			s += float64(c) * float64(BinValue(i))
		}
	}
	t.Sum = time.Duration(min(s, math.MaxInt64))
	return t
}
