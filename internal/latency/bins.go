// Package latency is the histogram of a timed breaker's call durations
// over its sliding window, and the censoring-aware quantiles read from it.
//
// Durations are counted in log-linear bins of units of 2^10 ns
// (1.024 µs): below 32 units every unit has its bin; above, every power of
// two is split into 16 bins of equal width. The value a quantile reports
// for a bin is within 1/33 (3.1%) of any duration in it from 16 units
// (16.4 µs) up, and within half a unit below. 384 bins cover 0 to 2^37 ns
// (137 s); longer durations count in the last bin.
//
// Every bin has two counts: the calls measured there and the calls
// censored there, those cut short (timeouts), which lasted at least the
// duration of their bin. Quantiles are product-limit (Kaplan-Meier)
// estimates over both (see [QuantileBins]).
package latency

import (
	"math"
	"math/bits"
	"time"
)

const (
	unitShift = 10                            // a unit is 2^10 ns
	subBits   = 4                             // 16 bins a power of two
	sub       = 1 << subBits                  //
	topBits   = 27                            // durations below 2^27 units have a bin of their own
	maxUnits  = 1<<topBits - 1                // the last bin's top: 2^37 ns
	linear    = 2 * sub                       // units below this have a bin each
	Bins      = (topBits - subBits + 1) * sub // 384: the last is bin 22·16+31
	Cells     = 2 * Bins                      // a measured and a censored count a bin (see Cell)
	never     = math.MinInt64                 // Histogram.headEnd before the first call
)

// Bin returns the bin of a duration of ns nanoseconds (ns >= 0).
func Bin(ns int64) int {
	u := uint64(ns) >> unitShift
	if u < linear {
		return int(u)
	}
	if u > maxUnits {
		return Bins - 1
	}
	shift := bits.Len64(u) - subBits - 1
	return shift*sub + int(u>>shift)
}

// Cell returns the cell that counts a call of ns nanoseconds (ns >= 0):
// 2·bin for a measured call, 2·bin+1 for a censored one.
func Cell(ns int64, censored bool) int {
	c := 2 * Bin(ns)
	if censored {
		c++
	}
	return c
}

// binBounds returns the durations bin i holds, [lo, hi), in ns.
func binBounds(i int) (lo, hi float64) {
	l, width := uint64(i), uint64(1)
	if i >= linear {
		shift := i/sub - 1
		l, width = uint64(i-shift*sub)<<shift, 1<<shift
	}
	return float64(l << unitShift), float64((l + width) << unitShift)
}

// BinValue is the duration a quantile that falls in bin i reports: the
// point p of [lo, hi) where (p-lo)/lo = (hi-p)/hi, the one whose worst
// relative error over the bin is least.
func BinValue(i int) time.Duration {
	l, h := binBounds(i)
	if l == 0 {
		return time.Duration(h / 2)
	}
	return time.Duration(2 * l * h / (l + h))
}

// BinTop is the top of bin i: above every duration it holds, and at most
// 1/16 above any of them from 16 units up.
func BinTop(i int) time.Duration {
	_, h := binBounds(i)
	return time.Duration(h)
}
