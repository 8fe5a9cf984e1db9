package breaker

import (
	"testing"
	"time"
)

// The window's benchmarks, on the geometry of the default policy (5 s in
// 10 buckets of 500 ms), as the breaker drives its window: add, roll,
// read and a failure's trip check, serial and under contention. Each add
// reads the real clock, as the closed path does, so that the head bucket
// rolls over as it does in a live breaker.

const (
	benchWidth   = int64(500 * time.Millisecond)
	benchBuckets = 10
)

var benchStart = time.Now()

func benchNow() int64 { return int64(time.Since(benchStart)) }

func BenchmarkWindow(b *testing.B) {
	b.Run("add/serial", func(b *testing.B) {
		w := newSlidingWindow(benchWidth, benchBuckets)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			w.Touch(benchNow())
			w.AddBase(kSuccess)
		}
	})
	b.Run("add/parallel", func(b *testing.B) {
		w := newSlidingWindow(benchWidth, benchBuckets)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.Touch(benchNow())
				if !w.AddBase(kSuccess) {
					w.Add(kSuccess)
				}
			}
		})
	})
	// roll: every add lands in a new bucket, which it clears and
	// publishes first: the cost of a call after an idle bucket.
	b.Run("roll/serial", func(b *testing.B) {
		w := newSlidingWindow(benchWidth, benchBuckets)
		now := benchNow()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now += benchWidth
			w.Touch(now)
			w.AddBase(kSuccess)
		}
	})
	// read: a full window summed, as the trip check and Snapshot do; a
	// window whose tally has spread over stripes sums every stripe.
	for _, striped := range []bool{false, true} {
		name := "read/serial"
		if striped {
			name = "read/striped"
		}
		b.Run(name, func(b *testing.B) {
			w := newSlidingWindow(benchWidth, benchBuckets)
			if striped {
				w.Spread()
			}
			now := benchNow()
			for i := int64(0); i < benchBuckets; i++ {
				w.Touch(now + i*benchWidth)
				for j := 0; j < 10; j++ {
					w.Add(kSuccess)
				}
			}
			at := now + (benchBuckets-1)*benchWidth
			if got := w.Sum(at).Counted; got != 10*benchBuckets {
				b.Fatalf("the window holds %d calls, want %d", got, 10*benchBuckets)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var s Snapshot
			for i := 0; i < b.N; i++ {
				s = w.Sum(at)
			}
			benchCountsSink = s
		})
	}
	// failure: a failure's add and its trip check on a window far from
	// tripping, serial and under contention.
	r := &tripRules{ErrorRatio: 0.5, MinRequests: 1 << 40}
	b.Run("failure/serial", func(b *testing.B) {
		w := newSlidingWindow(benchWidth, benchBuckets)
		now := benchNow()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			w.Touch(now)
			at, _ := w.Add(kFailure)
			if w.Check(now, r, at, true) != noRule {
				b.Fatal("tripped")
			}
		}
	})
	b.Run("failure/parallel", func(b *testing.B) {
		w := newSlidingWindow(benchWidth, benchBuckets)
		now := benchNow()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.Touch(now)
				at, _ := w.Add(kFailure)
				if w.Check(now, r, at, true) != noRule {
					b.Error("tripped")
					return
				}
			}
		})
	})
}

// benchCountsSink keeps the compiler from discarding the sums.
var benchCountsSink Snapshot
