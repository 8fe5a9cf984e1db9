package candidate_test

import (
	"context"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/internal/testutil"
)

// BenchmarkCandidate compares closed-state g.Do on a breaker with no
// candidate policy and on one with a candidate (see
// breaker.GroupPolicy.Candidate), which records every outcome a second time: the
// cost of trying a policy on real traffic. "none" is the path every
// service without a candidate takes.
func BenchmarkCandidate(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		doc  string
	}{
		{"none", `{"default": {"min_requests": 10}}`},
		{"candidate", `{"default": {"min_requests": 10}, "candidate": {"default": {"error_ratio": 0.3}}}`},
	} {
		g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
		if err != nil {
			b.Fatal(err)
		}
		if err := g.LoadPolicies([]byte(c.doc)); err != nil {
			b.Fatal(err)
		}
		const key = "inventory.GetStock"
		br, _ := g.Get(key)
		if _, has := candidate.Of(br); has != (c.name == "candidate") {
			b.Fatalf("%s: candidate %v", c.name, has)
		}
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = g.Do(ctx, key, ok)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = g.Do(ctx, key, ok)
				}
			})
		})
	}
}
