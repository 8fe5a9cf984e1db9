package breaker

import (
	"context"
	"errors"
)

// Fallback calls fn through b. If b refuses the call, Fallback returns what
// fallback returns instead; fallback receives the refusal, an error
// matching [ErrOpen] (an *[OpenError] with the reason and RetryAfter).
// Otherwise fn ran, and Fallback returns its results unchanged, whatever
// they are: an error of fn's that matches ErrOpen, the refusal of another
// breaker that fn called, included. That breaker's refusal is not b's;
// give it to [FallbackResult] to fall back on it, counted on the breaker that
// refused.
//
// What to fall back to depends on the call: a read can serve a cached or
// default value; a write that can wait can answer "try again later" with
// the refusal's RetryAfter; a write that must not be lost should not use a
// fallback at all and return the refusal. Fallbacks are counted in
// Counters.Fallbacks of the breaker that refused (b, or, for a b that its
// group has dropped, the key's current breaker, which made the call), apart
// from the downstream's outcomes, so a breaker's statistics never mistake a
// served fallback for a real answer (nor the other way round). If ctx is
// done before the call, Fallback returns ctx.Err() and does not fall back:
// the caller has gone.
func Fallback[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, false)
}

// FallbackOnFailure is [Fallback] that also falls back when the call fails
// or times out, by b's classifier, passing fn's error to fallback, and
// counts that fallback on b. It does not fall back for an ignored error
// ([Ignore], the caller's cancellation, and, by [DefaultClassifier],
// another breaker's refusal that fn passed on): those are the caller's to
// handle.
func FallbackOnFailure[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, true)
}

// FallbackResult is the fallback for a call guarded somewhere else, such as by
// the HTTP transport of package breakerhttp or the gRPC interceptors: given
// that call's results, it returns what fallback returns when err is a
// refusal (it matches [ErrOpen]), and counts the fallback in
// Counters.Fallbacks of the breaker that refused. Otherwise it returns v
// and err unchanged. Wrapping such a call in [Fallback] instead would pass
// it through a breaker twice.
//
//	resp, err := client.Get(url) // client uses breakerhttp
//	resp, err = breaker.FallbackResult(ctx, resp, err, cachedResponse)
func FallbackResult[T any](ctx context.Context, v T, err error, fallback func(context.Context, error) (T, error)) (T, error) {
	if err == nil || !errors.Is(err, ErrOpen) {
		return v, err
	}
	if fallback == nil {
		return v, errors.New("breaker: nil fallback")
	}
	var oe *OpenError
	if errors.As(err, &oe) {
		oe.b.countFallback()
	}
	return fallback(ctx, err)
}

// FallbackResultOnFailure is [FallbackResult] that also falls back when the guarded call
// failed or timed out, as [FallbackOnFailure] does for a call made through
// [Call]. It knows the call's outcome from err: the HTTP transport of
// package breakerhttp and the gRPC interceptors return errors that carry
// the breaker that guarded the call and the outcome it counted, and still
// match the original error with errors.Is and errors.As. It counts the
// fallback in Counters.Fallbacks of that breaker.
//
// It returns v and err unchanged, without calling fallback, when err is
// nil, when the outcome was ignored (an [Ignore]d error, a 4xx, the
// caller's cancellation), when err carries no breaker's outcome, or when
// ctx is done: the caller has gone. An HTTP response with a 5xx status is
// not an error; see breakerhttp.Fallback for it.
//
//	stock, err := inventory.GetStock(ctx, req) // conn uses breakergrpc
//	stock, err = breaker.FallbackResultOnFailure(ctx, stock, err, cachedStock)
func FallbackResultOnFailure[T any](ctx context.Context, v T, err error, fallback func(context.Context, error) (T, error)) (T, error) {
	if err == nil || ctx == nil || ctx.Err() != nil {
		return v, err
	}
	if errors.Is(err, ErrOpen) {
		return FallbackResult(ctx, v, err, fallback)
	}
	var c outcomeCarrier
	if !errors.As(err, &c) {
		return v, err
	}
	b, o := c.BreakerOutcome()
	if b == nil || (o != Failure && o != Timeout) {
		return v, err
	}
	if fallback == nil {
		return v, errors.New("breaker: nil fallback")
	}
	b.countFallback()
	return fallback(ctx, err)
}

// outcomeCarrier is the error of a call guarded by an integration (the
// breakerhttp Transport, the gRPC interceptors) that ended with that
// outcome on that breaker. The integrations implement it on their own
// unexported error types; it is an interface, not an exported type, so
// that they can keep whatever else their errors must be (a gRPC status, a
// net.Error) without this module knowing of them.
type outcomeCarrier interface {
	error
	BreakerOutcome() (*Breaker, Outcome)
}

func callWithFallback[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error), onFailure bool) (T, error) {
	var v T
	if fallback == nil {
		return v, errors.New("breaker: nil fallback")
	}
	if fn == nil {
		return Call(ctx, b, fn)
	}
	// Whether fn ran tells b's refusal from an error of fn's that matches
	// ErrOpen (an inner breaker's refusal): the OpenError alone cannot, as
	// a dropped b hands its calls, and refusals, to its successor.
	ran := false
	err := b.Do(ctx, func(ctx context.Context) error {
		ran = true
		var err error
		v, err = fn(ctx)
		return err
	})
	if err == nil || b == nil || ctx == nil {
		return v, err
	}
	if !ran {
		var oe *OpenError
		if !errors.As(err, &oe) {
			return v, err // ctx was done before the call
		}
		oe.b.countFallback()
		return fallback(ctx, err)
	}
	if !onFailure || ctx.Err() != nil {
		return v, err
	}
	// Classify as the breaker did; a late nil result never gets here.
	if o := b.outcome(ctx, err, -1, b.rules.Load()); o != Failure && o != Timeout {
		return v, err
	}
	b.countFallback()
	return fallback(ctx, err)
}

// countFallback counts a served fallback on b, or, once its group has
// dropped b, on the key's current breaker, which counts b's calls from
// then on (see [GroupConfig.IdleAfter]); a dropped breaker is in no
// snapshot, so a fallback counted there would be lost. A nil b counts
// nothing.
func (b *Breaker) countFallback() {
	if b == nil {
		return
	}
	if b.dropped() {
		if nb := b.opt.group.load(b.name); nb != nil && !nb.dropped() {
			b = nb
		}
	}
	b.tally.Inc(countFallbacks)
}
