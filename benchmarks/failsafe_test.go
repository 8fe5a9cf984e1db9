package benchmarks

import (
	"errors"
	"testing"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

func failsafeOK() error   { return nil }
func failsafeFail() error { return errFail }

// failsafeSubject holds the executor as well as the breaker: building the
// executor once, outside the loop, is the cheapest way failsafe-go offers
// to run a function, and so the fairest to measure.
type failsafeSubject struct {
	cb   circuitbreaker.CircuitBreaker[any]
	exec failsafe.Executor[any]
}

// newFailsafe uses failsafe-go's time-based failure rate threshold, whose
// period failsafe-go always splits into 10 slices: the same geometry as
// ours.
func newFailsafe(tb testing.TB, open bool) failsafeSubject {
	tb.Helper()
	return newFailsafeSample(tb, open, minRequests)
}

// newFailsafeSample is newFailsafe with sample calls needed in the window before it trips.
func newFailsafeSample(tb testing.TB, open bool, sample int) failsafeSubject {
	tb.Helper()
	cooldown := openFor
	if open {
		cooldown = longCooldown
	}
	cb := circuitbreaker.NewBuilder[any]().
		WithFailureRateThreshold(errorRatio, uint(sample), window).
		WithDelay(cooldown).
		WithSuccessThreshold(probes).
		Build()
	s := failsafeSubject{cb: cb, exec: failsafe.With[any](cb)}
	if open {
		trip(func() { _ = s.exec.Run(failsafeFail) })
	}
	return s
}

func failsafeIsOpen(s failsafeSubject) bool { return s.cb.IsOpen() }

func failsafeRefused(err error) bool { return errors.Is(err, circuitbreaker.ErrOpen) }

func benchFailsafeClosed(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		s := newFailsafe(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if s.exec.Run(failsafeOK) != nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "failed on a closed breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		s := newFailsafe(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if s.exec.Run(failsafeOK) != nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "failed on a closed breaker")
	})
}

func benchFailsafeOpen(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		s := newFailsafe(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if s.exec.Run(failsafeOK) == nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "admitted by an open breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		s := newFailsafe(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if s.exec.Run(failsafeOK) == nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "admitted by an open breaker")
	})
}
