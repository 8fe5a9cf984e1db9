package breaker

import (
	"context"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/govkit/breaker/internal/timebase"
)

// The sliding window: bucketed snapshots of the monotonic totals of its
// own tally, which make it slide; the striped tally is in tally.go and the
// gates that let a failure skip the trip check in gates.go. Times are
// int64 nanoseconds on the breaker's time, which never goes backwards.
// Recording never blocks and never allocates.

// slidingWindow is a sliding window of n buckets over the monotonic totals of
// its own tally. Its sum at now is the totals minus the snapshot of the
// oldest bucket still inside the window, taken just before that bucket's
// first call: every call recorded since, and nothing older. Every bucket
// of the window has a slot, empty ones included, so a sum reads one slot
// whatever n. A slidingWindow is 80 bytes, a size class of the allocator.
type slidingWindow struct {
	width int64 // bucket width, ns
	// headEnd is the end of the newest bucket (math.MinInt64 before the
	// first call): the one value the recording path loads.
	headEnd atomic.Int64
	slots   *slot // the first of n, one per bucket (see ring)
	n       int64
	tally   tally
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
func (s *slot) write(idx int64, snap Snapshot) {
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
func newSlidingWindow(width, n int64) *slidingWindow {
	slots := make([]slot, n)
	w := &slidingWindow{width: width, slots: &slots[0], n: n}
	w.headEnd.Store(math.MinInt64)
	for i := range slots {
		slots[i].epoch.Store(slotEmpty)
	}
	return w
}

// ring is the window's slots. They are held as a pointer and a count
// rather than a slice, whose capacity would take the window past 80 bytes.
func (w *slidingWindow) ring() []slot { return unsafe.Slice(w.slots, w.n) }

// bucket is the index of the bucket holding now. The last bucket whose
// end, (index+1)·width, is representable takes every later time, so that
// the end never overflows.
func (w *slidingWindow) bucket(now int64) int64 {
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
func (w *slidingWindow) Touch(now int64) {
	if now >= w.headEnd.Load() {
		w.advance(now)
	}
}

// advance makes the bucket holding now the newest one, and writes its slot
// and those of the empty buckets since the previous newest (at most n-1),
// all with the same snapshot: nothing was recorded in between.
func (w *slidingWindow) advance(now int64) {
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
func (w *slidingWindow) Sum(now int64) Snapshot {
	c, _ := w.read(now, nil)
	return c
}

// read is Sum that also returns the end of the newest bucket (headEnd) the
// sum was taken against, and, if fs is not nil, fills it with each
// stripe's failures as of the same reading (see tally.windowTotals).
// While headEnd stays at that value, a reader at any time before it sums
// from the same slot, so the window changes only by what is added to the
// totals: the gates (gate.go) rely on it.
func (w *slidingWindow) read(now int64, fs *[maxStripes]uint64) (Snapshot, int64) {
	for {
		he := w.headEnd.Load()
		if he == math.MinInt64 {
			return Snapshot{}, he
		}
		head := he/w.width - 1 // he is a multiple of width
		oldest := max(w.bucket(now), head) - w.n + 1
		if oldest > head {
			return Snapshot{}, he // the newest call has left the window
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
		out := Snapshot{
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

// A breaker holds its generation's window and a tally of its own.

// Snapshot is what a breaker's window holds at one instant: the evidence
// the trip rules judge.
type Snapshot struct {
	// Counted is the successes, failures and timeouts in the window.
	Counted uint64 `json:"counted"`
	// Failures is the counted calls that failed, timeouts included.
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

// snapshot is what win holds at now.
func snapshot(win *slidingWindow, now int64) Snapshot { return Snapshot(win.Sum(now)) }

// The counters of a breaker's own tally.
const (
	countRejected       kind = iota // calls refused without calling fn
	countFallbacks                  // results served by a fallback instead of the downstream
	countIgnored                    // admitted calls whose outcome was Ignored
	countShadowRejected             // calls a shadow breaker admitted but would have refused
)

// outcomeKind is the window counter a closed-state outcome adds to.
func outcomeKind(o Outcome) kind {
	switch o {
	case Timeout:
		return kTimeout
	case Failure:
		return kFailure
	}
	return kSuccess
}

// recordSuccess is record for an in-time closed-state success: one clock
// read, a few loads and one counter increment (slidingWindow.AddBase),
// under the rules in force now.
//
// A result counts only in the window of its own generation, while it
// lasts. Every end of a generation seals its window first, and a new
// window is stored after the word has moved on; this path loads the
// window, then checks the generation, then adds. So a window stored after
// gen ended fails the check, and an add to a sealed one fails and goes to
// record (docs/internals.md, "Results that arrive after their generation").
// The warmup check, which may read the caller's context, comes first.
func (b *Breaker) recordSuccess(caller context.Context, gen uint64) {
	now := b.opt.tb.Now()
	r := b.rules.Load()
	cold := b.coldFast(caller, now, r)
	win := b.win.Load()
	if b.state.Load().gen() != gen || cold {
		b.record(caller, now, gen, Success, false, r)
		return
	}
	win.Touch(now)
	if !win.AddBase(kSuccess) { // Add, its common case inlined
		if _, ok := win.Add(kSuccess); !ok {
			b.record(caller, now, gen, Success, false, r) // win was sealed
			return
		}
	}
	if r.consec > 0 && uint32(b.consec.Load()) != 0 {
		b.endRun(gen)
	}
}

// record puts a closed-state outcome into the window and checks the trip
// rules after a failure or a slow call.
func (b *Breaker) record(caller context.Context, now int64, gen uint64, o Outcome, slow bool, r *rules) {
	if o == Ignored {
		b.tally.Inc(countIgnored)
		return
	}
	// The same order as recordSuccess, for the same reason.
	cold := b.cold(caller, now, r)
	win := b.win.Load()
	w := b.state.Load()
	b.land(caller, now, gen, win, w, cold, o, slow, r)
}

// land is record after its loads: win and w are the window and the state
// word a result of generation gen found, in that order.
func (b *Breaker) land(caller context.Context, now int64, gen uint64, win *slidingWindow, w word, cold bool, o Outcome, slow bool, r *rules) {
	var at *tallyStripe
	for {
		if w.gen() != gen {
			if b.divert(caller, now, gen, w, o, slow) {
				return
			}
			// Stale: it counts in the metrics, never in the window.
			b.countOutcome(o)
			return
		}
		if cold {
			b.other[oExempt].Add(1)
			b.countOutcome(o)
			return
		}
		win.Touch(now)
		k := outcomeKind(o)
		if win.AddBase(k) {
			break // to the base counters: at stays nil
		}
		var ok bool
		if at, ok = win.Add(k); ok {
			break
		}
		// win was sealed after the check: wait out the change of
		// generation, which holds b.mu from the seal to the new window's
		// store, then go to the window now current, or count as stale.
		b.mu.Lock()
		b.mu.Unlock() // empty: the wait is the point
		win, w = b.win.Load(), b.state.Load()
	}
	// Outcome before slowness, which readers load first, so Slow <=
	// Counted; a seal between the two leaves the call not slow.
	if slow {
		win.Add(kSlow)
	}
	run := false
	if o == Success {
		if r.consec > 0 && uint32(b.consec.Load()) != 0 {
			b.endRun(gen)
		}
		if !slow {
			return
		}
	} else if r.consec > 0 {
		// Only while the rule is on: every core's failures write the
		// run, and a SetPolicy that changes the rule restarts it.
		run = b.failRun(gen) >= r.consec
	}
	if w.mode() == ModeForcedClosed {
		return
	}
	// The trip check: a failure below its gate skips it (see
	// slidingWindow.Check); a slow call always makes it.
	if run || win.Check(now, &r.trip, at, !slow) != noRule {
		b.evaluate(now, gen)
	}
	if o != Success && r.throttle {
		b.rethrottle(now, gen) // Policy.Throttle, once the trip rules have had their say
	}
}

// The run of consecutive failures lives in Breaker.consec: its length in
// the low 32 bits, the low 32 bits of its generation in the high 32. A
// failure lengthens it, and a success ends it, only in a CAS that finds
// its own generation there; every end of a generation hands the run on
// before the state word moves (endGenLocked).

// maxRun is the longest run counted; a longer one counts as maxRun (see
// compile).
const maxRun = 1<<32 - 1

// failRun adds a failure of generation gen to the run and returns its
// length, or 0 if the run belongs to another generation.
func (b *Breaker) failRun(gen uint64) uint64 {
	for {
		v := b.consec.Load()
		if uint32(v>>32) != uint32(gen) {
			return 0
		}
		n := v
		if uint32(v) < maxRun {
			n++
		}
		if n == v || b.consec.CompareAndSwap(v, n) {
			return uint64(uint32(n))
		}
	}
}

// endRun ends the run on a success of generation gen, if the run belongs
// to it.
func (b *Breaker) endRun(gen uint64) {
	for {
		v := b.consec.Load()
		if uint32(v) == 0 || uint32(v>>32) != uint32(gen) {
			return
		}
		if b.consec.CompareAndSwap(v, v&^maxRun) {
			return
		}
	}
}

// runLength is the length of the run.
func (b *Breaker) runLength() uint64 { return uint64(uint32(b.consec.Load())) }

// handRunLocked gives the run to generation gen, its length kept if keep,
// else 0. b.mu must be held.
func (b *Breaker) handRunLocked(gen uint64, keep bool) {
	for {
		v := b.consec.Load()
		n := uint64(uint32(gen)) << 32
		if keep {
			n |= v & maxRun
		}
		if b.consec.CompareAndSwap(v, n) {
			return
		}
	}
}

// countOutcome counts an outcome that does not go into the window.
func (b *Breaker) countOutcome(o Outcome) {
	switch o {
	case Success:
		b.other[oSuccess].Add(1)
	case Ignored:
		b.tally.Inc(countIgnored)
	case Timeout:
		b.other[oTimeout].Add(1)
	default:
		b.other[oFailure].Add(1)
	}
}
