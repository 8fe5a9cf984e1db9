package ops

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/govkit/breaker"
)

// BenchmarkSnapshot is Snapshot of groups of 1,000, 10,000 and 100,000
// per-target breakers, each called once: time and allocations per
// snapshot, which should grow in proportion to the number of breakers.
// (The step from 1,000 to 10,000 also takes the breakers and the result
// out of a core's cache; the step from 10,000 to 100,000 shows the growth
// without that.)
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			g, err := breaker.NewGroup(breaker.GroupConfig{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for i := 0; i < n; i++ {
				key := "inventory.GetStock@10." + strconv.Itoa(i/65536) + "." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256)
				_ = g.Do(ctx, key, func(context.Context) error { return nil })
			}
			b.ReportAllocs()
			// The group's making leaves garbage (and a group from the
			// previous round of b.N): collect it here, not in the loop.
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s := Snapshot(g, Thresholds{}, nil); len(s.Breakers) != n {
					b.Fatalf("%d breakers, want %d", len(s.Breakers), n)
				}
			}
		})
	}
}
