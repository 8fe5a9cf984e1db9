package breakerhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readBody is the read function of the Fallback tests: the status and the
// body's text.
func readBody(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return resp.Status + ": " + strings.TrimSpace(string(b)), err
}

// fromCache is the fallback of the Fallback tests; it records the error it
// was given.
func fromCache(got *error) func(context.Context, error) (string, error) {
	return func(_ context.Context, err error) (string, error) {
		*got = err
		return "cached", nil
	}
}

func (f *fixture) fallbackGet(ctx context.Context, url string, got *error) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(f.t, err)
	resp, err := f.client.Do(req)
	return Fallback(ctx, f.tr, resp, err, readBody, fromCache(got))
}

func TestFallback_ServesTheCacheOnA500(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	var got error
	v, err := f.fallbackGet(context.Background(), d.URL+"/status/500", &got)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	require.Error(t, got)
	assert.Contains(t, got.Error(), "500")
	c := b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Failures)
	assert.Equal(t, uint64(1), c.Admitted)
	assert.Equal(t, []int32{1}, f.base.closes(), "body closes")
}

func TestFallback_ServesTheCacheOnAnEmpty503(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	b, err := f.group.Get("empty")
	require.NoError(t, err)
	srv := newEmptyStatusServer(t, http.StatusServiceUnavailable)
	f.tr = New(f.base, f.group, WithKey(func(*http.Request) string { return "empty" }))
	f.client.Transport = f.tr
	t.Cleanup(f.tr.CloseIdleConnections)
	var got error
	v, err := f.fallbackGet(context.Background(), srv.URL, &got)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	c := b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Failures)
}

func TestFallback_ServesTheCacheOnNoResponse(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	addr := testutil.RefusedAddr(t)
	b, err := f.group.Get(addr)
	require.NoError(t, err)
	var got error
	v, err := f.fallbackGet(context.Background(), "http://"+addr+"/", &got)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	require.Error(t, got)
	var ne interface{ Timeout() bool }
	assert.True(t, errors.As(got, &ne), "the transport's error reaches the fallback: %v", got)
	c := b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Timeouts)
}

func TestFallback_ServesTheCacheOnARefusal(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	require.NoError(t, b.SetMode(breaker.ModeForcedOpen))
	var got error
	v, err := f.fallbackGet(context.Background(), d.URL+"/status/200", &got)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	assert.ErrorIs(t, got, breaker.ErrOpen)
	c := b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Rejected)
	assert.Equal(t, int64(0), d.hits.Load())
}

func TestFallback_NoneForAnIgnored404(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	var got error
	v, err := f.fallbackGet(context.Background(), d.URL+"/status/404", &got)
	require.NoError(t, err)
	assert.Equal(t, "404 Not Found: status 404", v)
	assert.NoError(t, got, "fallback called")
	c := b.Counters()
	assert.Equal(t, uint64(0), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Ignored)
	assert.Equal(t, []int32{1}, f.base.closes(), "body closes")
}

func TestFallback_NoneForTheCallersCancellation(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-d.arrived
		cancel()
	}()
	var got error
	_, err := f.fallbackGet(ctx, d.URL+"/hang", &got)
	require.ErrorIs(t, err, context.Canceled)
	assert.NoError(t, got, "fallback called")
	c := b.Counters()
	assert.Equal(t, uint64(0), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Ignored)
}

// A 500 that arrives after the caller has gone is not served from the
// fallback: nobody is waiting for it.
func TestFallback_NoneForAGoneCaller(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	resp, err := f.client.Get(d.URL + "/status/500")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got error
	v, err := Fallback(ctx, f.tr, resp, nil, readBody, fromCache(&got))
	require.NoError(t, err)
	assert.Equal(t, "500 Internal Server Error: status 500", v)
	assert.NoError(t, got, "fallback called")
	assert.Equal(t, uint64(0), b.Counters().Fallbacks)
	assert.Equal(t, uint64(1), b.Counters().Failures)
}

func TestFallback_NilFunctionsAreErrors(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	tr := New(nil, g)
	_, err = Fallback[string](context.Background(), tr, nil, nil, readBody, fromCache(new(error)))
	assert.ErrorContains(t, err, "nil *http.Response")
	_, err = Fallback(context.Background(), tr, &http.Response{StatusCode: 200, Body: http.NoBody}, nil, nil, fromCache(new(error)))
	assert.ErrorContains(t, err, "nil read or fallback")
	_, err = Fallback(context.Background(), nil, &http.Response{StatusCode: 200, Body: http.NoBody}, nil, readBody, fromCache(new(error)))
	assert.ErrorContains(t, err, "nil *Transport")
}

// The transport's errors keep what net/http's callers ask of them:
// url.Error.Timeout asks its direct cause, not the chain.
func TestTransportErrorsStayNetErrors(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	client := &http.Client{Transport: New(timeoutBase{}, g)}
	_, err = client.Get("http://127.0.0.1:1/")
	require.Error(t, err)
	var ue interface{ Timeout() bool }
	require.True(t, errors.As(err, &ue))
	assert.True(t, ue.Timeout(), "%v", err)
	assert.ErrorIs(t, err, errTimeoutBase)
	assert.Equal(t, `Get "http://127.0.0.1:1/": base timed out`, err.Error())
}

var errTimeoutBase = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "base timed out" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

type timeoutBase struct{}

func (timeoutBase) RoundTrip(*http.Request) (*http.Response, error) { return nil, errTimeoutBase }

// newEmptyStatusServer answers every request with code and no body.
func newEmptyStatusServer(t *testing.T, code int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A body that breaks off while read reads it ends the call as a timeout,
// and the fallback is served for it.
func TestFallback_ServesTheCacheOnABodyCutShort(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	var got error
	v, err := f.fallbackGet(context.Background(), d.URL+"/truncate", &got)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	assert.ErrorIs(t, got, io.ErrUnexpectedEOF)
	c := b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Timeouts)
}
