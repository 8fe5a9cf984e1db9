package replay

import (
	"testing"
)

// BenchmarkRun measures the simulation's speed in simulated requests (a
// request at any tier) per second of wall time.
func BenchmarkRun(b *testing.B) {
	s, err := LoadScenario(DefaultScenario)
	if err != nil {
		b.Fatal(err)
	}
	// One run alone, on one goroutine: the engine's own speed.
	b.Run("one-run", func(b *testing.B) {
		spec := s.specs()[WithBreaker]
		b.ReportAllocs()
		var requests int64
		for i := 0; i < b.N; i++ {
			sm, err := newSim(s, spec)
			if err != nil {
				b.Fatal(err)
			}
			requests += sm.run().Requests
		}
		b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "sim-req/s")
	})
	// The whole replay, as the command runs it: every run, in parallel.
	b.Run("seeds000", func(b *testing.B) {
		b.ReportAllocs()
		var requests int64
		for i := 0; i < b.N; i++ {
			rep, err := Run(s)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rep.Runs {
				requests += r.Requests
			}
		}
		b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "sim-req/s")
	})
}
