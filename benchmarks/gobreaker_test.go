package benchmarks

import (
	"errors"
	"testing"

	"github.com/sony/gobreaker/v2"
)

func gobreakerOK() (struct{}, error)   { return struct{}{}, nil }
func gobreakerFail() (struct{}, error) { return struct{}{}, errFail }

// newGobreaker uses gobreaker's rolling window (Interval split into
// BucketPeriods), its closest match to a 5 s window in 10 buckets. The trip
// rule is written out because gobreaker's default trips on consecutive
// failures, not on a ratio.
func newGobreaker(tb testing.TB, open bool) *gobreaker.CircuitBreaker[struct{}] {
	tb.Helper()
	return newGobreakerSample(tb, open, minRequests)
}

// newGobreakerSample is newGobreaker with sample calls needed in the window before it trips.
func newGobreakerSample(tb testing.TB, open bool, sample int) *gobreaker.CircuitBreaker[struct{}] {
	tb.Helper()
	cooldown := openFor
	if open {
		cooldown = longCooldown
	}
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         "bench",
		MaxRequests:  probes,
		Interval:     window,
		BucketPeriod: window / buckets,
		Timeout:      cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return uint64(c.Requests) >= uint64(sample) && float64(c.TotalFailures) >= errorRatio*float64(c.Requests)
		},
	})
	if open {
		trip(func() { _, _ = cb.Execute(gobreakerFail) })
	}
	return cb
}

func gobreakerIsOpen(cb *gobreaker.CircuitBreaker[struct{}]) bool {
	return cb.State() == gobreaker.StateOpen
}

func gobreakerRefused(err error) bool { return errors.Is(err, gobreaker.ErrOpenState) }

func benchGobreakerClosed(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newGobreaker(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := cb.Execute(gobreakerOK); err != nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "failed on a closed breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newGobreaker(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Execute(gobreakerOK); err != nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "failed on a closed breaker")
	})
}

func benchGobreakerOpen(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newGobreaker(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := cb.Execute(gobreakerOK); err == nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "admitted by an open breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newGobreaker(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Execute(gobreakerOK); err == nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "admitted by an open breaker")
	})
}
