package benchmarks

import (
	"testing"
)

// neverTrips is a sample size no benchmark reaches: a breaker built with
// it fails every call of BenchmarkFailure and stays closed, checking its
// trip rule after each failure as at the onset of an outage.
const neverTrips = 1 << 30

// peer is one breaker of each library, as two calls: one whose function
// succeeds and one whose function fails. The calls are closures, which
// costs every library the same indirect call.
type peer struct {
	name     string
	ok, fail func() error
}

// peers returns a closed breaker of each library built with sample (see
// the constructors), and the floor.
func peers(tb testing.TB, sample int) []peer {
	gv := newGovkitSample(tb, false, sample)
	gb := newGobreakerSample(tb, false, sample)
	fs := newFailsafeSample(tb, false, sample)
	mc := newMercariSample(tb, false, sample)
	cp := newCep21Sample(tb, false, sample)
	return []peer{
		{"govkit", func() error { return gv.Do(ctx, govkitOK) }, func() error { return gv.Do(ctx, govkitFail) }},
		{"gobreaker", func() error { _, err := gb.Execute(gobreakerOK); return err }, func() error { _, err := gb.Execute(gobreakerFail); return err }},
		{"failsafe", func() error { return fs.exec.Run(failsafeOK) }, func() error { return fs.exec.Run(failsafeFail) }},
		{"mercari", func() error { _, err := mc.Do(ctx, mercariOK); return err }, func() error { _, err := mc.Do(ctx, mercariFail); return err }},
		{"cep21", func() error { return cp.Execute(ctx, cep21OK, nil) }, func() error { return cp.Execute(ctx, cep21Fail, nil) }},
	}
}

// BenchmarkFailure is the cost of a failing call on a closed breaker that
// does not trip (its sample size is out of reach): at the onset of an
// outage every call takes this path at full rate. Each call must return
// the downstream's error, never a refusal.
func BenchmarkFailure(b *testing.B) {
	for _, p := range peers(b, neverTrips) {
		b.Run(p.name, func(b *testing.B) {
			b.Run("serial", func(b *testing.B) {
				var bad counter
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if p.fail() != errFail {
						bad.n.Add(1)
					}
				}
				bad.check(b, "did not return the downstream's error")
			})
			b.Run("parallel", func(b *testing.B) {
				var bad counter
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if p.fail() != errFail {
							bad.n.Add(1)
						}
					}
				})
				bad.check(b, "did not return the downstream's error")
			})
		})
	}
	b.Run("floor", benchFloor)
}

// BenchmarkMixed is steady partial failure: one call in ten fails, below
// every breaker's trip ratio, with the usual sample size, so each stays
// closed and checks its trip rule on every tenth call.
func BenchmarkMixed(b *testing.B) {
	for _, p := range peers(b, minRequests) {
		b.Run(p.name, func(b *testing.B) {
			b.Run("serial", func(b *testing.B) {
				var bad counter
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					call, want := p.ok, error(nil)
					if i%10 == 9 {
						call, want = p.fail, errFail
					}
					if call() != want {
						bad.n.Add(1)
					}
				}
				bad.check(b, "were refused or changed")
			})
			b.Run("parallel", func(b *testing.B) {
				var bad counter
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						call, want := p.ok, error(nil)
						if i++; i%10 == 0 {
							call, want = p.fail, errFail
						}
						if call() != want {
							bad.n.Add(1)
						}
					}
				})
				bad.check(b, "were refused or changed")
			})
		})
	}
	b.Run("floor", benchFloor)
}
