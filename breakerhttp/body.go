package breakerhttp

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/govkit/breaker"
)

// body is a response body whose end ends the breaker's call: reading it to
// io.EOF, a read error, or Close, whichever comes first.
//
// Ending at EOF, not only at Close, means a caller that reads everything
// and closes late (or, against the contract, never) still reports, and
// a half-open probe does not hold its slot. It is safe for the connection:
// net/http's body returns io.EOF only after the connection is back in the
// idle pool, so cancelling the call's deadline then cannot cost it.
//
// A read error ends the call with that error, which the classifier sees as
// (resp, err): by default a Timeout, since the answer broke off (a reset,
// a deadline, a truncated body) and a partial answer is no answer. A read
// error caused by the caller closing the body from another goroutine is not
// the downstream's, and ends the call as a plain Close does.
//
// The body of a failed response that has none is a body too, over
// http.NoBody, whose call ended when the response arrived.
type body struct {
	rc     io.ReadCloser
	t      *Transport
	b      *breaker.Breaker
	resp   *http.Response
	caller context.Context
	done   func(error)
	tr     *tracked // nil unless the Transport records
	closed atomic.Bool
	ended  atomic.Bool
	// outcome is the call's outcome once it has ended, plus one (0: not
	// ended), for Fallback.
	outcome atomic.Int32
	// slot and slab are where its Transport's calls note it, set before
	// RoundTrip returns (see calls.add); slot sits in what would be padding.
	slot uint32
	slab *slab
}

// settledBody returns the body of a response without one whose call has
// ended with o.
func settledBody(t *Transport, b *breaker.Breaker, resp *http.Response, o breaker.Outcome) *body {
	bd := &body{rc: http.NoBody, t: t, b: b, resp: resp}
	bd.ended.Store(true)
	bd.outcome.Store(int32(o) + 1)
	return bd
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if err == io.EOF || b.closed.Load() {
			b.end(nil)
		} else {
			b.end(err)
		}
	}
	return n, err
}

// Close closes the underlying body once, however often it is called, and
// ends the call with the response's own outcome: a caller that stops
// reading early has learnt what it wanted.
func (b *body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	err := b.rc.Close()
	if !b.end(nil) {
		b.t.calls.remove(b) // ended before, or never open: a settled body
	}
	return err
}

// end ends the call, once, and reports whether this was that once.
func (b *body) end(err error) bool {
	if b.ended.Swap(true) {
		return false
	}
	o := b.t.settle(b.caller, b.done, b.tr, b.resp, err)
	b.outcome.Store(int32(o) + 1)
	if (o == breaker.Failure || o == breaker.Timeout) && !b.closed.Load() {
		// Fallback may be reading the body: it asks, before it closes the
		// body, how the call ended. Close forgets the call.
		b.t.calls.ended(b, o)
	} else {
		b.t.calls.remove(b)
	}
	return true
}
