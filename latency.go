package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// A timed breaker's latency: a histogram of its calls' durations over the
// window, and the adaptive timeout computed from it.
//
// The histogram has log-linear bins: durations are counted in units of
// 2^10 ns (1.024 µs); below 32 units every unit has its bin, and above,
// every power of two is split into 16 bins of equal width. A bin is then
// at most 1/16 of its lower bound wide, and the value a quantile reports
// for it (the point nearest, relatively, to both its ends) is within
// 1/33 (3.1%) of any duration in it from 16 units (16.4 µs) up; below,
// within half a unit. 384 bins cover 0 to 2^37 ns (137 s); longer calls
// count in the last bin.
//
// It rolls with the window the way the window does (see window.go): one
// set of cumulative counters, one atomic add per call, and a ring of
// slots, one per bucket of the window's width, each holding a snapshot of
// the counters taken before its bucket's first call. The histogram of the
// window is the counters minus the snapshot of the oldest bucket still in
// it. A slot is 3 KiB, so the gap before a call is not written into the
// slots of the empty buckets, as the window does with its 24-byte slots:
// the reader instead walks from the oldest bucket to the first that has a
// slot. Reading is rare (a recompute every AdaptiveInterval, a Status, a
// scrape) and costs a pass over the bins anyway; a walk of at most
// Buckets epochs adds little to it.
//
// The histogram has its own head, on the same grid of buckets as the
// window, rather than riding on the window's: the call path loads one
// more word, and neither structure needs to know of the other.
//
// Only a timed breaker has one (Policy.Timeout, SlowCall or
// AdaptiveTimeout): an untimed breaker's closed path never reads the
// clock twice and never reaches this file. The histogram, 6 KiB of
// counters and 3 KiB a bucket, hangs off the breaker's own copy of its
// rules (see rules.own), made when the breaker is created or given timed
// rules.
//
// Every bin has two counts: the calls measured there, and the calls
// censored there, timeouts, which lasted at least the duration their bin
// holds (the deadline that cut them, usually) and whose end is unknown.
// Quantiles are product-limit (Kaplan-Meier) estimates over both (see
// latQuantileBins), so the calls a deadline cuts still weigh on the
// quantile the deadline is computed from: a steady latency keeps a steady
// deadline, and when every call hangs the quantile is unknown and the
// deadline stays where it was.

const (
	latUnitShift = 10                                     // a unit is 2^10 ns
	latSubBits   = 4                                      // 16 bins a power of two
	latSub       = 1 << latSubBits                        //
	latTopBits   = 27                                     // durations below 2^27 units have a bin of their own
	latMaxUnits  = 1<<latTopBits - 1                      // the last bin's top: 2^37 ns
	latBins      = (latTopBits - latSubBits + 1) * latSub // 384: the last is bin 22·16+31 (latBin)
	latCells     = 2 * latBins                            // a measured and a censored count a bin (latCell)
	latLinear    = 2 * latSub                             // units below this have a bin each
	latNever     = math.MinInt64                          // headEnd before the first call
)

// latBin returns the bin of a duration of ns nanoseconds (ns >= 0).
func latBin(ns int64) int {
	u := uint64(ns) >> latUnitShift
	if u < latLinear {
		return int(u)
	}
	if u > latMaxUnits {
		return latBins - 1
	}
	shift := bits.Len64(u) - latSubBits - 1
	return shift*latSub + int(u>>shift)
}

// latCell returns the cell that counts a call of ns nanoseconds (ns >= 0)
// that ended with outcome o: 2·bin for a measured call, 2·bin+1 for a
// censored one (a timeout).
func latCell(ns int64, o Outcome) int {
	c := 2 * latBin(ns)
	if o == Timeout {
		c++
	}
	return c
}

// latBinBounds returns the durations bin i holds, [lo, hi), in ns.
func latBinBounds(i int) (lo, hi float64) {
	l, width := uint64(i), uint64(1)
	if i >= latLinear {
		shift := i/latSub - 1
		l, width = uint64(i-shift*latSub)<<shift, 1<<shift
	}
	return float64(l << latUnitShift), float64((l + width) << latUnitShift)
}

// latBinValue is the duration a quantile that falls in bin i reports:
// the point p of [lo, hi) where (p-lo)/lo = (hi-p)/hi, the one whose
// worst relative error over the bin is least.
func latBinValue(i int) time.Duration {
	l, h := latBinBounds(i)
	if l == 0 {
		return time.Duration(h / 2)
	}
	return time.Duration(2 * l * h / (l + h))
}

// latBinTop is the top of bin i, above every duration it holds, and at
// most 1/16 above any of them from 16 units up.
func latBinTop(i int) time.Duration {
	_, h := latBinBounds(i)
	return time.Duration(h)
}

// latHist is a histogram of the window: cell 2i counts the calls measured
// in bin i, cell 2i+1 those censored in it.
type latHist [latCells]uint32

// latSlot is one bucket of the histogram's ring: its index and the
// counters at its start, modulo 2^32 (exact while a window holds fewer
// than four billion calls, as the window's slots are).
type latSlot struct {
	epoch atomic.Int64
	cells [latCells]atomic.Uint32
}

// latency is a timed breaker's histogram and adaptive timeout. All
// methods are safe for concurrent use; recording never blocks.
type latency struct {
	// Read on every call, written at most once a bucket: kept off the
	// lines of the counters, which are written at full rate.
	width, last, n int64 // the window's bucket width (ns), last index, count
	slots          []latSlot
	// headEnd is the end of the newest bucket with a call.
	headEnd atomic.Int64
	// timeout is the adaptive timeout in force, ns; 0 until it first
	// adapts. next is when it is next recomputed, on the breaker's time.
	timeout atomic.Int64
	next    atomic.Int64
	_       [64]byte

	cells [latCells]atomic.Uint64
	// base is what the breaker's earlier histograms counted: totals
	// continues from it.
	base latTotals
}

// latTotals are a histogram's counters since the breaker began timing
// calls: calls measured, calls censored, and the sum of the measured
// durations.
type latTotals struct {
	count, censored uint64
	sum             time.Duration
}

func newLatency(now int64, r *rules, timeout int64) *latency {
	l := &latency{width: r.width, last: math.MaxInt64/r.width - 1, n: r.buckets, slots: make([]latSlot, r.buckets)}
	l.headEnd.Store(latNever)
	for i := range l.slots {
		l.slots[i].epoch.Store(slotEmpty)
	}
	l.timeout.Store(timeout)
	l.next.Store(addSat(now, int64(AdaptiveInterval)))
	return l
}

func (l *latency) bucket(now int64) int64 { return min(floorDiv(now, l.width), l.last) }

// add records a call that ended at now after elapsed ns with outcome o
// (not Ignored): measured, or censored at elapsed if o is Timeout.
func (l *latency) add(now, elapsed int64, o Outcome) {
	if now >= l.headEnd.Load() {
		l.advance(now)
	}
	l.cells[latCell(elapsed, o)].Add(1)
}

// advance makes the bucket holding now the newest and writes its slot.
// The snapshot is taken before the bucket is published, as in
// window.advance, so every add made by a writer that sees the new bucket
// is inside it.
func (l *latency) advance(now int64) {
	idx := l.bucket(now)
	end := (idx + 1) * l.width
	var snap latHist
	for {
		he := l.headEnd.Load()
		if now < he || end <= he {
			return
		}
		for i := range snap {
			snap[i] = uint32(l.cells[i].Load())
		}
		if l.headEnd.CompareAndSwap(he, end) {
			l.slots[floorMod(idx, l.n)].write(idx, &snap)
			return
		}
	}
}

// write makes s the slot of bucket idx, unless a newer bucket owns it.
func (s *latSlot) write(idx int64, snap *latHist) {
	for {
		e := s.epoch.Load()
		if e == slotBusy {
			runtime.Gosched()
			continue
		}
		if e >= idx {
			return
		}
		if s.epoch.CompareAndSwap(e, slotBusy) {
			break
		}
	}
	for i := range snap {
		s.cells[i].Store(snap[i])
	}
	s.epoch.Store(idx)
}

// window fills h with the histogram of the window at now and returns the
// calls measured and the calls censored in it.
//
// A bucket whose slot is still being written by the call that opened it
// looks empty to the walk, which then starts from a later one: the calls
// of that bucket are missing from this one reading. Only a writer
// descheduled between publishing a bucket and writing its slot, while the
// window moves past another bucket, can cause it.
func (l *latency) window(now int64, h *latHist) (count, censored uint64) {
	for {
		he := l.headEnd.Load()
		if he == latNever {
			return 0, 0
		}
		head := he/l.width - 1
		oldest := max(l.bucket(now), head) - l.n + 1
		if oldest > head {
			return 0, 0 // the newest call has left the window
		}
		found, moved := false, false
		for i := oldest; i <= head && !found && !moved; i++ {
			s := &l.slots[floorMod(i, l.n)]
			e := s.epoch.Load()
			switch {
			case e == slotBusy:
				runtime.Gosched()
				i-- // read it again
			case e > head:
				moved = true
			case e == i:
				for k := range h {
					h[k] = s.cells[k].Load()
				}
				if s.epoch.Load() != e {
					moved = true
				} else {
					found = true
				}
			}
		}
		if !found {
			// The window moved on, or the head's slot is a few stores
			// away from being written: read it anew.
			runtime.Gosched()
			continue
		}
		// Counters are read after the snapshot: never behind it.
		for k := 0; k < latCells; k += 2 {
			h[k] = uint32(l.cells[k].Load()) - h[k]
			h[k+1] = uint32(l.cells[k+1].Load()) - h[k+1]
			count += uint64(h[k])
			censored += uint64(h[k+1])
		}
		return count, censored
	}
}

// totals returns the counters since the breaker began timing calls,
// through every histogram it has had: calls measured, calls censored, and
// the sum of the measured calls' durations estimated from their bins
// (within 3.1%).
func (l *latency) totals() latTotals {
	t := l.base
	s := float64(t.sum)
	for i := 0; i < latBins; i++ {
		t.censored += l.cells[2*i+1].Load()
		if c := l.cells[2*i].Load(); c > 0 {
			t.count += c
			s += float64(c) * float64(latBinValue(i))
		}
	}
	t.sum = time.Duration(min(s, math.MaxInt64))
	return t
}

// latQuantileBins sets bins[j] to the bin of the qs[j] quantile (qs
// ascending) of the latency h estimates, or to -1 where it is unknown. n
// is the number of calls in h, measured and censored.
//
// The estimate is the product-limit (Kaplan-Meier) one. A censored call
// lasted at least the durations of its bin: it is among the calls still
// running up to its bin, and from there its share of the distribution
// passes to the calls still running after it, in equal parts. Within a
// bin, the measured calls end before the censored ones. With nothing
// censored below it, the q quantile is the bin of the ceil(q·n)-th
// smallest call, as a sorted list gives it. It is unknown when the
// calls measured, with the shares passed to them, never reach q: more
// than 1-q of the distribution lies beyond the longest call measured,
// as when every call is cut.
func latQuantileBins(h *latHist, n uint64, qs []float64, bins []int) {
	j := 0
	if n > 0 {
		running := n   // the calls not yet ended or censored
		share := 1.0   // the share of one running call, in calls
		reached := 0.0 // n × the distribution at the end of bin i
		for i := 0; i < latBins && j < len(qs); i++ {
			done, cut := uint64(h[2*i]), uint64(h[2*i+1])
			if done > 0 {
				reached += float64(done) * share
				// The rank is an integer, and so is reached while
				// nothing is censored: then this is reached >= rank.
				// Otherwise the margin absorbs the products' rounding.
				for j < len(qs) && reached >= float64(latRank(qs[j], n))*(1-1e-12) {
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

// latQuantiles sets out[j] to the qs[j] quantile of h (at most 4, qs
// ascending), which holds n calls, measured and censored: the value of its
// bin (latBinValue), or 0 where it is unknown.
func latQuantiles(h *latHist, n uint64, qs []float64, out []time.Duration) {
	var bins [4]int
	latQuantileBins(h, n, qs, bins[:len(qs)])
	for j, i := range bins[:len(qs)] {
		out[j] = 0
		if i >= 0 {
			out[j] = latBinValue(i)
		}
	}
}

// latRank is the rank of the q quantile among count values: ceil(q·count),
// at least 1.
func latRank(q float64, count uint64) uint64 {
	r := uint64(math.Ceil(q * float64(count)))
	return max(r, 1)
}

// Latency is what a timed breaker knows of its calls' latency: its
// quantiles over the window, estimated from the calls that returned and
// from those cut short, and the deadline it gives calls. Durations are
// measured on the breaker's clock, from admission to the result, and
// reported to within 3.1% (see the README's "Latency and timeouts"). A
// breaker that does not time its calls (no Policy.Timeout, SlowCall or
// AdaptiveTimeout) has none.
//
// In JSON, durations are integer nanoseconds in keys ending in _ns, like
// the other elapsed times of [Status].
type Latency struct {
	// Samples is the number of calls in the window whose latency was
	// measured: the closed-state calls that returned, successes and
	// failures alike.
	Samples uint64 `json:"samples"`
	// Censored is the number of calls in the window that ended as
	// timeouts. Their latency is unknown, only that it was at least what
	// they lasted (the deadline that cut them, usually), and the
	// quantiles count them as that: censored.
	Censored uint64 `json:"censored"`
	// P50, P90, P99 and P999 are the quantiles of the latency over the
	// window, estimated from the Samples and the Censored calls; 0 when
	// unknown: when the window holds no call, or when more than 1-q of
	// the latency lies beyond the longest call measured (as when every
	// call is cut).
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	// Timeout is the deadline the breaker gives a call now:
	// Policy.Timeout, or the adaptive timeout in force; 0 for none.
	Timeout time.Duration `json:"timeout_ns"`
	// SamplesTotal, CensoredTotal and SumTotal count since the breaker
	// began timing calls, for exporters that want monotonic counts: calls
	// measured, calls censored, and the sum of the measured latencies,
	// estimated from the histogram's bins. They never go down: a new
	// histogram (a change of Window or Buckets) and a spell without one
	// (a policy that times nothing) continue them.
	SamplesTotal  uint64        `json:"samples_total"`
	CensoredTotal uint64        `json:"censored_total"`
	SumTotal      time.Duration `json:"sum_total_ns"`
}

// latencyQuantiles are the quantiles Latency reports.
var latencyQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// Latency returns the breaker's latency over its window and the deadline
// in force. ok is false for a breaker that does not time its calls.
func (b *Breaker) Latency() (lat Latency, ok bool) {
	r := b.rules.Load()
	if r.lat == nil {
		return Latency{}, false // untimed
	}
	lat.Timeout = time.Duration(b.deadline(r))
	l := r.lat
	var h latHist
	lat.Samples, lat.Censored = l.window(b.opt.tb.now(), &h)
	var q [4]time.Duration
	latQuantiles(&h, lat.Samples+lat.Censored, latencyQuantiles, q[:])
	lat.P50, lat.P90, lat.P99, lat.P999 = q[0], q[1], q[2], q[3]
	t := l.totals()
	lat.SamplesTotal, lat.CensoredTotal, lat.SumTotal = t.count, t.censored, t.sum
	return lat, true
}

// Timeout returns the deadline the breaker adds to a call's context now:
// Policy.Timeout, or under Policy.AdaptiveTimeout the value in force; 0
// when it adds none. A caller's own earlier deadline still wins.
func (b *Breaker) Timeout() time.Duration { return time.Duration(b.deadline(b.rules.Load())) }

// deadline is the deadline a call admitted under r gets, ns, or 0.
func (b *Breaker) deadline(r *rules) int64 {
	if !r.adaptive {
		return r.timeout
	}
	var cur int64
	if r.lat != nil {
		cur = r.lat.timeout.Load()
	}
	return adaptiveDeadline(r, cur)
}

// adaptiveDeadline is the deadline under r's adaptive timeout when the
// breaker's last computed value is cur (0: none yet): cur, or where r
// starts, kept within r's bounds, which may have changed since cur was
// computed.
func adaptiveDeadline(r *rules, cur int64) int64 {
	p := &r.p
	if cur <= 0 {
		cur = int64(p.Timeout)
		if cur <= 0 {
			cur = int64(p.TimeoutMax)
		}
	}
	return min(max(cur, int64(p.TimeoutMin)), int64(p.TimeoutMax))
}

// measure records a closed-state call that ended at now after elapsed ns
// (-1: not timed) with outcome o in the histogram of the rules r in force
// now, if they time calls, and recomputes the adaptive timeout when it is
// due.
func (b *Breaker) measure(now, elapsed int64, o Outcome, r *rules) {
	l := r.lat
	if l == nil || elapsed < 0 || o == Ignored {
		return
	}
	l.add(now, elapsed, o)
	if r.adaptive && now >= l.next.Load() {
		b.retime(now, l, r)
	}
}

// retime recomputes the adaptive timeout, if it is due at now and no
// other call is at it: clamp(quantile × factor + base, min, max), where
// the quantile is the window's, censored calls included, rounded up to
// the top of its bin (latBinTop), so that at any factor of at least 1 the
// deadline is above the quantile it follows. The value in force stays
// when the window holds fewer than MinRequests measured calls (or none),
// or when the quantile is unknown. A change is an event with Reason
// ReasonTimeoutAdapted, which WithLogger logs.
func (b *Breaker) retime(now int64, l *latency, r *rules) {
	next := l.next.Load()
	if now < next || !l.next.CompareAndSwap(next, addSat(now, int64(AdaptiveInterval))) {
		return
	}
	var h latHist
	count, censored := l.window(now, &h)
	if count == 0 || count < r.minReq {
		return
	}
	p := &r.p
	var bin [1]int
	latQuantileBins(&h, count+censored, []float64{p.TimeoutQuantile}, bin[:])
	if bin[0] < 0 {
		return // beyond the calls measured: it may be anything above them
	}
	q := latBinTop(bin[0])
	target := float64(q)*p.TimeoutFactor + float64(p.TimeoutBase)
	next64 := int64(min(target, float64(p.TimeoutMax)))
	next64 = min(max(next64, int64(p.TimeoutMin)), int64(p.TimeoutMax))
	// The change and its event are made under the lock, so that events
	// come in the order of the changes even if a recompute that is
	// descheduled here is overtaken by the next one.
	snap := snapshot(b.win.Load(), now)
	b.mu.Lock()
	old := adaptiveDeadline(r, l.timeout.Load())
	l.timeout.Store(next64)
	if next64 == old || !b.opt.observed() {
		b.mu.Unlock()
		return
	}
	w := b.state.Load()
	b.queueLocked(Event{
		Name:      b.name,
		From:      w.state(),
		To:        w.state(),
		Reason:    ReasonTimeoutAdapted,
		Time:      b.opt.tb.time(now),
		Snapshot:  snap,
		Doublings: int(b.doublings()),
		Mode:      w.mode(),
		Timeout: &TimeoutChange{
			Old:      time.Duration(old),
			New:      time.Duration(next64),
			Quantile: p.TimeoutQuantile,
			Latency:  q,
			Samples:  count,
		},
	})
	b.mu.Unlock()
	b.flush()
}

// TimeoutChange is a change of the adaptive timeout: the deadline in
// force went from Old to New, computed from the Quantile of the window's
// latency, which was Latency (rounded up to the top of its histogram bin,
// at most 1/16 above the calls in it), estimated from Samples measured
// calls and the censored ones.
//
// In JSON its durations are strings such as "250ms", like an event's
// cooldown.
type TimeoutChange struct {
	Old      time.Duration
	New      time.Duration
	Quantile float64 // Policy.TimeoutQuantile
	Latency  time.Duration
	Samples  uint64
}

type timeoutChangeJSON struct {
	Old      string  `json:"old"`
	New      string  `json:"new"`
	Quantile float64 `json:"quantile"`
	Latency  string  `json:"latency"`
	Samples  uint64  `json:"samples"`
}

// MarshalJSON writes the change with its durations as strings.
func (c TimeoutChange) MarshalJSON() ([]byte, error) {
	return json.Marshal(timeoutChangeJSON{c.Old.String(), c.New.String(), c.Quantile, c.Latency.String(), c.Samples})
}

// UnmarshalJSON reads what [TimeoutChange.MarshalJSON] writes. A duration
// that is not a duration string, or is negative, is an error naming the
// key; on error c is unchanged.
func (c *TimeoutChange) UnmarshalJSON(data []byte) error {
	v := timeoutChangeJSON{c.Old.String(), c.New.String(), c.Quantile, c.Latency.String(), c.Samples}
	if err := json.Unmarshal(data, &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("breaker: event timeout.%s: want a %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("breaker: event timeout: %w", err)
	}
	out := TimeoutChange{Quantile: v.Quantile, Samples: v.Samples}
	for _, f := range []struct {
		key string
		s   string
		dst *time.Duration
	}{{"old", v.Old, &out.Old}, {"new", v.New, &out.New}, {"latency", v.Latency, &out.Latency}} {
		d, err := time.ParseDuration(f.s)
		if err != nil {
			return fmt.Errorf("breaker: event timeout.%s: %s is not a duration such as \"250ms\"", f.key, quoteKey(f.s))
		}
		if d < 0 {
			return fmt.Errorf("breaker: event timeout.%s: %s is negative", f.key, d)
		}
		*f.dst = d
	}
	*c = out
	return nil
}
