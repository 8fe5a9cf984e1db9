package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker/internal/jsondoc"
	"github.com/govkit/breaker/internal/latency"
	"github.com/govkit/breaker/internal/timebase"
)

// timing is a timed breaker's latency histogram and the adaptive timeout
// computed from it, on the breaker's own rules (rules.own). Safe for
// concurrent use; recording never blocks.
type timing struct {
	// The adaptive timeout in force (0 until it adapts), and when next
	// to recompute it.
	timeout atomic.Int64
	next    atomic.Int64
	latency.Histogram
}

func newTiming(now int64, r *rules, timeout int64, base latency.Totals) *timing {
	t := &timing{}
	t.Init(r.width, r.buckets, base)
	t.timeout.Store(timeout)
	t.next.Store(timebase.AddSat(now, int64(AdaptiveInterval)))
	return t
}

// Latency is what a timed breaker knows of its calls' latency over the
// window, and the deadline it gives calls. Durations are measured on the
// breaker's clock from admission to result, within 3.1%; in JSON they are
// nanoseconds. docs/latency.md explains what is measured and how.
type Latency struct {
	// Samples is the closed-state calls that returned, in the window.
	Samples uint64 `json:"samples"`
	// Censored is the calls in the window that ended as timeouts: their
	// latency is only known to be at least what they ran.
	Censored uint64 `json:"censored"`
	// The quantiles, from Samples and Censored; 0 when unknown (no
	// call, or more than 1-q beyond the longest call measured).
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	// Timeout is the deadline given a call now ([Breaker.Timeout]).
	Timeout time.Duration `json:"timeout_ns"`
	// Monotonic totals since the breaker began timing calls: calls
	// measured, censored, and the sum of measured latencies (estimated).
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
	var h latency.Hist
	lat.Samples, lat.Censored = l.Window(b.opt.tb.Now(), &h)
	var q [4]time.Duration
	latency.Quantiles(&h, lat.Samples+lat.Censored, latencyQuantiles, q[:])
	lat.P50, lat.P90, lat.P99, lat.P999 = q[0], q[1], q[2], q[3]
	t := l.Totals()
	lat.SamplesTotal, lat.CensoredTotal, lat.SumTotal = t.Count, t.Censored, t.Sum
	return lat, true
}

// Timeout returns the deadline the breaker adds to a call's context now:
// Policy.CallTimeout, or under Policy.AdaptiveTimeout the value in force; 0
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

// adaptiveDeadline is cur (or, when 0, where r starts) kept within r's
// bounds, which may have changed since cur was computed.
func adaptiveDeadline(r *rules, cur int64) int64 {
	p := &r.p
	if cur <= 0 {
		cur = int64(p.CallTimeout)
		if cur <= 0 {
			cur = int64(p.AdaptiveTimeout.Max)
		}
	}
	return min(max(cur, int64(p.AdaptiveTimeout.Min)), int64(p.AdaptiveTimeout.Max))
}

// measure records a closed-state call that ended at now after elapsed ns
// (-1: not timed) in r's histogram, and recomputes the timeout when due.
func (b *Breaker) measure(now, elapsed int64, o Outcome, r *rules) {
	l := r.lat
	if l == nil || elapsed < 0 || o == Ignored {
		return
	}
	l.Add(now, elapsed, o == Timeout)
	if r.adaptive && now >= l.next.Load() {
		b.retime(now, l, r)
	}
}

// retime recomputes the adaptive timeout if it is due and no other call
// is at it: clamp(Q × factor + base, min, max), Q rounded up to the top of
// its bin, or no change below MinRequests or for an unknown Q
// (docs/latency.md, "The adaptive timeout").
func (b *Breaker) retime(now int64, l *timing, r *rules) {
	next := l.next.Load()
	if now < next || !l.next.CompareAndSwap(next, timebase.AddSat(now, int64(AdaptiveInterval))) {
		return
	}
	var h latency.Hist
	count, censored := l.Window(now, &h)
	if count == 0 || count < r.minReq {
		return
	}
	p := &r.p
	var bin [1]int
	latency.QuantileBins(&h, count+censored, []float64{p.AdaptiveTimeout.Quantile}, bin[:])
	if bin[0] < 0 {
		return // beyond the calls measured: it may be anything above them
	}
	q := latency.BinTop(bin[0])
	target := float64(q)*p.AdaptiveTimeout.Factor + float64(p.AdaptiveTimeout.Base)
	next64 := int64(min(target, float64(p.AdaptiveTimeout.Max)))
	next64 = min(max(next64, int64(p.AdaptiveTimeout.Min)), int64(p.AdaptiveTimeout.Max))
	// Under the lock, so that events come in the order of the changes.
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
		Time:      b.opt.tb.Time(now),
		Snapshot:  snap,
		Doublings: int(b.doublings()),
		Mode:      w.mode(),
		Timeout: &TimeoutChange{
			Old:      time.Duration(old),
			New:      time.Duration(next64),
			Quantile: p.AdaptiveTimeout.Quantile,
			Latency:  q,
			Samples:  count,
		},
	})
	b.mu.Unlock()
	b.flush()
}

// TimeoutChange is a change of the adaptive timeout from Old to New,
// computed from the window's Quantile, which was Latency (the top of its
// bin), over Samples measured calls. In JSON durations are strings.
type TimeoutChange struct {
	Old      time.Duration
	New      time.Duration
	Quantile float64 // Policy.AdaptiveTimeout.Quantile
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

// UnmarshalJSON reads what MarshalJSON writes. A bad or negative
// duration is an error naming its key; on error c is unchanged.
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
			return fmt.Errorf("breaker: event timeout.%s: %s is not a duration such as \"250ms\"", f.key, jsondoc.QuoteKey(f.s))
		}
		if d < 0 {
			return fmt.Errorf("breaker: event timeout.%s: %s is negative", f.key, d)
		}
		*f.dst = d
	}
	*c = out
	return nil
}
