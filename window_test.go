package breaker

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/govkit/breaker/internal/timebase"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = int64(time.Millisecond)

// testWindow is a window with its tally, recorded the way the breaker does.
type testWindow struct {
	w *slidingWindow
	t *tally
}

func newTestWindow(width, n int64) *testWindow {
	w := newSlidingWindow(width, n)
	return &testWindow{w: w, t: &w.tally}
}

// What tests record: an outcome, or a slow success.
const (
	recOK      = kSuccess
	recFail    = kFailure
	recTimeout = kTimeout
	recSlow    = numKinds // a slow success
)

func (tw *testWindow) record(now int64, kind kind) {
	tw.w.Touch(now)
	if kind == recSlow {
		tw.t.Inc(kSuccess)
		tw.t.Inc(kSlow)
		return
	}
	tw.t.Inc(kind)
}

func (tw *testWindow) sum(now int64) Snapshot { return tw.w.Sum(now) }

func TestWindow_SumCoversTheLastWindow(t *testing.T) {
	tw := newTestWindow(500*ms, 10) // 5 s
	tw.record(0, recOK)
	tw.record(100*ms, recFail)
	tw.record(1200*ms, recTimeout)
	tw.record(4900*ms, recSlow)
	assert.Equal(t, Snapshot{Counted: 4, Failures: 2, Timeouts: 1, Slow: 1}, tw.sum(4999*ms))
	// At 5.0 s the bucket [0, 500ms) has left the window.
	assert.Equal(t, Snapshot{Counted: 2, Failures: 1, Timeouts: 1, Slow: 1}, tw.sum(5000*ms))
	// At 5.5 s the bucket [1000, 1500) is the oldest still in.
	assert.Equal(t, Snapshot{Counted: 2, Failures: 1, Timeouts: 1, Slow: 1}, tw.sum(5999*ms))
	assert.Equal(t, Snapshot{Counted: 1, Slow: 1}, tw.sum(6000*ms))
	assert.Equal(t, Snapshot{}, tw.sum(10*time.Second.Nanoseconds()))
}

func TestWindow_BucketGoesStaleAtItsExactEnd(t *testing.T) {
	width, n := 500*ms, int64(10)
	tw := newTestWindow(width, n)
	t0 := int64(1234) * ms // inside bucket [1000, 1500)
	tw.record(t0, recFail)
	stale := int64(1000)*ms + n*width // the bucket leaves the window here
	assert.Equal(t, uint64(1), tw.sum(stale-1).Counted, "one nanosecond before it goes stale")
	assert.Equal(t, uint64(0), tw.sum(stale).Counted, "the nanosecond it goes stale")
	// And a write one nanosecond before the stale point still lands in
	// the window; one at the stale point starts a fresh window.
	tw.record(stale-1, recOK)
	assert.Equal(t, uint64(2), tw.sum(stale-1).Counted)
	tw.record(stale, recOK)
	assert.Equal(t, uint64(2), tw.sum(stale).Counted, "the new call plus the one at stale-1")
}

func TestWindow_LosesNoWriteAfterAnIdleGap(t *testing.T) {
	// The bug class of cep21/circuit#159: after an idle gap, a writer
	// added to a bucket that the next writer then cleared. Here every
	// write after the gap must be summed.
	tw := newTestWindow(500*ms, 10)
	tw.record(0, recFail)
	gap := int64(time.Hour)
	for i := int64(0); i < 7; i++ {
		tw.record(gap+i, recOK)
	}
	assert.Equal(t, Snapshot{Counted: 7}, tw.sum(gap+10))
}

func TestWindow_ConcurrentWritesAfterAnIdleGapAreAllSummed(t *testing.T) {
	tw := newTestWindow(500*ms, 10)
	tw.record(0, recOK)
	const goroutines, each = 8, 500
	gap := int64(time.Hour)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// All land in two buckets right after the gap, so the
				// bucket change races with the writes.
				tw.record(gap+int64(i%2)*500*ms, recOK)
			}
		}(g)
	}
	wg.Wait()
	assert.Equal(t, uint64(goroutines*each), tw.sum(gap+600*ms).Counted)
}

func TestWindow_ClockGoingBackwardsCountsInTheNewestBucket(t *testing.T) {
	tw := newTestWindow(500*ms, 10)
	tw.record(10_000*ms, recOK)
	tw.record(2_000*ms, recFail) // the clock stepped back 8 s
	// Counted with the newest bucket, not in history.
	assert.Equal(t, Snapshot{Counted: 2, Failures: 1}, tw.sum(2_000*ms))
	assert.Equal(t, Snapshot{Counted: 2, Failures: 1}, tw.sum(14_999*ms))
	assert.Equal(t, Snapshot{}, tw.sum(15_000*ms))
}

func TestWindow_ExtremeTimesDoNotCorruptIt(t *testing.T) {
	tw := newTestWindow(500*ms, 10)
	tw.record(math.MinInt64, recOK)
	tw.record(-1, recFail)
	tw.record(math.MaxInt64-1, recOK)
	tw.record(math.MaxInt64, recOK)
	tw.record(math.MaxInt64, recOK)
	assert.Equal(t, uint64(3), tw.sum(math.MaxInt64).Counted)
	assert.Equal(t, uint64(3), tw.sum(0).Counted, "a reader behind the head sees the head's window")
}

func TestWindow_HugeBurstInOneBucket(t *testing.T) {
	tw := newTestWindow(500*ms, 10)
	const n = 200_000
	for i := 0; i < n; i++ {
		tw.record(int64(i%500)*ms, recFail)
	}
	assert.Equal(t, Snapshot{Counted: n, Failures: n}, tw.sum(499*ms))
}

func TestTally_SpreadingKeepsEveryCount(t *testing.T) {
	var tl tally
	for i := 0; i < 10; i++ {
		tl.Inc(kSuccess)
	}
	tl.spread()
	require.NotNil(t, tl.stripes.Load())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				tl.Inc(kSuccess)
				tl.Inc(kFailure)
				tl.Inc(kSlow)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, uint64(8010), tl.Load(kSuccess))
	assert.Equal(t, Snapshot{Counted: 16010, Failures: 8000, Slow: 8000}, tl.windowTotals(nil))
}

// A sealed tally takes no more adds, and its seal hands over every add
// that it took, exactly once: adds racing the seal either land before it
// and are in its totals, or fail. It holds whether the tally had spread
// before the seal, or is spread by an add that collides during it.
func TestTally_SealTakesEveryAddOnceAndNoMore(t *testing.T) {
	for _, spread := range []bool{false, true} {
		t.Run(fmt.Sprintf("spread=%v", spread), func(t *testing.T) {
			var tl tally
			if spread {
				tl.spread()
			}
			var added [numKinds]atomic.Uint64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					<-start
					for i := 0; i < 2000; i++ {
						k := kind((g + i) % numKinds)
						if _, ok := tl.add(k); ok {
							added[k].Add(1)
						}
					}
				}(g)
			}
			close(start)
			runtime.Gosched()
			var got [numKinds]uint64
			tl.seal(&got)
			after := got
			tl.seal(&after) // a second seal hands over nothing
			wg.Wait()
			for k := range got {
				assert.Equal(t, added[k].Load(), got[k], "kind %d", k)
			}
			assert.Equal(t, got, after)
			_, ok := tl.add(kSuccess)
			assert.False(t, ok, "an add after the seal")
			assert.Equal(t, [numKinds]uint64{}, tl.outcomes(), "a sealed tally reads as handed over")
		})
	}
}

// naiveWindow is the model the fuzz target checks the window against: a
// list of every call with the bucket it counts in, summed by brute force.
type naiveWindow struct {
	width, n int64
	head     int64 // newest bucket recorded, or math.MinInt64
	calls    []naiveCall
}

type naiveCall struct {
	bucket int64
	kind   kind
}

func (m *naiveWindow) record(now int64, kind kind) {
	b := max(timebase.FloorDiv(now, m.width), m.head)
	m.head = b
	m.calls = append(m.calls, naiveCall{b, kind})
}

func (m *naiveWindow) sum(now int64) Snapshot {
	if m.head == math.MinInt64 {
		return Snapshot{}
	}
	cur := max(timebase.FloorDiv(now, m.width), m.head)
	var s Snapshot
	for _, c := range m.calls {
		if c.bucket <= cur-m.n {
			continue
		}
		s.Counted++
		switch c.kind {
		case recFail:
			s.Failures++
		case recTimeout:
			s.Failures++
			s.Timeouts++
		case recSlow:
			s.Slow++
		}
	}
	return s
}

// FuzzWindow drives the window and the naive model with the same calls and
// clock moves, forwards and backwards, and compares every sum.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{0xff, 0, 0, 0, 0x80, 1, 2, 0xfe, 0x7f, 0x10, 0x20})
	f.Add([]byte{3, 3, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		width := int64(data[0]%5+1) * 100 * ms
		n := int64(data[1]%12 + 1)
		tw := newTestWindow(width, n)
		m := &naiveWindow{width: width, n: n, head: math.MinInt64}
		now := int64(0)
		for data = data[2:]; len(data) >= 3; data = data[3:] {
			// A step moves the clock by a signed amount of up to about
			// three windows, then records one call or reads the sum.
			step := int64(int16(binary.LittleEndian.Uint16(data))) * width * n / 10000
			now += step
			switch op := data[2] % 5; op {
			case 0:
				require.Equal(t, m.sum(now), tw.sum(now), "sum at %d", now)
			default:
				kind := [4]kind{recOK, recFail, recTimeout, recSlow}[op-1]
				tw.record(now, kind)
				m.record(now, kind)
			}
		}
		require.Equal(t, m.sum(now), tw.sum(now), "final sum at %d", now)
	})
}

// TestWindow_EveryBucketOfTheWindowHasItsSlot: the call that opens a
// bucket after a gap writes the slots of the empty buckets before it, so
// that sum reads one slot, the oldest bucket's, instead of walking
// forward from it to the first bucket that had a call.
func TestWindow_EveryBucketOfTheWindowHasItsSlot(t *testing.T) {
	const n = 1000
	tw := newTestWindow(5*ms, n)
	check := func(at int64) {
		t.Helper()
		head := tw.w.headEnd.Load()/tw.w.width - 1
		for idx := head - n + 1; idx <= head; idx++ {
			e, _ := tw.w.ring()[timebase.FloorMod(idx, n)].read()
			require.Equal(t, idx, e, "slot of bucket %d after a call at %d", idx, at)
		}
	}
	for _, at := range []int64{0, 3 * ms, 700 * ms, 4999 * ms, 5001 * ms, 3_600_000 * ms, -7 * ms} {
		tw.record(at, recFail)
		check(at)
	}
	// The first call is in the window until 5 s; the ones at 4.999 s and
	// 5.001 s until 10 s; the one an hour later, and the one whose clock
	// went back (counted in the newest bucket), until an hour and 5 s.
	hour := 3_600_000 * ms
	assert.Equal(t, Snapshot{Counted: 2, Failures: 2}, tw.sum(hour+4999*ms))
	assert.Equal(t, Snapshot{}, tw.sum(hour+5000*ms))
}

// TestWindow_ReadersDuringGapsSeeWholeSums reads the window while writers
// move it on by gaps of every size, so that sums race with the slot
// writes of a gap. Every sum must hold no more than was recorded and keep
// Failures <= Counted; the final sum must be exact.
func TestWindow_ReadersDuringGapsSeeWholeSums(t *testing.T) {
	const n, writers, each = 10, 4, 2000
	width := 500 * ms
	tw := newTestWindow(width, n)
	var clock atomicClock
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if i%100 == 0 {
					clock.add(int64(i%7) * width * 3) // a gap, up to two windows
				}
				tw.record(clock.now(), recFail)
			}
		}(g)
	}
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := tw.sum(clock.now())
				if s.Failures > s.Counted || s.Counted > writers*each {
					t.Errorf("torn sum %+v", s)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	now := clock.now()
	last := tw.sum(now)
	assert.Equal(t, last.Counted, last.Failures)
	assert.LessOrEqual(t, last.Counted, uint64(writers*each))
	assert.Equal(t, Snapshot{}, tw.sum(now+n*width))
}

// atomicClock is a time shared by goroutines, in nanoseconds.
type atomicClock struct{ v atomic.Int64 }

func (c *atomicClock) now() int64  { return c.v.Load() }
func (c *atomicClock) add(d int64) { c.v.Add(d) }

// TestNew_AWindowFitsItsSizeClasses: a window of ten buckets is two
// allocations that fill the allocator's size classes of 80 and 240 bytes,
// so that an idle breaker, which holds one, stays in 512 bytes.
func TestNew_AWindowFitsItsSizeClasses(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(slidingWindow{}), uintptr(80), "window")
	require.LessOrEqual(t, 10*unsafe.Sizeof(slot{}), uintptr(240), "slots")
	// Made at the first check of a window whose tally has not spread.
	require.LessOrEqual(t, unsafe.Sizeof(serialGates{}), uintptr(48), "serial gates")
	require.Equal(t, 2.0, testing.AllocsPerRun(100, func() { windowSink = newSlidingWindow(500*ms, 10) }))
}

var windowSink *slidingWindow
