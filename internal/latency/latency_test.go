package latency

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// relErr is the bound on a quantile's relative error for durations of at
// least 32 units (32.8 µs): half a bin of 1/16 of its lower bound, seen
// from the bin's best point.
const relErr = 1.0 / 33

// statusQuantiles are the quantiles a breaker's Status reports.
var statusQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

func newHistogram(width, buckets int64) *Histogram {
	h := &Histogram{}
	h.Init(width, buckets, Totals{})
	return h
}

// TestBin_ErrorAndOrder: bins are ordered like the durations they
// hold, they tile the range without gaps, and the value a bin reports is
// within relErr of every duration in it from 32 units up.
func TestBin_ErrorAndOrder(t *testing.T) {
	prev := 0
	for u := uint64(0); u <= maxUnits; u += 1 + u/97 {
		ns := int64(u << unitShift)
		i := Bin(ns)
		require.GreaterOrEqual(t, i, prev, "bin of %v", time.Duration(ns))
		require.LessOrEqual(t, i-prev, 1, "bins skipped at %v", time.Duration(ns))
		prev = i
		if u >= linear {
			got := float64(BinValue(i))
			assert.InEpsilon(t, float64(ns), got, relErr+1e-9, "bin %d for %v", i, time.Duration(ns))
		}
	}
	assert.Equal(t, Bins-1, prev, "the last duration in range is in the last bin")
	assert.Equal(t, Bins-1, Bin(int64(time.Hour)), "longer calls count in the last bin")
	assert.Equal(t, 0, Bin(0))
	assert.Less(t, BinValue(0), time.Microsecond)
}

// TestQuantiles_AgainstExact: the histogram's quantiles of a
// lognormal sample are within relErr of the exact quantiles (the
// ceil(q·n)-th smallest value), for the quantiles a breaker's Status reports.
func TestQuantiles_AgainstExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, median := range []time.Duration{200 * time.Microsecond, 15 * time.Millisecond, 2 * time.Second} {
		l := newHistogram(int64(500*time.Millisecond), 10)
		var xs []int64
		for range 20000 {
			d := int64(float64(median) * math.Exp(0.8*rng.NormFloat64()))
			d = max(d, 40*time.Microsecond.Nanoseconds())
			xs = append(xs, d)
			l.Add(0, d, false)
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		var h Hist
		n, censored := l.Window(0, &h)
		require.Equal(t, uint64(len(xs)), n)
		require.Zero(t, censored)
		got := make([]time.Duration, len(statusQuantiles))
		Quantiles(&h, n, statusQuantiles, got)
		for j, q := range statusQuantiles {
			want := xs[Rank(q, n)-1]
			assert.InEpsilon(t, float64(want), float64(got[j]), relErr+1e-9, "median %v, q %v", median, q)
		}
	}
}

// TestQuantiles_ProductLimit: with calls censored, the quantiles
// are the product-limit (Kaplan-Meier) estimates over the bins, the
// measured calls of a bin ending before its censored ones; a quantile
// the measured calls never reach is unknown.
func TestQuantiles_ProductLimit(t *testing.T) {
	type call struct {
		d   time.Duration
		cut bool
	}
	hist := func(calls []call) (*Hist, uint64) {
		var h Hist
		for _, c := range calls {
			h[Cell(int64(c.d), c.cut)]++
		}
		return &h, uint64(len(calls))
	}
	quantiles := func(calls []call, qs ...float64) []int {
		h, n := hist(calls)
		bins := make([]int, len(qs))
		QuantileBins(h, n, qs, bins)
		return bins
	}
	ms := time.Millisecond
	// 4 calls of 10 ms, 3 cut at 20 ms, 2 of 30 ms, 1 of 40 ms. Survival:
	// 0.6 after 10 ms; the 3 cut leave 3 running; 0.6 × 1/3 = 0.2 after
	// 30 ms; 0 after 40 ms. Leaving the cut calls out would put the
	// median at 10 ms.
	var calls []call
	for _, c := range []struct {
		n   int
		d   time.Duration
		cut bool
	}{{4, 10 * ms, false}, {3, 20 * ms, true}, {2, 30 * ms, false}, {1, 40 * ms, false}} {
		for range c.n {
			calls = append(calls, call{c.d, c.cut})
		}
	}
	b10, b30, b40 := Bin(int64(10*ms)), Bin(int64(30*ms)), Bin(int64(40*ms))
	assert.Equal(t, []int{b10, b30, b30, b40}, quantiles(calls, 0.4, 0.5, 0.8, 0.81))

	// Half measured at 10 ms, half cut at 20 ms: the median is known, any
	// quantile above it is not. Every call cut: nothing is known.
	calls = calls[:0]
	for i := range 10 {
		calls = append(calls, call{10 * ms << (i % 2), i%2 == 1})
	}
	assert.Equal(t, []int{b10, -1, -1}, quantiles(calls, 0.5, 0.51, 0.99))
	assert.Equal(t, []int{-1}, quantiles([]call{{20 * ms, true}, {30 * ms, true}}, 0.5))
	assert.Equal(t, []int{-1}, quantiles(nil, 0.5))

	// Measured and censored in one bin: the measured end first.
	same := []call{{10 * ms, false}, {10 * ms, true}, {10 * ms, true}, {40 * ms, false}}
	assert.Equal(t, []int{b10, b40}, quantiles(same, 0.25, 0.26))

	// Random calls, some censored, against the product form of the
	// estimate: S after bin i = S before × (1 - measured_i / running_i).
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		calls = calls[:0]
		for range 1 + rng.IntN(300) {
			d := time.Duration(float64(5*ms) * math.Exp(0.7*rng.NormFloat64()))
			calls = append(calls, call{d, rng.IntN(4) == 0})
		}
		h, n := hist(calls)
		qs := []float64{0.1, 0.5, 0.9, 0.99}
		want := []int{-1, -1, -1, -1}
		surv, running, j := 1.0, float64(n), 0
		for i := 0; i < Bins && j < len(qs); i++ {
			done, cut := float64(h[2*i]), float64(h[2*i+1])
			if done > 0 {
				surv *= 1 - done/running
			}
			for j < len(qs) && done > 0 && 1-surv >= float64(Rank(qs[j], n))/float64(n)-1e-9 {
				want[j] = i
				j++
			}
			running -= done + cut
		}
		got := make([]int, len(qs))
		QuantileBins(h, n, qs, got)
		require.Equal(t, want, got, "trial %d: %d calls", trial, n)
	}
}

// TestHistogram_ConcurrentRecordingAndReading: recording from many
// goroutines while others read, across bucket boundaries, loses no call
// and never shows a window with more calls than were made.
func TestHistogram_ConcurrentRecordingAndReading(t *testing.T) {
	l := newHistogram(int64(time.Millisecond), 100)
	const writers, each = 4, 5000
	var made sync.WaitGroup
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var clk struct {
		sync.Mutex
		t int64
	}
	tick := func() int64 {
		clk.Lock()
		defer clk.Unlock()
		clk.t += int64(time.Microsecond) * 7
		return clk.t
	}
	for w := range writers {
		made.Add(1)
		go func() {
			defer made.Done()
			for i := range each {
				l.Add(tick(), int64(i%200)*int64(time.Millisecond), (i+w)%5 == 0)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var h Hist
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, c := l.Window(tick(), &h)
			if n+c > writers*each {
				t.Errorf("window holds %d+%d calls, more than the %d made", n, c, writers*each)
				return
			}
		}
	}()
	made.Wait()
	close(stop)
	wg.Wait()
	tot := l.Totals()
	assert.Equal(t, uint64(writers*each), tot.Count+tot.Censored)
	assert.Equal(t, uint64(writers*each/5), tot.Censored)
}
