package benchmarks

import (
	"context"
	"errors"
	"testing"

	"github.com/cep21/circuit/v4"
	"github.com/cep21/circuit/v4/closers/hystrix"
)

func cep21OK(context.Context) error   { return nil }
func cep21Fail(context.Context) error { return errFail }

// newCep21 uses cep21/circuit's hystrix opener, which keeps a rolling
// window of buckets like ours. Two of its defaults are switched off
// because ours have no counterpart: a 1 s execution timeout, which would
// derive a context with a deadline on every call, and a limit of 10
// concurrent calls.
func newCep21(tb testing.TB, open bool) *circuit.Circuit {
	tb.Helper()
	return newCep21Sample(tb, open, minRequests)
}

// newCep21Sample is newCep21 with sample calls needed in the window before it trips.
func newCep21Sample(tb testing.TB, open bool, sample int) *circuit.Circuit {
	tb.Helper()
	cooldown := openFor
	if open {
		cooldown = longCooldown
	}
	c := circuit.NewCircuitFromConfig("bench", circuit.Config{
		General: circuit.GeneralConfig{
			ClosedToOpenFactory: hystrix.OpenerFactory(hystrix.ConfigureOpener{
				ErrorThresholdPercentage: int64(errorRatio * 100),
				RequestVolumeThreshold:   int64(sample),
				RollingDuration:          window,
				NumBuckets:               buckets,
			}),
			OpenToClosedFactory: hystrix.CloserFactory(hystrix.ConfigureCloser{
				SleepWindow:                  cooldown,
				HalfOpenAttempts:             probes,
				RequiredConcurrentSuccessful: probes,
			}),
		},
		Execution: circuit.ExecutionConfig{
			Timeout:               -1,
			MaxConcurrentRequests: -1,
		},
	})
	if open {
		trip(func() { _ = c.Execute(ctx, cep21Fail, nil) })
	}
	return c
}

func cep21IsOpen(c *circuit.Circuit) bool { return c.IsOpen() }

func cep21Refused(err error) bool {
	var ce circuit.Error
	return errors.As(err, &ce) && ce.CircuitOpen()
}

func benchCep21Closed(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c := newCep21(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c.Execute(ctx, cep21OK, nil) != nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "failed on a closed breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		c := newCep21(b, false)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if c.Execute(ctx, cep21OK, nil) != nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "failed on a closed breaker")
	})
}

func benchCep21Open(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c := newCep21(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c.Execute(ctx, cep21OK, nil) == nil {
				bad.n.Add(1)
			}
		}
		bad.check(b, "admitted by an open breaker")
	})
	b.Run("parallel", func(b *testing.B) {
		c := newCep21(b, true)
		var bad counter
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if c.Execute(ctx, cep21OK, nil) == nil {
					bad.n.Add(1)
				}
			}
		})
		bad.check(b, "admitted by an open breaker")
	})
}
