package benchmarks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The shared workload. Every library is configured, as far as its API
// allows, like breaker.DefaultPolicy: a 5 s window in 10 buckets, at least
// 20 calls and a failure ratio of 0.5 to trip, 3 half-open probes, no call
// timeout. An open breaker gets a day-long cooldown so that no run reaches
// half-open.
const (
	window       = 5 * time.Second
	buckets      = 10
	minRequests  = 20
	errorRatio   = 0.5
	openFor      = 30 * time.Second
	probes       = 3
	longCooldown = 24 * time.Hour
)

var (
	ctx     = context.Background()
	errFail = errors.New("benchmarks: downstream failed")
)

// BenchmarkClosed is the cost a healthy call pays for its breaker.
func BenchmarkClosed(b *testing.B) {
	b.Run("govkit", benchGovkitClosed)
	b.Run("gobreaker", benchGobreakerClosed)
	b.Run("failsafe", benchFailsafeClosed)
	b.Run("mercari", benchMercariClosed)
	b.Run("cep21", benchCep21Closed)
	b.Run("floor", benchFloor)
}

// BenchmarkOpen is the cost of a refusal: what a caller pays to learn that
// the downstream is cut off.
func BenchmarkOpen(b *testing.B) {
	b.Run("govkit", benchGovkitOpen)
	b.Run("gobreaker", benchGobreakerOpen)
	b.Run("failsafe", benchFailsafeOpen)
	b.Run("mercari", benchMercariOpen)
	b.Run("cep21", benchCep21Open)
	b.Run("floor", benchFloor)
}

// The floor is the least any breaker with a time window can do per call:
// one monotonic clock read and one add to a shared counter. It runs in both
// tables so that each has a reference measured next to its rows, which
// matters on a machine whose speed drifts with other load.
var (
	floorStart = time.Now()
	floorSum   atomic.Int64
)

func benchFloor(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			floorSum.Add(int64(time.Since(floorStart)))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				floorSum.Add(int64(time.Since(floorStart)))
			}
		})
	})
}

// trip sends minRequests failures through call: enough to open every
// breaker here, since each needs minRequests calls at a ratio of 0.5.
func trip(call func()) {
	for i := 0; i < minRequests; i++ {
		call()
	}
}

// counter tallies, across RunParallel goroutines, the calls that did not
// end as the benchmark expects. Each benchmark checks it after the loop:
// a closed breaker that refused, or an open one that admitted, would make
// the figure meaningless.
type counter struct{ n atomic.Int64 }

func (c *counter) check(b *testing.B, what string) {
	b.Helper()
	if n := c.n.Load(); n != 0 {
		b.Fatalf("%d calls %s", n, what)
	}
}
