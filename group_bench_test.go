package breaker

import (
	"context"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkGroupDo compares g.Do on an existing key with Do on the breaker
// itself: the difference is the lookup. The group holds 1,000 keys so that
// the lookup is not into a trivially small map. "existing" passes the same
// string the breaker was created with (a constant, the common case);
// "built_key" builds an equal string for every call, as code that
// concatenates "method@"+addr per call does, and so takes the map.
func BenchmarkGroupDo(b *testing.B) {
	g, err := NewGroup(GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	const key = "inventory.GetStock@10.0.1.44"
	br, _ := g.Get(key)
	for i := 0; i < 1000; i++ {
		_, _ = g.Get("inventory.GetStock@10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	// An equal string with its own bytes, as a key built per call would be.
	built := string([]byte("inventory.GetStock@10.0.1.44"))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	b.Run("direct/serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = br.Do(ctx, ok)
		}
	})
	b.Run("existing/serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = g.Do(ctx, key, ok)
		}
	})
	b.Run("built_key/serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = g.Do(ctx, built, ok)
		}
	})
	// The key built for every call from a target's address, as a
	// per-target caller does: a new string each time, which the caller
	// concatenates.
	addr := "10.0.1.44"
	b.Run("dynamic_key/serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = g.Do(ctx, "inventory.GetStock@"+addr, ok)
		}
	})
	b.Run("direct/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = br.Do(ctx, ok)
			}
		})
	})
	b.Run("existing/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = g.Do(ctx, key, ok)
			}
		})
	})
	b.Run("dynamic_key/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = g.Do(ctx, "inventory.GetStock@"+addr, ok)
			}
		})
	})
}

// BenchmarkGroupMemory/10000_keys reports the heap bytes per breaker of a group
// of 10,000 per-target keys, each called once: breaker, window, map entry
// and key.
func BenchmarkGroupMemory(b *testing.B) {
	b.Run("10000_keys", func(b *testing.B) {
		const n = 10000
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "inventory.GetStock@10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
		}
		ctx := context.Background()
		ok := func(context.Context) error { return nil }
		var per float64
		for i := 0; i < b.N; i++ {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g, _ := NewGroup(GroupConfig{})
			for _, k := range keys {
				_ = g.Do(ctx, k, ok)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			per = float64(after.HeapAlloc-before.HeapAlloc) / n
			runtime.KeepAlive(g)
		}
		b.ReportMetric(per, "B/breaker")
	})
}
