package breakerprom

import (
	"context"
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

// BenchmarkScrape is a whole scrape of a group's collector by a registry
// (Gather: collect, check and sort every family), for groups of 1,000 and
// 10,000 breakers: time and allocations per scrape, which should grow in
// proportion to the number of breakers.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(benchGroup(b, n)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
