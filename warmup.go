package breaker

import (
	"context"
	"math"
	"time"
)

// MarkCold declares the breaker's target cold from now: for Policy.Warmup
// its outcomes are left out of the window (counted as Exempt). Call it when
// the target behind a per-instance breaker restarts, or right after [New];
// see also [GroupConfig.ColdTargets] and [WithInstanceStart]. It does
// nothing if Warmup is 0. A breaker's candidate policy (GroupPolicy
// Candidate) is marked too, for its own Warmup.
func (b *Breaker) MarkCold() { b.markCold(b.opt.tb.Now()) }

// markCold marks b's target cold from now, for b and for its candidate,
// each by its own rules.
func (b *Breaker) markCold(now int64) {
	if r := b.rules.Load(); r.warmup > 0 {
		b.warmUntil.Store(now + r.warmup)
	}
	if c := b.cand.Load(); c != nil {
		c.shadow.markCold(now)
	}
}

type instanceStartKey struct{}

// WithInstanceStart marks ctx as a call to a target instance that started
// at start, a time read from the breaker's [Clock]: if that is less than
// Policy.Warmup before the call ends, its outcome is left out of the
// window. Use it for per-method breakers whose calls spread over instances.
// Every breaker a context derived from ctx goes through sees the mark, so
// mark only the call to that instance. A breaker samples plain successes
// for the mark until it has seen one (docs/behaviour.md, §4 Warmup).
func WithInstanceStart(ctx context.Context, start time.Time) context.Context {
	return context.WithValue(ctx, instanceStartKey{}, start)
}

// marksSeen in Breaker.marks: looks on every call. Otherwise marks is when
// to look at a plain success next (0 samples the first call).
const marksSeen = math.MinInt64

// instanceSample is how often a breaker that has seen no mark samples.
const instanceSample = int64(100 * time.Millisecond)

// coldFast is cold for the closed-state success path: the context is
// looked at only if the breaker has seen marks or a sample is due.
func (b *Breaker) coldFast(ctx context.Context, now int64, r *rules) bool {
	if r.warmup == 0 {
		return false
	}
	if now < b.warmUntil.Load() {
		return true
	}
	if now < b.marks.Load() {
		return false
	}
	return b.coldInstance(ctx, now, r)
}

// cold reports whether a call ending at now went to a warming-up target.
func (b *Breaker) cold(ctx context.Context, now int64, r *rules) bool {
	if r.warmup == 0 {
		return false
	}
	if now < b.warmUntil.Load() {
		return true
	}
	return b.coldInstance(ctx, now, r)
}

// coldInstance looks ctx up for WithInstanceStart's mark, and notes
// whether it found one for coldFast.
func (b *Breaker) coldInstance(ctx context.Context, now int64, r *rules) bool {
	start, ok := ctx.Value(instanceStartKey{}).(time.Time)
	m := b.marks.Load()
	switch {
	case ok && m != marksSeen:
		b.marks.Store(marksSeen)
	case !ok && m != marksSeen && m <= now:
		// Losing the CAS to another sampler, or to a mark, is fine.
		b.marks.CompareAndSwap(m, now+instanceSample)
	}
	if !ok {
		return false
	}
	// Map start as a reading taken now, so that a clock that stepped
	// back does not age the instance.
	return now-b.opt.tb.Offset(start) < r.warmup
}
