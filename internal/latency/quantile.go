package latency

import (
	"math"
	"time"
)

// QuantileBins sets bins[j] to the bin of the qs[j] quantile (qs
// ascending) of h, which holds n calls, measured and censored, or to -1
// where it is unknown.
//
// The estimate is the product-limit (Kaplan-Meier) one. A censored call
// is among the calls still running up to its bin; from there its share of
// the distribution passes in equal parts to the calls still running after
// it. Within a bin, measured calls end before censored ones. With nothing
// censored below it, the q quantile is the bin of the ceil(q·n)-th
// smallest call. It is unknown when the measured calls, with the shares
// passed to them, never reach q: more than 1-q of the distribution lies
// beyond the longest call measured, as when every call is cut.
func QuantileBins(h *Hist, n uint64, qs []float64, bins []int) {
	j := 0
	if n > 0 {
		running := n   // the calls not yet ended or censored
		share := 1.0   // the share of one running call, in calls
		reached := 0.0 // n × the distribution at the end of bin i
		for i := 0; i < Bins && j < len(qs); i++ {
			done, cut := uint64(h[2*i]), uint64(h[2*i+1])
			if done > 0 {
				reached += float64(done) * share
				// reached is an integer while nothing is censored, and
				// this is then reached >= rank; the margin absorbs the
				// rounding of the products once a share has grown.
				for j < len(qs) && reached >= float64(Rank(qs[j], n))*(1-1e-12) {
					bins[j] = i
					j++
				}
			}
			running -= min(done, running)
			if cut > 0 && running > cut {
				share *= float64(running) / float64(running-cut)
			}
			running -= min(cut, running)
		}
	}
	for ; j < len(qs); j++ {
		bins[j] = -1
	}
}

// Quantiles sets out[j] to the qs[j] quantile of h (at most 4, qs
// ascending), which holds n calls, measured and censored: the value of its
// bin ([BinValue]), or 0 where it is unknown.
func Quantiles(h *Hist, n uint64, qs []float64, out []time.Duration) {
	var bins [4]int
	QuantileBins(h, n, qs, bins[:len(qs)])
	for j, i := range bins[:len(qs)] {
		out[j] = 0
		if i >= 0 {
			out[j] = BinValue(i)
		}
	}
}

// Rank is the rank of the q quantile among count values: ceil(q·count),
// at least 1.
func Rank(q float64, count uint64) uint64 {
	r := uint64(math.Ceil(q * float64(count)))
	return max(r, 1)
}
