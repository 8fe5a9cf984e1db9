package benchmarks

import (
	"context"
	"errors"
	"testing"

	"github.com/govkit/breaker"
)

func govkitOK(context.Context) error   { return nil }
func govkitFail(context.Context) error { return errFail }

func newGovkit(tb testing.TB, open bool) *breaker.Breaker {
	tb.Helper()
	return newGovkitSample(tb, open, minRequests)
}

// newGovkitSample is newGovkit with sample calls needed in the window
// before it trips.
func newGovkitSample(tb testing.TB, open bool, sample int) *breaker.Breaker {
	tb.Helper()
	p := breaker.DefaultPolicy()
	p.MinRequests = sample
	if open {
		p.OpenFor = longCooldown
		p.MaxOpenFor = longCooldown
	}
	cb, err := breaker.New("bench", p)
	if err != nil {
		tb.Fatal(err)
	}
	if open {
		trip(func() { _ = cb.Do(ctx, govkitFail) })
	}
	return cb
}

func govkitIsOpen(cb *breaker.Breaker) bool { return cb.State() == breaker.Open }

func govkitRefused(err error) bool { return errors.Is(err, breaker.ErrOpen) }

func benchGovkitClosed(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newGovkit(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if cb.Do(ctx, govkitOK) != nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "failed on a closed breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newGovkit(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if cb.Do(ctx, govkitOK) != nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "failed on a closed breaker")
	})
}

func benchGovkitOpen(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newGovkit(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if cb.Do(ctx, govkitOK) == nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "admitted by an open breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newGovkit(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if cb.Do(ctx, govkitOK) == nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "admitted by an open breaker")
	})
}
