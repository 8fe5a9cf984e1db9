package breakerhttp

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"unsafe"

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
	seq     uint32 // its place in its shard of recent, set before it is published
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
		recent.remove(b) // ended before, or never open: a settled body
	}
	return err
}

// end ends the call, once, and reports whether this was that once.
func (b *body) end(err error) bool {
	if b.ended.Swap(true) {
		return false
	}
	b.outcome.Store(int32(b.t.settle(b.caller, b.done, b.tr, b.resp, err)) + 1)
	recent.remove(b)
	return true
}

// recent holds the bodies of the responses the Transport has returned, so
// that Fallback finds the call behind a response whatever has wrapped its
// Body since: http.Client does when Client.Timeout is set, and so do
// RoundTrippers that trace or log. They keep the *http.Response, which is
// what Fallback looks for. A body leaves when its call ends, or when it is
// closed if the call ended first (a failed response without a body), so
// recent holds the exchanges in flight. Those whose caller never ends them
// (a body neither read to the end nor closed) are bounded: each shard is a
// ring, and a new body takes the place of the oldest.
var recent responses

const (
	responseShards    = 64  // a power of two
	responsesPerShard = 128 // bodies kept in a shard, at most
)

type responses struct {
	shards [responseShards]responseShard
}

// responseShard is a ring written without a lock: add claims the next
// place with one atomic add and stores the body there; remove takes it
// back with a compare-and-swap, so a place a newer body has taken is left
// alone. Only find, which runs for Fallback alone, reads the whole ring.
type responseShard struct {
	next atomic.Uint32 // wraps; responsesPerShard divides 1<<32
	ring [responsesPerShard]atomic.Pointer[body]
}

func (r *responses) shard(resp *http.Response) *responseShard {
	h := uint64(uintptr(unsafe.Pointer(resp))) * 0x9E3779B97F4A7C15
	return &r.shards[h>>(64-6)]
}

// add records bd, the body of bd.resp, in place of the shard's oldest.
func (r *responses) add(bd *body) {
	s := r.shard(bd.resp)
	bd.seq = s.next.Add(1)
	s.ring[bd.seq%responsesPerShard].Store(bd)
}

// remove forgets bd, if it is still recorded.
func (r *responses) remove(bd *body) {
	r.shard(bd.resp).ring[bd.seq%responsesPerShard].CompareAndSwap(bd, nil)
}

// find returns the body recorded for resp, or nil. A Transport around
// another one returns the inner one's response with a body of its own,
// recorded after the inner one's: the latest, the body the caller holds,
// is the one found.
func (r *responses) find(resp *http.Response) *body {
	var found *body
	s := r.shard(resp)
	for i := range s.ring {
		if bd := s.ring[i].Load(); bd != nil && bd.resp == resp && (found == nil || int32(bd.seq-found.seq) > 0) {
			found = bd
		}
	}
	return found
}
