package breaker

import (
	"context"
	"math"
	"time"
)

// MarkCold declares the breaker's target cold from now: for Policy.Warmup the
// outcomes of calls are left out of the window (they still count in
// Counters, as Exempt). Call it when the target behind a per-instance
// breaker restarts; a cold cache can fail most calls for a minute, and that
// is no reason to cut the instance off. It does nothing if Warmup is 0.
//
// Called right after [New], it makes a breaker for a freshly started
// instance start cold. A group's per-target breakers start cold with
// [GroupConfig.ColdTargets]; per-method breakers, whose calls spread over
// instances, mark each call with [WithInstanceStart] instead.
func (b *Breaker) MarkCold() {
	if r := b.rules.Load(); r.warmup > 0 {
		b.warmUntil.Store(b.opt.tb.Now() + r.warmup)
	}
}

type instanceStartKey struct{}

// WithInstanceStart marks ctx as a call to a target instance that started
// at start, a time read from the breaker's [Clock]. If that is less than
// Policy.Warmup before the call ends, the call's outcome is left out of the
// window. Use it for per-method breakers whose calls spread over many
// instances, where the instance is only known per call (from service
// discovery, for example).
//
// A breaker looks for the mark on every failed, timed-out or slow call, and
// on every probe. On a plain success it looks only once it has seen a
// marked call, and until then on its first call and then on one call in
// each 100 ms: a breaker whose calls are never marked does not walk their
// contexts. So a breaker that gets marked and unmarked calls
// may count, before it has seen its first mark, a few successes of a cold
// instance; a success in the window can only make a trip later, never
// sooner.
//
// Every breaker that a call made with ctx, or with a context derived from
// it, goes through sees the mark: the calls that Do's function makes with
// the context it receives carry it too, and their breakers take them as
// calls to a cold instance. Mark the context of the call to that instance
// only, not one that the calls made inside it share.
func WithInstanceStart(ctx context.Context, start time.Time) context.Context {
	return context.WithValue(ctx, instanceStartKey{}, start)
}

// marksSeen in Breaker.marks means the breaker has seen a marked call and
// looks on every call. Otherwise marks is the offset from which the next
// plain success is looked at; 0, a new breaker's, samples its first call.
const marksSeen = math.MinInt64

// instanceSample is how often a breaker that has seen no mark samples a
// plain success for one: ten context walks a second at most.
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
	// start was read from the clock, not from the breaker: map it the way
	// a reading taken now would be, so that a clock that stepped back does
	// not age the instance by the size of the step.
	return now-b.opt.tb.Offset(start) < r.warmup
}
