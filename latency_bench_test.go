package breaker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// benchTimed returns a closed breaker that times its calls without adding
// a deadline (a slow-call rule that never trips), so that Do allocates
// nothing and the figure is the cost of timing and, where the breaker
// keeps one, of the latency histogram.
func benchTimed(b *testing.B) *Breaker {
	b.Helper()
	p := DefaultPolicy()
	p.SlowCall, p.SlowRatio = time.Hour, 1
	br, err := New("bench.Timed", p)
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// BenchmarkDoTimed is BenchmarkDo/closed for a timed breaker: two clock
// reads, the window, and the latency histogram's one add. Compare it
// with the same benchmark on a tree without the histogram for the cost
// of the histogram, and BenchmarkDo/closed for the cost of timing.
func BenchmarkDoTimed(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		br := benchTimed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(ctx, benchOK)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		br := benchTimed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var bad atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if br.Do(ctx, benchOK) != nil {
					bad.Add(1)
				}
			}
		})
		if n := bad.Load(); n != 0 {
			b.Fatalf("%d calls failed on a closed breaker", n)
		}
	})
}
