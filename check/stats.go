package check

import (
	"math"
	"sort"
)

// z95 is the standard normal's 97.5th percentile: the intervals the
// checker prints are 95% intervals.
const z95 = 1.959963984540054

// poissonInterval is the 95% interval of the mean of a Poisson variable
// seen at n (Wilson and Hilferty's approximation of the exact interval,
// within a few percent of it from n = 1 on).
func poissonInterval(n int) (lo, hi float64) {
	if n > 0 {
		x := float64(n)
		lo = x * math.Pow(1-1/(9*x)-z95/(3*math.Sqrt(x)), 3)
	}
	x := float64(n + 1)
	hi = x * math.Pow(1-1/(9*x)+z95/(3*math.Sqrt(x)), 3)
	return max(lo, 0), hi
}

// sample is a sorted sample of times in seconds; +Inf stands for "not
// within the horizon".
type sample []float64

func newSample(xs []float64) sample {
	s := append(sample(nil), xs...)
	sort.Float64s(s)
	return s
}

// quantile is the q-quantile of the sample (the order statistic of rank
// ⌈qn⌉), and its 95% interval from the ranks of a binomial(n, q) around
// it.
func (s sample) quantile(q float64) (v, lo, hi float64) {
	n := len(s)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	at := func(rank int) float64 { return s[min(max(rank, 1), n)-1] }
	k := int(math.Ceil(q * float64(n)))
	sd := math.Sqrt(float64(n) * q * (1 - q))
	return at(k), at(int(math.Floor(q*float64(n) - z95*sd))), at(int(math.Ceil(q*float64(n)+z95*sd)) + 1)
}

// never is the share of the sample not within the horizon.
func (s sample) never() float64 {
	n := 0
	for _, x := range s {
		if math.IsInf(x, 1) {
			n++
		}
	}
	return float64(n) / float64(len(s))
}

// mean is the sample's mean over the finite values.
func (s sample) mean() float64 {
	var sum float64
	n := 0
	for _, x := range s {
		if !math.IsInf(x, 1) {
			sum += x
			n++
		}
	}
	return sum / float64(n)
}
