package breakerhttp

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/govkit/breaker"
)

// Fallback turns the results of a request sent through t into a value: it
// serves what fallback returns when the request's breaker refused it, or
// when the exchange failed or timed out (a 5xx, a 429, no response at all,
// a body that broke off while read was reading it, by t's classifier), and
// what read returns otherwise. A served fallback is counted in
// Counters.Fallbacks of the breaker that guarded the request, as
// [breaker.FallbackOnFailure] counts it, and the Transport's own outcome
// (the failure, the refusal) is counted as it always is:
//
//	resp, err := client.Get(url) // client uses tr, a breakerhttp Transport
//	stock, err := breakerhttp.Fallback(ctx, tr, resp, err, decodeStock, cachedStock)
//
// read gets every response that is not served from the fallback, whatever
// its status (a 404 included: an ignored outcome is the caller's to
// handle), and Fallback closes the body after it. fallback gets the
// request's error, or, for a failed response, an error naming its status;
// the response's body is closed before fallback is called.
//
// Fallback does not fall back, and returns err or read's results, when the
// outcome was ignored (a 4xx other than 429, the caller's cancellation) or
// when ctx is done: the caller has gone. Pass it the caller's context, not
// a shorter one made for the request: past the request's own deadline, the
// caller is still there to be served.
//
// t is the Transport the client sends through: the outermost, when one
// Transport is the base of another. Fallback knows a response by the
// *http.Response that t returned, not by its Body: t notes each response
// until its call ends or its body is closed, and Fallback asks t. So an
// [http.Client] (with or without Client.Timeout, a Jar, redirects) and
// RoundTrippers around t that wrap the Body (tracing, logging) are all
// fine; give Fallback the response before reading its body. A response
// that did not come through t, such as one that a RoundTripper around t
// made anew, or one that another Transport returned, is read. A nil t is
// an error.
//
// One error names no breaker. When Client.Timeout ends a request before
// its response arrives, http.Client replaces the Transport's error with
// its own, unless the Transport returned first: the two deadlines expire
// together, and which is seen first is a race. Fallback serves the
// fallback for that error as for any timeout (the Transport counted one),
// but cannot count it in Counters.Fallbacks. To have every fallback
// counted, give the request a deadline that the Transport sees first:
// the breaker's Policy.CallTimeout, shorter than Client.Timeout, or a context
// deadline on the request.
func Fallback[T any](ctx context.Context, t *Transport, resp *http.Response, err error, read func(*http.Response) (T, error), fallback func(context.Context, error) (T, error)) (T, error) {
	var zero T
	if t == nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return zero, errors.New("breakerhttp: Fallback: nil *Transport")
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // http.Client has closed it already; a RoundTripper may not have
		}
		if ctx != nil && ctx.Err() == nil && cutByClientTimeout(err) {
			if fallback == nil {
				return zero, errors.New("breakerhttp: Fallback: nil read or fallback function")
			}
			return fallback(ctx, err) // a timeout, with no breaker to count it on
		}
		return breaker.FallbackResultOnFailure(ctx, zero, err, fallback)
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
	c, ok := t.callOf(resp)
	if ok && ctx != nil && ctx.Err() == nil {
		o, ended := c.outcome(t, resp)
		if !ended {
			o = t.classify(resp, nil) // the call is open: judge the status
		}
		if o == breaker.Failure || o == breaker.Timeout {
			// Closing the body ends an open call with the outcome just read.
			resp.Body.Close()
			return breaker.FallbackResultOnFailure(ctx, zero, &callError{err: errors.New(describe(resp, nil)), b: c.b, o: o}, fallback)
		}
	}
	v, err := read(resp)
	if ok && err != nil {
		// The body may have broken off under read (a reset, a deadline, a
		// truncated answer): the call ended then with that outcome, which
		// t forgets once the body is closed.
		if o, ended := c.outcome(t, resp); ended && (o == breaker.Failure || o == breaker.Timeout) {
			resp.Body.Close()
			return breaker.FallbackResultOnFailure(ctx, v, &callError{err: err, b: c.b, o: o}, fallback)
		}
	}
	if resp.Body != nil {
		resp.Body.Close()
	}
	return v, err
}

// call is what Fallback knows of the call behind a response: its body, when
// the response still carries the Transport's own, or else the Transport's
// note of it.
type call struct {
	bd *body
	b  *breaker.Breaker
	id uint64 // the note's, when bd is nil
}

// callOf returns the call behind resp, which t returned, however its Body
// is wrapped, or false for a response that t did not return or no longer
// notes.
func (t *Transport) callOf(resp *http.Response) (call, bool) {
	if bd, ok := resp.Body.(*body); ok && bd.resp == resp && bd.t == t {
		return call{bd: bd, b: bd.b}, true
	}
	if t.calls == nil {
		return call{}, false
	}
	n, ok := t.calls.find(resp)
	return call{b: n.b, id: n.id}, ok
}

// outcome returns the outcome c ended with, and whether it has ended as
// far as Fallback needs to know: a noted call is noted as ended only when
// it failed or timed out.
func (c call) outcome(t *Transport, resp *http.Response) (breaker.Outcome, bool) {
	var ended int32
	if c.bd != nil {
		ended = c.bd.outcome.Load()
	} else if n, ok := t.calls.find(resp); ok && n.id == c.id {
		ended = n.outcome
	}
	return breaker.Outcome(ended - 1), ended != 0
}

// cutByClientTimeout reports whether err is http.Client's own error for a
// request that Client.Timeout ended before its response, which replaced
// whatever the Transport returned: net/http's timeoutError holds only a
// message, which ends "(Client.Timeout exceeded while awaiting headers)".
// An error that still carries a breaker's outcome, or a refusal, is not:
// the Transport's error came through.
func cutByClientTimeout(err error) bool {
	var c interface {
		BreakerOutcome() (*breaker.Breaker, breaker.Outcome)
	}
	if errors.As(err, &c) || errors.Is(err, breaker.ErrOpen) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue) && ue.Timeout() && strings.Contains(ue.Err.Error(), "Client.Timeout exceeded")
}

// callError is the error of a request that the Transport guarded: the
// base RoundTripper's error, unchanged in its message and for errors.Is
// and errors.As, plus the breaker that guarded the request and the outcome
// it counted, which [breaker.FallbackResultOnFailure] reads.
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

// BreakerOutcome is read by breaker.FallbackResultOnFailure.
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
