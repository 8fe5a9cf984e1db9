package breaker

import (
	"context"
	"errors"
	"reflect"
)

// Fallback calls fn through b. If b refuses the call, Fallback returns what
// fallback returns, given the refusal (an *[OpenError]). Otherwise fn ran,
// and its results come back unchanged, even an inner breaker's refusal
// (see [FallbackResult] for that one). A served fallback is counted in
// Counters.Fallbacks of the breaker that refused: one that returned
// anything but the error it was given (a value, a "try later" error, even
// one that wraps it); one that hands that error back itself, as a cache
// miss does, served nothing and is not counted. If ctx is done before the
// call, Fallback returns ctx.Err() and does not fall back.
// docs/fallbacks.md tells what to fall back to.
func Fallback[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, false)
}

// FallbackOnFailure is [Fallback] that also falls back, counted on b, when
// b's classifier finds fn's error a failure or a timeout; never for an
// ignored one (such as an inner breaker's refusal).
func FallbackOnFailure[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	return callWithFallback(ctx, b, fn, fallback, true)
}

// FallbackResult is the fallback for a call guarded elsewhere (an
// integration, an inner breaker): if err matches [ErrOpen], it returns
// what fallback returns and counts it on the breaker that refused;
// otherwise it returns v and err unchanged.
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
	var b *Breaker
	var oe *OpenError
	if errors.As(err, &oe) {
		b = oe.b
	}
	return serve(ctx, b, err, fallback)
}

// FallbackResultOnFailure is [FallbackResult] that also falls back when
// err, as returned by the breakerhttp Transport or the gRPC interceptors,
// carries a failure or timeout outcome, counted on its breaker. It returns
// v and err unchanged for nil, an ignored outcome, an err without one, or
// a done ctx. A 5xx response is not an error: see breakerhttp.Fallback.
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
	return serve(ctx, b, err, fallback)
}

// outcomeCarrier is the error of a call guarded by an integration, which
// implements it on its own error types: the outcome on that breaker.
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
	// Whether fn ran tells b's refusal from an inner one; the OpenError
	// cannot, as a dropped b hands its calls to its successor.
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
		return serve(ctx, oe.b, err, fallback)
	}
	if !onFailure || ctx.Err() != nil {
		return v, err
	}
	// Classify as the breaker did; a late nil result never gets here.
	if o := b.outcome(ctx, err, -1, b.rules.Load()); o != Failure && o != Timeout {
		return v, err
	}
	return serve(ctx, b, err, fallback)
}

// serve calls fallback with err and counts it on b if it served
// something: anything but err itself, which a fallback with nothing to
// serve hands back.
func serve[T any](ctx context.Context, b *Breaker, err error, fallback func(context.Context, error) (T, error)) (T, error) {
	v, ferr := fallback(ctx, err)
	if !sameError(ferr, err) {
		b.countFallback()
	}
	return v, ferr
}

// sameError reports whether a is b. Two errors of a type that == cannot
// compare (it would panic) are the same if they say the same.
func sameError(a, b error) bool {
	if a == nil || reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	if !reflect.TypeOf(a).Comparable() {
		return a.Error() == b.Error()
	}
	return a == b
}

// countFallback counts a served fallback on b, or on its key's current
// breaker once b is dropped (a dropped breaker is in no snapshot).
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
