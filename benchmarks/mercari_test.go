package benchmarks

import (
	"errors"
	"testing"

	circuitbreaker "github.com/mercari/go-circuitbreaker"
)

func mercariOK() (interface{}, error)   { return nil, nil }
func mercariFail() (interface{}, error) { return nil, errFail }

// newMercari is the nearest mercari/go-circuitbreaker comes to our window:
// it has no sliding window, only counters that a ticker goroutine zeroes
// every reset interval, so it gets a fixed 5 s window with no buckets. Its
// failure-rate trip function takes the same minimum and ratio as ours.
// The constant open timeout replaces its default exponential backoff.
func newMercari(tb testing.TB, open bool) *circuitbreaker.CircuitBreaker {
	tb.Helper()
	return newMercariSample(tb, open, minRequests)
}

// newMercariSample is newMercari with sample calls needed in the window before it trips.
func newMercariSample(tb testing.TB, open bool, sample int) *circuitbreaker.CircuitBreaker {
	tb.Helper()
	cooldown := openFor
	if open {
		cooldown = longCooldown
	}
	cb := circuitbreaker.New(
		circuitbreaker.WithCounterResetInterval(window),
		circuitbreaker.WithTripFunc(circuitbreaker.NewTripFuncFailureRate(int64(sample), errorRatio)),
		circuitbreaker.WithOpenTimeout(cooldown),
		circuitbreaker.WithHalfOpenMaxSuccesses(probes),
	)
	if open {
		trip(func() { _, _ = cb.Do(ctx, mercariFail) })
	}
	return cb
}

func mercariIsOpen(cb *circuitbreaker.CircuitBreaker) bool {
	return cb.State() == circuitbreaker.StateOpen
}

func mercariRefused(err error) bool { return errors.Is(err, circuitbreaker.ErrOpen) }

func benchMercariClosed(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newMercari(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := cb.Do(ctx, mercariOK); err != nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "failed on a closed breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newMercari(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Do(ctx, mercariOK); err != nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "failed on a closed breaker")
	})
}

func benchMercariOpen(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		cb := newMercari(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := cb.Do(ctx, mercariOK); err == nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "admitted by an open breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		cb := newMercari(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Do(ctx, mercariOK); err == nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "admitted by an open breaker")
	})
}
