package breaker

import (
	"testing"
	"time"
)

// benchWindow returns a window of the default geometry, and its tally.
func benchWindow() (*window, *tally) {
	w := newWindow(int64(DefaultWindow)/DefaultBuckets, DefaultBuckets)
	return w, &w.tally
}

// BenchmarkWindow measures the window alone. Each record reads the real
// clock, as recordSuccess does: with a frozen now the head bucket would
// never roll over and the benchmark would skip work that a live breaker
// does every 500 ms. It also makes record directly comparable with
// BenchmarkFloor, which is the same clock read plus one plain atomic add.
func BenchmarkWindow(b *testing.B) {
	b.Run("record/serial", func(b *testing.B) {
		w, t := benchWindow()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w.touch(int64(time.Since(processStart)))
			t.inc(kSuccess)
		}
	})
	b.Run("record/parallel", func(b *testing.B) {
		w, t := benchWindow()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.touch(int64(time.Since(processStart)))
				t.inc(kSuccess)
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
			width := int64(DefaultWindow) / DefaultBuckets
			now := int64(time.Since(processStart))
			for i := int64(0); i < DefaultBuckets; i++ {
				for j := 0; j < 10; j++ {
					w.touch(now + i*width)
					t.inc(kSuccess)
				}
			}
			at := now + (DefaultBuckets-1)*width
			if got := w.sum(at).Counted; got != 10*DefaultBuckets {
				b.Fatalf("window holds %d calls, want %d", got, 10*DefaultBuckets)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var s Snapshot
			for i := 0; i < b.N; i++ {
				s = w.sum(at)
			}
			benchSnapshotSink = s
		})
	}
}

// benchSnapshotSink keeps the compiler from discarding the sums.
var benchSnapshotSink Snapshot
