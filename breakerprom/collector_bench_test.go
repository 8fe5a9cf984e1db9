package breakerprom

import (
	"context"
	"io"
	"runtime"
	"strconv"
	"testing"

	"github.com/govkit/breaker"
	"github.com/prometheus/client_golang/prometheus"
)

// benchGroup returns a group of n per-target breakers, each called once,
// as a group of a large service's targets is.
func benchGroup(b *testing.B, n int) *breaker.Group {
	b.Helper()
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		key := "inventory.GetStock@10." + strconv.Itoa(i/65536) + "." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256)
		_ = g.Do(ctx, key, func(context.Context) error { return nil })
	}
	return g
}

// BenchmarkScrape is a whole scrape of a group of 1,000 and of 10,000
// breakers, time and allocations per scrape, which should grow in
// proportion to the number of breakers: by a registry holding the group's
// collector (registry: Gather, which collects, checks and sorts every
// family, without the encoding promhttp adds), and by the group's Handler
// (handler: the text written out, to io.Discard, and its size).
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("registry/"+strconv.Itoa(n), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(benchGroup(b, n)))
			b.ReportAllocs()
			// The group's making leaves garbage (and a group from the
			// previous round of b.N): collect it here, not in the loop.
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The step from 1,000 to 10,000 breakers also takes the group out of
	// a core's cache; the step from 10,000 to 100,000 shows the growth
	// without that. The registry is not run at 100,000 (seconds a scrape).
	for _, n := range []int{1000, 10000, 100000} {
		b.Run("handler/"+strconv.Itoa(n), func(b *testing.B) {
			h, err := NewHandler(benchGroup(b, n), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			// The group's making leaves garbage (and a group from the
			// previous round of b.N): collect it here, not in the loop.
			runtime.GC()
			b.ResetTimer()
			var n int64
			for i := 0; i < b.N; i++ {
				var err error
				if n, err = h.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/1e6, "MB/scrape")
		})
	}
}
