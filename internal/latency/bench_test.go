package latency

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkHistogram measures recording into the histogram, and reading
// it: a window of 10 buckets of 500 ms, full of calls spread over two
// decades of latency, one in a hundred of them censored at 60 ms.
// quantiles is a breaker's Latency work (the window, four quantiles and
// the totals), what Status and a scrape pay per breaker; one_quantile is
// the recompute of the adaptive timeout.
func BenchmarkHistogram(b *testing.B) {
	const width, buckets = int64(500 * time.Millisecond), 10
	l := newHistogram(width, buckets)
	rng := rand.New(rand.NewPCG(1, 1))
	now := int64(0)
	for i := 0; i < 100_000; i++ {
		now += width * buckets / 100_000
		if i%100 == 99 {
			l.Add(now, int64(60*time.Millisecond), true)
			continue
		}
		l.Add(now, int64(float64(10*time.Millisecond)*math.Exp(rng.NormFloat64())), false)
	}
	// record is what a timed call adds to the call path: the head check
	// and one add to a bin. The clock moves 1 µs an op, so a bucket opens
	// (and copies the counters into its slot) every 500,000 ops.
	for _, c := range []struct {
		name     string
		censored bool
	}{{"record/serial", false}, {"record/censored", true}} {
		b.Run(c.name, func(b *testing.B) {
			l := newHistogram(width, buckets)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				t := int64(i) * int64(time.Microsecond)
				l.Add(t, 12*int64(time.Millisecond)+int64(i&1023)<<10, c.censored)
			}
		})
	}
	b.Run("quantiles", func(b *testing.B) {
		b.ReportAllocs()
		var out [4]time.Duration
		for i := 0; i < b.N; i++ {
			var h Hist
			n, c := l.Window(now, &h)
			Quantiles(&h, n+c, statusQuantiles, out[:])
			l.Totals()
		}
		if out[0] == 0 {
			b.Fatal("no median")
		}
	})
	b.Run("one_quantile", func(b *testing.B) {
		b.ReportAllocs()
		var bin [1]int
		qs := []float64{0.99}
		for i := 0; i < b.N; i++ {
			var h Hist
			n, c := l.Window(now, &h)
			QuantileBins(&h, n+c, qs, bin[:])
		}
		if bin[0] < 0 {
			b.Fatal("no p99")
		}
	})
}
