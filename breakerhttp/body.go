package breakerhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
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
	closed atomic.Bool
	ended  atomic.Bool
	// outcome is the call's outcome once it has ended, plus one (0: not
	// ended), for Fallback.
	outcome atomic.Int32
	slot    int32 // its place in its shard of recent, under the shard's lock
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
	b.outcome.Store(int32(b.t.settle(b.caller, b.done, b.resp, err)) + 1)
	recent.remove(b)
	return true
}

// recent maps the responses the Transport has returned to their bodies, so
// that Fallback finds the call behind a response whatever has wrapped its
// Body since: http.Client does when Client.Timeout is set, and so do
// RoundTrippers that trace or log. They keep the *http.Response, which is
// the key. An entry goes when its call ends, or when its body is closed if
// the call ended first (a failed response without a body), so the table
// holds the exchanges in flight. Those whose caller never ends them (a
// body neither read to the end nor closed) are bounded: each shard keeps
// its entries in a ring, and the oldest gives way to a new one.
var recent responses

const (
	responseShards    = 64  // a power of two
	responsesPerShard = 128 // entries kept in a shard, at most
)

type responses struct {
	shards [responseShards]responseShard
}

type responseShard struct {
	mu   sync.Mutex
	m    map[*http.Response]*body
	ring [responsesPerShard]*body
	next int
}

func (r *responses) shard(resp *http.Response) *responseShard {
	h := uint64(uintptr(unsafe.Pointer(resp))) * 0x9E3779B97F4A7C15
	return &r.shards[h>>(64-6)]
}

// add records bd as the body of resp. A Transport around another one
// returns the inner one's response with its own body: the outer body,
// added last, is the one found.
func (r *responses) add(resp *http.Response, bd *body) {
	s := r.shard(resp)
	s.mu.Lock()
	if old := s.ring[s.next]; old != nil && s.m[old.resp] == old {
		delete(s.m, old.resp)
	}
	if s.m == nil {
		s.m = make(map[*http.Response]*body)
	}
	s.ring[s.next] = bd
	bd.slot = int32(s.next)
	s.next = (s.next + 1) % responsesPerShard
	s.m[resp] = bd
	s.mu.Unlock()
}

// remove forgets bd, if it is still recorded.
func (r *responses) remove(bd *body) {
	s := r.shard(bd.resp)
	s.mu.Lock()
	if s.m[bd.resp] == bd {
		delete(s.m, bd.resp)
	}
	if s.ring[bd.slot] == bd {
		s.ring[bd.slot] = nil
	}
	s.mu.Unlock()
}

// find returns the body recorded for resp, or nil.
func (r *responses) find(resp *http.Response) *body {
	s := r.shard(resp)
	s.mu.Lock()
	bd := s.m[resp]
	s.mu.Unlock()
	return bd
}
