package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/govkit/breaker"
)

// thousandKeys is a document of 1,000 keys with rates from 0.5 to 5,000
// calls per second, a tenth of them with an override.
func thousandKeys() (breaker.GroupPolicy, Workload) {
	gp := breaker.GroupPolicy{Default: breaker.DefaultPolicy(), Overrides: map[string]breaker.Policy{}}
	w := Workload{Keys: map[string]Traffic{}}
	for i := 0; i < 1000; i++ {
		key := fmt.Sprintf("svc%03d.Method%d", i/10, i%10)
		rate := 0.5 * float64(1+(i*7919)%10000)
		w.Keys[key] = Traffic{
			Rate: rate, P50: time.Duration(5+i%40) * time.Millisecond, P99: time.Duration(50+i%200) * time.Millisecond,
			ErrorRatio: float64(i%50) / 200, Deadline: time.Second, RTT: time.Millisecond, Instances: 1 + i%30,
			Targets: i % 3,
		}
		if i%10 == 0 {
			p := breaker.DefaultPolicy()
			p.MinRequests = 10 + i%90
			p.CallTimeout = time.Duration(100+i%400) * time.Millisecond
			gp.Overrides[key] = p
		}
	}
	return gp, w
}

// BenchmarkGroup/keys=1000 is the checker over a 1,000-key document; it
// must take well under a second. It times the formulas alone: the
// simulations are bounded by Options.SimCalls per estimate.
func BenchmarkGroup(b *testing.B) {
	gp, w := thousandKeys()
	b.Run("keys=1000", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := Group(gp, w, Options{SimCalls: -1}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSimulate/calls=1e6 is the simulator's cost: a million calls of
// the real breaker under the default policy at 1,000 calls/s and 48%
// errors, false trips and all. It reports calls a second.
func BenchmarkSimulate(b *testing.B) {
	b.Run("calls=1e6", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if _, _, _, err := simFalseTrips(breaker.DefaultPolicy(), Traffic{Rate: 1000, ErrorRatio: 0.48}, day, 1, 1_000_000); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(1e6/time.Since(start).Seconds(), "calls/s")
		}
	})
}
