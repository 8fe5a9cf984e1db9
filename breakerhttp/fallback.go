package breakerhttp

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/govkit/breaker"
)

// Fallback turns the results of a request sent through a [Transport] into
// a value: it serves what fallback returns when the request's breaker
// refused it, or when the exchange failed or timed out (a 5xx, a 429, no
// response at all, a body that broke off while read was reading it, by the
// Transport's classifier), and what read returns otherwise. A served fallback is counted in Counters.Fallbacks of the
// breaker that guarded the request, as [breaker.FallbackOnFailure] counts
// it, and the Transport's own outcome (the failure, the refusal) is counted
// as it always is:
//
//	resp, err := client.Get(url) // client uses a breakerhttp Transport
//	stock, err := breakerhttp.Fallback(ctx, resp, err, decodeStock, cachedStock)
//
// read gets every response that is not served from the fallback, whatever
// its status (a 404 included: an ignored outcome is the caller's to
// handle), and Fallback closes the body after it. fallback gets the
// request's error, or, for a failed response, an error naming its status;
// the response's body is closed before fallback is called.
//
// Fallback does not fall back, and returns err or read's results, when the
// outcome was ignored (a 4xx other than 429, the caller's cancellation) or
// when ctx is done: the caller has gone. It cannot know the outcome of a
// response that did not come through a Transport, and reads it.
func Fallback[T any](ctx context.Context, resp *http.Response, err error, read func(*http.Response) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	var zero T
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // http.Client has closed it already; a RoundTripper may not have
		}
		return breaker.RecoverOnFailure(ctx, zero, err, fallback)
	}
	if resp == nil {
		return zero, errors.New("breakerhttp: Fallback: nil *http.Response and nil error")
	}
	if read == nil || fallback == nil {
		if resp.Body != nil {
			resp.Body.Close()
		}
		return zero, errors.New("breakerhttp: Fallback: nil read or fallback function")
	}
	var b *breaker.Breaker
	o := breaker.Success
	switch body := resp.Body.(type) {
	case *body:
		b, o = body.b, body.t.classify(resp, nil)
	case *settledBody:
		b, o = body.b, body.o
	}
	if b != nil && (o == breaker.Failure || o == breaker.Timeout) && ctx != nil && ctx.Err() == nil {
		// Closing the body ends the call with the outcome just read.
		resp.Body.Close()
		return breaker.RecoverOnFailure(ctx, zero, &callError{err: errors.New(describe(resp, nil)), b: b, o: o}, fallback)
	}
	v, err := read(resp)
	if resp.Body != nil {
		resp.Body.Close()
	}
	if bd, ok := resp.Body.(*body); ok && err != nil {
		// The body broke off under read (a reset, a deadline, a
		// truncated answer): the call ended then with that outcome.
		if o := breaker.Outcome(bd.outcome.Load() - 1); o == breaker.Failure || o == breaker.Timeout {
			return breaker.RecoverOnFailure(ctx, v, &callError{err: err, b: bd.b, o: o}, fallback)
		}
	}
	return v, err
}

// callError is the error of a request that the Transport guarded: the
// base RoundTripper's error, unchanged in its message and for errors.Is
// and errors.As, plus the breaker that guarded the request and the outcome
// it counted, which [breaker.RecoverOnFailure] reads.
type callError struct {
	err error
	b   *breaker.Breaker
	o   breaker.Outcome
}

func outcomeError(o breaker.Outcome, b *breaker.Breaker, err error) error {
	return &callError{err: err, b: b, o: o}
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// BreakerOutcome is read by breaker.RecoverOnFailure.
func (e *callError) BreakerOutcome() (*breaker.Breaker, breaker.Outcome) { return e.b, e.o }

// Timeout and Temporary keep [net.Error] answers as they were: url.Error
// asks its direct cause with a type assertion, not errors.As.
func (e *callError) Timeout() bool {
	t, ok := e.err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

func (e *callError) Temporary() bool {
	t, ok := e.err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// settledBody is the empty body of a response without one whose exchange
// failed; it remembers the breaker and the outcome for [Fallback].
type settledBody struct {
	b *breaker.Breaker
	o breaker.Outcome
}

func (*settledBody) Read([]byte) (int, error) { return 0, io.EOF }
func (*settledBody) Close() error             { return nil }
