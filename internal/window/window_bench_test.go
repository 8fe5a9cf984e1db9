package window

import (
	"testing"
	"time"
)

// The geometry of a breaker's default policy: 5 s in 10 buckets.
const (
	benchWidth   = 500 * ms
	benchBuckets = 10
)

// benchStart anchors the real clock, as the breaker's time base does.
var benchStart = time.Now()

// benchWindow returns a window of the default geometry, and its tally.
func benchWindow() (*Window, *Tally) {
	w := New(benchWidth, benchBuckets)
	return w, &w.tally
}

// BenchmarkWindow measures the window alone. Each record reads the real
// clock, as the breaker's closed path does: with a frozen now the head
// bucket would never roll over and the benchmark would skip work that a
// live breaker does every 500 ms. It also makes record directly
// comparable with the root's BenchmarkFloor, the same clock read plus one
// plain atomic add.
func BenchmarkWindow(b *testing.B) {
	b.Run("record/serial", func(b *testing.B) {
		w, t := benchWindow()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w.Touch(int64(time.Since(benchStart)))
			t.Inc(Success)
		}
	})
	b.Run("record/parallel", func(b *testing.B) {
		w, t := benchWindow()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.Touch(int64(time.Since(benchStart)))
				t.Inc(Success)
			}
		})
	})
	// sum runs on every failure in the closed state (the trip check) and on
	// every Snapshot. A tally that has spread over stripes sums every
	// stripe, so both shapes are measured.
	for _, striped := range []bool{false, true} {
		name := "sum"
		if striped {
			name = "sum_striped"
		}
		b.Run(name, func(b *testing.B) {
			w, t := benchWindow()
			if striped {
				t.spread()
			}
			// Fill every bucket, so that sum walks a full window rather
			// than returning early on an empty one.
			width := benchWidth
			now := int64(time.Since(benchStart))
			for i := int64(0); i < benchBuckets; i++ {
				for j := 0; j < 10; j++ {
					w.Touch(now + i*width)
					t.Inc(Success)
				}
			}
			at := now + (benchBuckets-1)*width
			if got := w.Sum(at).Counted; got != 10*benchBuckets {
				b.Fatalf("window holds %d calls, want %d", got, 10*benchBuckets)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var s Counts
			for i := 0; i < b.N; i++ {
				s = w.Sum(at)
			}
			benchCountsSink = s
		})
	}
}

// benchCountsSink keeps the compiler from discarding the sums.
var benchCountsSink Counts

// BenchmarkCheck is the window's part of a failure in the closed state:
// its add and its trip check, on a window far from tripping, whose
// tally has not spread (serial) or has. It reads no clock, so that the
// clock's cost, most of a call's on some machines, does not hide the
// window's.
func BenchmarkCheck(b *testing.B) {
	r := &Rules{ErrorRatio: 0.5, MinRequests: 1 << 40}
	for _, striped := range []bool{false, true} {
		name := "failure/serial"
		if striped {
			name = "failure/striped"
		}
		b.Run(name, func(b *testing.B) {
			w, _ := benchWindow()
			if striped {
				w.Spread()
			}
			now := int64(time.Since(benchStart))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.Touch(now)
				at, _ := w.Add(Failure)
				if w.Check(now, r, at, true) != NoRule {
					b.Fatal("tripped")
				}
			}
		})
	}
}
