package breakerhttp

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// size is the number of responses c notes.
func (c *calls) size() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// failingTransport is a Transport, behind a tracingRT so that Fallback
// must find its responses by the *http.Response, over a base that answers
// every request at once with a 500 and a short body, whose breaker is held
// closed so that every request reaches the base. It returns the client's
// RoundTripper, the Transport and its breaker.
func failingTransport(t *testing.T) (http.RoundTripper, *Transport, *breaker.Breaker) {
	t.Helper()
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Body: io.NopCloser(strings.NewReader("boom")), Request: r}, nil
	}), g, WithKey(func(*http.Request) string { return "failing" }))
	b, err := g.Get("failing")
	require.NoError(t, err)
	require.NoError(t, b.SetMode(breaker.ModeForcedClosed))
	return tracingRT{tr}, tr, b
}

// fallbackOn is Fallback for the responses of tr.
func fallbackOn(ctx context.Context, tr *Transport, resp *http.Response, got *error) (string, error) {
	return Fallback(ctx, tr, resp, nil, readBody, fromCache(got))
}

// TestFallback_FindsEveryResponseUnderLoad: with many requests in flight
// at once, Fallback finds the call behind every response. The responses
// used to be noted in one process-wide table of 64 rings of 128 places, in
// which a new response took the place of the oldest: with 16,000 responses
// in flight (some 250 a ring), the older ones were gone by the time their
// Fallback ran, and their 500s were read as good answers.
func TestFallback_FindsEveryResponseUnderLoad(t *testing.T) {
	rt, tr, b := failingTransport(t)
	const workers, each = 32, 500
	ctx := context.Background()
	resps := make([][]*http.Response, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				req, _ := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resps[w] = append(resps[w], resp)
			}
		}()
	}
	wg.Wait() // every response is in flight
	var served, read atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, resp := range resps[w] {
				var got error
				v, err := fallbackOn(ctx, tr, resp, &got)
				switch {
				case err != nil:
					t.Error(err)
				case v == "cached":
					served.Add(1)
				default:
					read.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(workers*each), served.Load(), "fallbacks served")
	assert.Zero(t, read.Load(), "500s read as answers")
	assert.Equal(t, uint64(workers*each), b.Counters().Fallbacks)
	assert.Zero(t, tr.calls.size(), "every closed body is forgotten")
}

// TestFallback_TwoTransportsDoNotSeeEachOthersResponses: a Transport's
// Fallback knows only the responses that Transport returned. A failed
// response of one, given to Fallback with the other, is read (as any
// response that did not come through it) and counts nothing on the other's
// breakers.
func TestFallback_TwoTransportsDoNotSeeEachOthersResponses(t *testing.T) {
	ctx := context.Background()
	rtA, trA, bA := failingTransport(t)
	rtB, trB, bB := failingTransport(t)
	get := func(rt http.RoundTripper) *http.Response {
		req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		return resp
	}
	for _, c := range []struct {
		name       string
		rt         http.RoundTripper
		tr, other  *Transport
		b, otherBr *breaker.Breaker
	}{{"A", rtA, trA, trB, bA, bB}, {"B", rtB, trB, trA, bB, bA}} {
		t.Run(c.name, func(t *testing.T) {
			mine, others := c.b.Counters().Fallbacks, c.otherBr.Counters().Fallbacks
			resp := get(c.rt)
			assert.Zero(t, c.other.calls.size(), "the other Transport notes nothing")
			var got error
			v, err := fallbackOn(ctx, c.other, resp, &got)
			require.NoError(t, err)
			assert.Equal(t, "500 Internal Server Error: boom", v, "read, as a stranger's response")
			assert.NoError(t, got, "no fallback")
			assert.Equal(t, others, c.otherBr.Counters().Fallbacks)
			assert.Equal(t, mine, c.b.Counters().Fallbacks)

			v, err = fallbackOn(ctx, c.tr, get(c.rt), &got)
			require.NoError(t, err)
			assert.Equal(t, "cached", v, "its own Transport knows it")
			assert.Equal(t, mine+1, c.b.Counters().Fallbacks)
			assert.Equal(t, others, c.otherBr.Counters().Fallbacks)
		})
	}
}

// TestFallback_ForgetsTheResponsesItNoLongerNeeds: a Transport notes each
// response it returns so that Fallback can find it under any wrapper. An
// exchange that ends well, or whose body is closed, is forgotten at once;
// one that its caller never ends (a body neither read to the end nor
// closed, then dropped) is forgotten once the GC has collected it, so
// such callers cannot grow the Transport's notes without bound, and none
// is dropped while its response is held.
func TestFallback_ForgetsTheResponsesItNoLongerNeeds(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	status := http.StatusOK
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}), g, WithKey(func(*http.Request) string { return "forgets" }))
	rt := tracingRT{tr}
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)

	for i := 0; i < 100; i++ {
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		_, ok := tr.callOf(resp)
		require.True(t, ok)
		_, err = io.Copy(io.Discard, resp.Body) // ends at EOF, before Close
		require.NoError(t, err)
		_, ok = tr.callOf(resp)
		assert.False(t, ok, "an exchange that ended well is forgotten")
		resp.Body.Close()
	}
	status = http.StatusServiceUnavailable
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	c, ok := tr.callOf(resp)
	require.True(t, ok, "a failed exchange is kept until its body is closed")
	o, ended := c.outcome(tr, resp)
	assert.True(t, ended)
	assert.Equal(t, breaker.Failure, o)
	resp.Body.Close()
	_, ok = tr.callOf(resp)
	assert.False(t, ok, "and forgotten then")
	assert.Zero(t, tr.calls.size())

	status = http.StatusOK
	const dropped = 20000 // more than the old process-wide table held
	held := make([]*http.Response, 0, dropped)
	for i := 0; i < dropped; i++ {
		resp, err := rt.RoundTrip(req) // never read nor closed
		require.NoError(t, err)
		held = append(held, resp)
	}
	assert.Equal(t, dropped, tr.calls.size(), "none is dropped while held")
	for _, resp := range held {
		_, ok := tr.callOf(resp)
		require.True(t, ok)
	}
	held = nil
	// Once the bodies are garbage their notes go, but for those in the
	// slab each shard still hands slots out from.
	assert.Eventually(t, func() bool {
		runtime.GC()
		return tr.calls.size() <= callShards*slabSize
	}, 10*time.Second, 10*time.Millisecond, "notes of dropped responses")
}

// brokenBody is a body that breaks off at once.
type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (brokenBody) Close() error             { return nil }

// TestFallback_ADeadResponsesNoteJudgesNoOther: a note outlives its
// response for a while when the body is dropped unclosed (until the GC
// has collected the body and its slab), and a new response may come at
// the dead one's address meanwhile. A response the Transport returns
// without noting it (an empty success, an unguarded request) used to be
// judged by the dead one's note: a 200 served from the fallback. Here the
// base hands back one *http.Response object twice, which is what address
// reuse looks like to the notes: first with a body that breaks off, read
// and never closed, then empty.
func TestFallback_ADeadResponsesNoteJudgesNoOther(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func(context.Context) context.Context
	}{
		{"empty success", func(ctx context.Context) context.Context { return ctx }},
		{"unguarded", func(ctx context.Context) context.Context { return WithRequestKey(ctx, "") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := breaker.NewGroup(breaker.GroupConfig{})
			require.NoError(t, err)
			reused := &http.Response{StatusCode: http.StatusOK, Status: "200 OK"}
			tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return reused, nil
			}), g)
			rt := tracingRT{tr}
			ctx := context.Background()

			reused.Body = brokenBody{}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://downstream.test/", nil)
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			_, err = io.ReadAll(resp.Body)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.Equal(t, 1, tr.calls.size(), "the broken-off call is noted until its body is closed")

			reused.Body = http.NoBody
			req, err = http.NewRequestWithContext(c.ctx(ctx), http.MethodGet, "http://downstream.test/", nil)
			require.NoError(t, err)
			resp, err = rt.RoundTrip(req)
			require.NoError(t, err)
			var got error
			v, err := fallbackOn(ctx, tr, resp, &got)
			require.NoError(t, err)
			assert.Equal(t, "200 OK: ", v, "read, not served from the fallback")
			assert.NoError(t, got)
			assert.Zero(t, tr.calls.size())
		})
	}
}
