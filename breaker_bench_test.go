package breaker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// benchOK and benchFail are package-level so that no benchmark loop pays
// for building a closure.
func benchOK(context.Context) error { return nil }

var benchErr = errors.New("bench: downstream failed")

func benchFail(context.Context) error { return benchErr }

func benchClosed(b *testing.B) *Breaker {
	b.Helper()
	br, err := New("bench.Closed", DefaultPolicy())
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// benchOpen returns a breaker tripped by real failures, so that a refusal
// takes the same path as in production (the clock is read to see whether
// the cooldown is over). ModeForcedOpen would skip that read and flatter
// the figure. The cooldown is a day so that no run reaches half-open.
func benchOpen(b *testing.B) *Breaker {
	b.Helper()
	p := DefaultPolicy()
	p.OpenFor = 24 * time.Hour
	p.MaxOpenFor = 24 * time.Hour
	br, err := New("bench.Open", p)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < p.MinRequests; i++ {
		_ = br.Do(ctx, benchFail)
	}
	if s := br.State(); s != Open {
		b.Fatalf("breaker is %v after %d failures, want open", s, p.MinRequests)
	}
	return br
}

// benchProbe returns the context of a probe in flight, made with ctx by
// a half-open breaker of its own, and the done that ends it.
func benchProbe(b *testing.B, ctx context.Context) (context.Context, func(error)) {
	b.Helper()
	p := DefaultPolicy()
	p.OpenFor = time.Nanosecond
	p.MaxOpenFor = time.Nanosecond
	p.Jitter = 0
	br, err := New("bench.Probe", p)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < p.MinRequests; i++ {
		_ = br.Do(context.Background(), benchFail)
	}
	for br.State() != HalfOpen {
		runtime.Gosched()
	}
	call, done, err := br.Allow(ctx)
	if err != nil || !IsProbe(call) {
		b.Fatalf("no probe admitted: %v", err)
	}
	return call, done
}

// benchCtxKey is a context key of the kind other packages use.
type benchCtxKey int

// benchDeepContext returns a context n values deep, none of them ours.
func benchDeepContext(n int) context.Context {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		ctx = context.WithValue(ctx, benchCtxKey(i), i)
	}
	return ctx
}

func benchWantOpen(b *testing.B, err error) {
	b.Helper()
	if !errors.Is(err, ErrOpen) {
		b.Fatalf("got %v, want ErrOpen", err)
	}
}

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("closed/serial", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(ctx, benchOK)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("closed/parallel", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var bad atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if br.Do(ctx, benchOK) != nil {
					bad.Add(1)
				}
			}
		})
		if n := bad.Load(); n != 0 {
			b.Fatalf("%d calls failed on a closed breaker", n)
		}
	})
	// A caller's context is rarely Background: a server's request
	// context carries values of the router, the tracer and the logger.
	// The closed path must not pay for walking it.
	deep := benchDeepContext(5)
	b.Run("closed/ctx5/serial", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(deep, benchOK)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	// While some breaker of the process has a probe in flight, a closed
	// call looks for a probe mark in its context (see unmarked): what the
	// closed path costs then, with a context that has none, and with one
	// that belongs to that probe and must be unmarked.
	b.Run("closed/ctx5/probe-elsewhere/serial", func(b *testing.B) {
		br := benchClosed(b)
		_, done := benchProbe(b, context.Background())
		defer done(nil)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(deep, benchOK)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("closed/ctx5/inside-probe/serial", func(b *testing.B) {
		br := benchClosed(b)
		probe, done := benchProbe(b, deep)
		defer done(nil)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(probe, benchOK)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("throttling", benchThrottling) // throttle_test.go
	b.Run("open/serial", func(b *testing.B) {
		br := benchOpen(b)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(ctx, benchOK)
		}
		benchWantOpen(b, err)
	})
	b.Run("open/parallel", func(b *testing.B) {
		br := benchOpen(b)
		b.ReportAllocs()
		b.ResetTimer()
		var admitted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if br.Do(ctx, benchOK) == nil {
					admitted.Add(1)
				}
			}
		})
		if n := admitted.Load(); n != 0 {
			b.Fatalf("an open breaker admitted %d calls", n)
		}
	})
}

func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.Run("closed/serial", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		var v int
		var err error
		for i := 0; i < b.N; i++ {
			v, err = Call(ctx, br, fn)
		}
		if v != 1 || err != nil {
			b.Fatalf("got %d, %v", v, err)
		}
	})
}

func BenchmarkAllow(b *testing.B) {
	ctx := context.Background()
	b.Run("closed/serial", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, done, err := br.Allow(ctx)
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
}

// The floor is the least a breaker that keeps a time window can do per
// call: read the monotonic clock once and add to one shared counter. Do
// and the refusal path are judged against it. It uses its own start time
// rather than internal/timebase's so that it shares nothing with the breaker.
var (
	benchFloorStart = time.Now()
	benchFloorSum   atomic.Int64
)

func BenchmarkFloor(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			benchFloorSum.Add(int64(time.Since(benchFloorStart)))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				benchFloorSum.Add(int64(time.Since(benchFloorStart)))
			}
		})
	})
}

// benchMemoryBatch bounds how many breakers are alive at once, so that a
// long run does not grow the heap without limit.
const benchMemoryBatch = 10_000

// BenchmarkMemory reports what an idle breaker keeps on the heap: one
// breaker with DefaultPolicy that has served one call, as most breakers of
// a large Group are. An op is New plus that call, so ns/op, B/op and
// allocs/op are the cost of creating one; B/breaker is what stays live
// after a GC, measured by HeapAlloc over batches of benchMemoryBatch.
// timed_breaker is the same for a breaker that times its calls (a
// slow-call rule), which carries a latency histogram, in batches of a
// tenth as many.
func BenchmarkMemory(b *testing.B) {
	timed := DefaultPolicy()
	timed.SlowCall, timed.SlowRatio = time.Second, 1
	b.Run("idle_breaker", func(b *testing.B) { benchRetained(b, DefaultPolicy(), benchMemoryBatch) })
	b.Run("timed_breaker", func(b *testing.B) { benchRetained(b, timed, benchMemoryBatch/10) })
}

// benchRetained is BenchmarkMemory for breakers of policy p, at most
// size of them alive at once.
func benchRetained(b *testing.B, p Policy, size int) {
	ctx := context.Background()
	batch := make([]*Breaker, 0, min(b.N, size))
	var retained, counted int64
	var before, after runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, size)
		b.StopTimer()
		// Drop the previous batch: pointers left in the backing
		// array would keep it alive through the GC below.
		clear(batch)
		batch = batch[:0]
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := 0; i < n; i++ {
			br, err := New("orders.Create", p)
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Do(ctx, benchOK); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, br)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(batch)
		retained += int64(after.HeapAlloc) - int64(before.HeapAlloc)
		counted += int64(n)
		done += n
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(retained)/float64(counted), "B/breaker")
}

// benchNeverTrips returns a closed breaker whose window rules can never
// hold (MinRequests is out of reach), so that a benchmark can fail every
// call and stay closed. Every failure still runs the trip check on the
// window, as a failure that does not trip does in production.
func benchNeverTrips(b *testing.B) *Breaker {
	b.Helper()
	p := DefaultPolicy()
	p.MinRequests = 1 << 40
	br, err := New("bench.Failing", p)
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// benchTimeoutErr is an error of the net.Error kind that says it timed out.
type benchTimeoutErr struct{}

func (benchTimeoutErr) Error() string { return "bench: i/o timeout" }
func (benchTimeoutErr) Timeout() bool { return true }

// The errors of the failure path's outcomes, built once, as a program
// builds its sentinels: what is measured is the breaker's handling of
// them, not the caller's construction of a new error.
var (
	benchTimeoutFn  = func(context.Context) error { return benchTimeoutErr{} }
	benchDeadlineFn = func(context.Context) error { return context.DeadlineExceeded }
	benchIgnoredErr = Ignore(benchErr)
	benchIgnoredFn  = func(context.Context) error { return benchIgnoredErr }
	benchMarkedErr  = Mark(benchErr, Failure)
	benchMarkedFn   = func(context.Context) error { return benchMarkedErr }
	benchWrappedErr = fmt.Errorf("charge: %w", benchErr)
	benchWrappedFn  = func(context.Context) error { return benchWrappedErr }
)

// BenchmarkFailure is Do on the failure path: the breaker stays closed
// (see benchNeverTrips) and every call ends in the outcome named. At the
// onset of an outage every call takes this path at full rate.
func BenchmarkFailure(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"failure", benchFail},
		{"wrapped", benchWrappedFn},
		{"timeout", benchTimeoutFn},
		{"deadline", benchDeadlineFn},
		{"ignored", benchIgnoredFn},
		{"marked", benchMarkedFn},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			br := benchNeverTrips(b)
			b.ReportAllocs()
			b.ResetTimer()
			var err error
			for i := 0; i < b.N; i++ {
				err = br.Do(ctx, c.fn)
			}
			if err == nil {
				b.Fatal("the call did not fail")
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			br := benchNeverTrips(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = br.Do(ctx, c.fn)
				}
			})
			if s := br.State(); s != Closed {
				b.Fatalf("breaker is %v, want closed", s)
			}
		})
	}
}

// BenchmarkMixed is Do under steady partial failure: one call in ten
// fails, below DefaultPolicy's ErrorRatio, so the breaker stays closed and
// checks its trip rules on every tenth call. Compare with
// BenchmarkDo/closed, the same traffic without failures.
func BenchmarkMixed(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			fn := benchOK
			if i%10 == 9 {
				fn = benchFail
			}
			_ = br.Do(ctx, fn)
		}
		if s := br.State(); s != Closed {
			b.Fatalf("breaker is %v, want closed", s)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		br := benchClosed(b)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				fn := benchOK
				if i++; i%10 == 0 {
					fn = benchFail
				}
				_ = br.Do(ctx, fn)
			}
		})
		if s := br.State(); s != Closed {
			b.Fatalf("breaker is %v, want closed", s)
		}
	})
}

// benchHalfOpen returns a half-open breaker whose probe slots are all
// taken by calls that never end: every other call is refused. It gets
// there as production does after a forced open ends (released); the
// cooldown, and so the probe timeout, is a day, so no run leaves the
// state.
func benchHalfOpen(b *testing.B) *Breaker {
	b.Helper()
	p := DefaultPolicy()
	p.OpenFor = 24 * time.Hour
	p.MaxOpenFor = 24 * time.Hour
	br, err := New("bench.HalfOpen", p)
	if err != nil {
		b.Fatal(err)
	}
	br.SetMode(ModeForcedOpen)
	br.SetMode(ModeAuto)
	for i := 0; i < p.Probes; i++ {
		if _, _, err := br.Allow(context.Background()); err != nil {
			b.Fatalf("probe %d refused: %v", i, err)
		}
	}
	if s := br.State(); s != HalfOpen {
		b.Fatalf("breaker is %v, want half-open", s)
	}
	return br
}

// BenchmarkHalfOpen is the refusal of a half-open breaker whose probes are
// all in flight: at recovery every caller but the probes takes this path,
// and they race each other for it. Compare with BenchmarkDo/open, the
// refusal of an open breaker.
func BenchmarkHalfOpen(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		br := benchHalfOpen(b)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(ctx, benchOK)
		}
		benchWantOpen(b, err)
	})
	for _, par := range []int{1, 32} {
		name := "parallel"
		if par > 1 {
			// 32 per GOMAXPROCS: 64 goroutines at -cpu=2.
			name = "parallel_x32"
		}
		b.Run(name, func(b *testing.B) {
			br := benchHalfOpen(b)
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			var admitted atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if br.Do(ctx, benchOK) == nil {
						admitted.Add(1)
					}
				}
			})
			if n := admitted.Load(); n != 0 {
				b.Fatalf("a half-open breaker with every slot taken admitted %d calls", n)
			}
		})
	}
}

// BenchmarkFailureCost runs a failing Do and a successful one on two
// breakers that never trip, in alternating blocks so that both see the
// same machine. ns/op is the pair; fail/ok is the ratio of the failing
// call's cost to the successful one's.
func BenchmarkFailureCost(b *testing.B) {
	ctx := context.Background()
	ok, bad := benchNeverTrips(b), benchNeverTrips(b)
	const block = 256
	var tOK, tBad time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += block {
		m := min(block, b.N-n)
		t0 := time.Now()
		for i := 0; i < m; i++ {
			_ = ok.Do(ctx, benchOK)
		}
		t1 := time.Now()
		for i := 0; i < m; i++ {
			_ = bad.Do(ctx, benchFail)
		}
		tOK += t1.Sub(t0)
		tBad += time.Since(t1)
	}
	b.ReportMetric(float64(tBad)/float64(tOK), "fail/ok")
}
