package check

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/govkit/breaker"
)

// countTrips runs a healthy downstream through a breaker under p for span
// of simulated time: Poisson arrivals at rate, each call failing with
// probability q, and counts the breaker's trips. After a trip the breaker
// closes again at the next call (a 1 ms cooldown and one probe, which a
// failure passes), so the day is spent closed.
func countTrips(t *testing.T, p breaker.Policy, rate, q float64, span time.Duration, seed uint64) int {
	t.Helper()
	clk := &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	end := clk.now.Add(span)
	b, err := breaker.New("false-trips", p, breaker.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	trips := 0
	for {
		clk.now = clk.now.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !clk.now.Before(end) {
			return trips
		}
		_, done, err := b.Allow(context.Background())
		if err != nil {
			continue // the 1 ms cooldown
		}
		var outcome error
		if rng.Float64() < q {
			outcome = errInjected
		}
		before := b.State()
		done(outcome)
		if before == breaker.Closed && b.State() == breaker.Open {
			trips++
		}
	}
}

// TestAgreement_FalseTripsPerDay holds the false-trip model against a
// real breaker on simulated hours of healthy traffic, for each trip rule,
// at error ratios where trips are frequent enough to count. The model
// counts every failure that takes the window over the line, including a
// second crossing in the burst of failures that caused a trip (which the
// real breaker, its window emptied by the trip, does not see), so it errs
// high; it must be within a factor of two of the count, and never below
// it by more than the count's own noise.
func TestAgreement_FalseTripsPerDay(t *testing.T) {
	pol := func(mod func(*breaker.Policy)) breaker.Policy {
		p := breaker.DefaultPolicy()
		mod(&p)
		return p
	}
	for _, c := range []struct {
		name string
		p    breaker.Policy
		rate float64
		q    float64
	}{
		{"ratio/min10", pol(func(p *breaker.Policy) { p.MinRequests = 10 }), 4, 0.27},
		{"ratio/min20", pol(func(p *breaker.Policy) { p.MinRequests = 20 }), 6, 0.31},
		{"ratio/busy", pol(func(p *breaker.Policy) { p.ErrorRatio = 0.3 }), 40, 0.22},
		{"count", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ErrorCount = 0, 12 }), 20, 0.065},
		{"consecutive", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ConsecutiveFailures = 0, 5 }), 10, 0.3},
	} {
		t.Run(c.name, func(t *testing.T) {
			const span = 3 * time.Hour
			want := FalseTripsPerDay(c.p, Traffic{Rate: c.rate, ErrorRatio: c.q}) * span.Hours() / 24
			got := countTrips(t, c.p, c.rate, c.q, span, 7)
			noise := 3 * math.Sqrt(float64(got))
			t.Logf("in %v: model %.1f trips, breaker %d", span, want, got)
			if got < 30 {
				t.Fatalf("only %d trips: too few to compare; pick a higher error ratio", got)
			}
			if want < float64(got)-noise || want > 2*float64(got)+noise {
				t.Errorf("in %v the model expects %.1f false trips, the breaker tripped %d times", span, want, got)
			}
		})
	}
}
