package replay

import (
	"math"
	"math/rand/v2"
)

// sampler draws service times.
type sampler struct {
	dist      Dist
	mean      float64
	mu, sigma float64
}

func newSampler(sv Service) sampler {
	sm := sampler{dist: sv.Dist, mean: float64(sv.Mean)}
	if sv.Dist == Lognormal {
		p99 := sv.P99
		if p99 == 0 {
			p99 = 3 * sv.Mean
		}
		// For a lognormal, mean = e^(mu+sigma²/2) and p99 = e^(mu+z·sigma):
		// the smaller root of sigma²/2 - z·sigma + ln(p99/mean) = 0.
		r := math.Log(float64(p99) / float64(sv.Mean))
		sm.sigma = z99 - math.Sqrt(max(0, z99*z99-2*r))
		sm.mu = math.Log(float64(sv.Mean)) - sm.sigma*sm.sigma/2
	}
	return sm
}

func (sm sampler) draw(r *rand.Rand) int64 {
	var d float64
	switch sm.dist {
	case Constant:
		d = sm.mean
	case Lognormal:
		d = math.Exp(sm.mu + sm.sigma*r.NormFloat64())
	default:
		d = r.ExpFloat64() * sm.mean
	}
	return int64(min(max(d, 1), float64(MaxLatency)))
}
