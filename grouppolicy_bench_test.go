package breaker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// reloadGroup returns a group of n breakers, held for a reload loop, and
// two documents that differ in one field of the default, so that every
// reload changes every breaker's policy.
func reloadGroup(b *testing.B, n int) (*PolicyHold, [2][]byte) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := g.Get("inventory.GetStock@10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)); err != nil {
			b.Fatal(err)
		}
	}
	hold, err := g.HoldPolicies("bench")
	if err != nil {
		b.Fatal(err)
	}
	var docs [2][]byte
	for i := range docs {
		docs[i] = []byte(fmt.Sprintf(
			`{"default": {"min_requests": %d}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`, 20+i))
	}
	return hold, docs
}

// reload decodes a document and applies it through hold, as a followed
// source does (package live adds its record).
func reload(hold *PolicyHold, data []byte, version int) error {
	gp, err := ParseGroupPolicy(data)
	if err != nil {
		return err
	}
	return hold.Apply(gp, "bench", strconv.Itoa(version))
}

// BenchmarkReload/10000_breakers is the time to decode, check and apply
// a document that changes the policy of every breaker of a group of
// 10,000.
func BenchmarkReload(b *testing.B) {
	b.Run("10000_breakers", func(b *testing.B) {
		hold, docs := reloadGroup(b, 10000)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := reload(hold, docs[i%2], i); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDoDuringReloads is g.Do on an existing key of a group of
// 10,000 breakers, with and without a goroutine reloading the group's
// policy in a loop: a reload must neither block a call nor make it
// allocate.
func BenchmarkDoDuringReloads(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	const key = "inventory.GetStock@10.0.1.44"
	for _, reloading := range []bool{false, true} {
		name := "quiet/parallel"
		if reloading {
			name = "reloading/parallel"
		}
		b.Run(name, func(b *testing.B) {
			hold, docs := reloadGroup(b, 10000)
			g := hold.g
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if reloading {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
							_ = reload(hold, docs[i%2], i)
						}
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = g.Do(ctx, key, ok)
				}
			})
			b.StopTimer()
			close(stop)
			wg.Wait()
		})
	}
}
