package breaker

import (
	"context"
	"errors"
)

// Fallback calls fn through b. If b refuses the call, Fallback returns what
// fallback returns instead; fallback receives the refusal, an error
// matching [ErrOpen] (an *[OpenError] with the reason and RetryAfter).
// Otherwise it returns fn's results unchanged.
//
// What to fall back to depends on the call: a read can serve a cached or
// default value; a write that can wait can answer "try again later" with
// the refusal's RetryAfter; a write that must not be lost should not use a
// fallback at all and return the refusal. Fallbacks are counted in
// Counters.Fallbacks, apart from the downstream's outcomes, so a breaker's
// statistics never mistake a served fallback for a real answer (nor the
// other way round). If ctx is done before the call, Fallback returns
// ctx.Err() and does not fall back: the caller has gone.
func Fallback[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, false)
}

// FallbackOnFailure is [Fallback] that also falls back when the call fails
// or times out, passing fn's error to fallback. It does not fall back for
// an ignored error ([Ignore], the caller's cancellation): those are the
// caller's to handle.
func FallbackOnFailure[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, true)
}

// Recover is the fallback for a call guarded somewhere else, such as by
// the HTTP transport of package breakerhttp or the gRPC interceptors: given
// that call's results, it returns what fallback returns when err is a
// refusal (it matches [ErrOpen]), and counts the fallback in
// Counters.Fallbacks of the breaker that refused. Otherwise it returns v
// and err unchanged. Wrapping such a call in [Fallback] instead would pass
// it through a breaker twice.
//
//	resp, err := client.Get(url) // client uses breakerhttp
//	resp, err = breaker.Recover(ctx, resp, err, cachedResponse)
func Recover[T any](ctx context.Context, v T, err error, fallback func(context.Context, error) (T, error)) (T, error) {
	if err == nil || !errors.Is(err, ErrOpen) {
		return v, err
	}
	if fallback == nil {
		return v, errors.New("breaker: nil fallback")
	}
	var oe *OpenError
	if errors.As(err, &oe) && oe.b != nil {
		oe.b.tally.inc(kFallbacks)
	}
	return fallback(ctx, err)
}

// RecoverOnFailure is [Recover] that also falls back when the guarded call
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
//	stock, err = breaker.RecoverOnFailure(ctx, stock, err, cachedStock)
func RecoverOnFailure[T any](ctx context.Context, v T, err error, fallback func(context.Context, error) (T, error)) (T, error) {
	if err == nil {
		return v, err
	}
	if errors.Is(err, ErrOpen) {
		return Recover(ctx, v, err, fallback)
	}
	var c outcomeCarrier
	if ctx == nil || ctx.Err() != nil || !errors.As(err, &c) {
		return v, err
	}
	b, o := c.BreakerOutcome()
	if b == nil || (o != Failure && o != Timeout) {
		return v, err
	}
	if fallback == nil {
		return v, errors.New("breaker: nil fallback")
	}
	b.tally.inc(kFallbacks)
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
	if fallback == nil {
		var zero T
		return zero, errors.New("breaker: nil fallback")
	}
	v, err := Call(ctx, b, fn)
	if err == nil || b == nil || ctx == nil || fn == nil {
		return v, err
	}
	use := errors.Is(err, ErrOpen)
	if !use && onFailure && ctx.Err() == nil {
		// Classify as the breaker did; a late nil result never gets here.
		o := b.outcome(ctx, err, -1, b.rules.Load())
		use = o == Failure || o == Timeout
	}
	if !use {
		return v, err
	}
	b.tally.inc(kFallbacks)
	return fallback(ctx, err)
}
