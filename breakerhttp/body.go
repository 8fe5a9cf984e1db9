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
type body struct {
	rc     io.ReadCloser
	t      *Transport
	b      *breaker.Breaker
	resp   *http.Response
	caller context.Context
	done   func(error)
	closed atomic.Bool
	ended  atomic.Bool
	// outcome is the call's outcome once it has ended, plus one (0: not
	// ended), for Fallback.
	outcome atomic.Int32
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
	b.end(nil)
	return err
}

func (b *body) end(err error) {
	if b.ended.Swap(true) {
		return
	}
	b.outcome.Store(int32(b.t.settle(b.caller, b.done, b.resp, err)) + 1)
}
