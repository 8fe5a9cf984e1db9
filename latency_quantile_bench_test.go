package breaker

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkLatency measures recording into the histogram, and reading
// it: the window of the default geometry (10 buckets), full of calls
// spread over two decades of latency, one in a hundred of them cut by a
// deadline of 60 ms (censored). quantiles is Breaker.Latency's work (the
// window's histogram, four quantiles and the totals), what Status and a
// scrape pay per breaker; one_quantile is the recompute of the adaptive
// timeout.
func BenchmarkLatency(b *testing.B) {
	r, err := compile(policy(func(p *Policy) { p.SlowCall, p.SlowRatio = time.Second, 1 }))
	if err != nil {
		b.Fatal(err)
	}
	l := newLatency(0, r, 0)
	rng := rand.New(rand.NewPCG(1, 1))
	now := int64(0)
	for i := 0; i < 100_000; i++ {
		now += int64(DefaultWindow) / 100_000
		if i%100 == 99 {
			l.add(now, int64(60*time.Millisecond), Timeout)
			continue
		}
		l.add(now, int64(float64(10*time.Millisecond)*math.Exp(rng.NormFloat64())), Success)
	}
	// record is what a timed call adds to the call path: the head check
	// and one add to a bin. The clock moves 1 µs an op, so a bucket opens
	// (and copies the counters into its slot) every 500,000 ops.
	// record/censored is the same for calls cut by a deadline.
	for _, c := range []struct {
		name string
		o    Outcome
	}{{"record/serial", Success}, {"record/censored", Timeout}} {
		b.Run(c.name, func(b *testing.B) {
			l := newLatency(0, r, 0)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				t := int64(i) * int64(time.Microsecond)
				l.add(t, 12*int64(time.Millisecond)+int64(i&1023)<<10, c.o)
			}
		})
	}
	b.Run("quantiles", func(b *testing.B) {
		b.ReportAllocs()
		var out [4]time.Duration
		for i := 0; i < b.N; i++ {
			var h latHist
			n, c := l.window(now, &h)
			latQuantiles(&h, n+c, latencyQuantiles, out[:])
			l.totals()
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
			var h latHist
			n, c := l.window(now, &h)
			latQuantileBins(&h, n+c, qs, bin[:])
		}
		if bin[0] < 0 {
			b.Fatal("no p99")
		}
	})
}
