package breakerhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tracingRT stands for a RoundTripper that instruments requests, as
// otelhttp's does: it wraps the response's Body in a type of its own and
// returns the response and the error it got.
type tracingRT struct{ rt http.RoundTripper }

type tracedBody struct{ io.ReadCloser }

func (t tracingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = tracedBody{resp.Body}
	}
	return resp, err
}

func (t tracingRT) CloseIdleConnections() {
	t.rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
}

// clientSetup is an http.Client built around a fixture's Transport, and
// the breaker that should count what Fallback serves for host.
type clientSetup struct {
	name string
	// client builds the client from the fixture. A nil return of
	// counting means the fixture's own breaker for the host counts.
	client func(t *testing.T, f *fixture) (c *http.Client, counting func(host string) *breaker.Breaker)
	// deadline, if set, is a deadline on the request's own context; the
	// caller passes its own, longer-lived context to Fallback.
	deadline time.Duration
}

func clientSetups() []clientSetup {
	plain := func(c *http.Client) func(*testing.T, *fixture) (*http.Client, func(string) *breaker.Breaker) {
		return func(t *testing.T, f *fixture) (*http.Client, func(string) *breaker.Breaker) {
			c.Transport = f.tr
			return c, nil
		}
	}
	jar, _ := cookiejar.New(nil)
	return []clientSetup{
		{name: "default client", client: plain(&http.Client{})},
		{name: "Client.Timeout", client: plain(&http.Client{Timeout: 2 * time.Second})},
		{name: "Jar", client: plain(&http.Client{Jar: jar})},
		{name: "CheckRedirect", client: plain(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }})},
		{name: "request deadline", client: plain(&http.Client{}), deadline: 2 * time.Second},
		{name: "tracing RoundTripper around", client: func(t *testing.T, f *fixture) (*http.Client, func(string) *breaker.Breaker) {
			return &http.Client{Transport: tracingRT{f.tr}}, nil
		}},
		{name: "tracing RoundTripper inside", client: func(t *testing.T, f *fixture) (*http.Client, func(string) *breaker.Breaker) {
			tr := New(tracingRT{f.base}, f.group)
			return &http.Client{Transport: tr}, nil
		}},
		{name: "two Transports", client: func(t *testing.T, f *fixture) (*http.Client, func(string) *breaker.Breaker) {
			// The fixture's Transport is the inner one; the outer one,
			// the client's own, counts what Fallback serves.
			outer, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
			require.NoError(t, err)
			return &http.Client{Transport: New(f.tr, outer)}, func(host string) *breaker.Breaker {
				b, err := outer.Get(host)
				require.NoError(t, err)
				return b
			}
		}},
		{name: "all of them", client: func(t *testing.T, f *fixture) (*http.Client, func(string) *breaker.Breaker) {
			jar, _ := cookiejar.New(nil)
			return &http.Client{
				Transport:     tracingRT{f.tr},
				Timeout:       2 * time.Second,
				Jar:           jar,
				CheckRedirect: func(*http.Request, []*http.Request) error { return nil },
			}, nil
		}, deadline: 2 * time.Second},
	}
}

// TestFallback_WorksWhateverTheClientSettings: Fallback serves the
// fallback for every failed exchange, and reads every other response,
// whatever the client around the Transport does to the response. It used
// to recognise the Transport's response by the type of its Body, which
// http.Client wraps when Client.Timeout is set (and a tracing RoundTripper
// around the Transport wraps too): a 500 then went to read, and the
// fallback never ran.
func TestFallback_WorksWhateverTheClientSettings(t *testing.T) {
	type want struct {
		value     string // what Fallback returns
		counts    testutil.Outcomes
		fallbacks uint64
	}
	scenarios := []struct {
		name   string
		path   string
		forced bool // the breaker is forced open
		want   want
	}{
		{"500", "/status/500", false, want{"cached", testutil.Outcomes{Failures: 1}, 1}},
		{"empty 503", "/empty/503", false, want{"cached", testutil.Outcomes{Failures: 1}, 1}},
		{"body cut short", "/truncate", false, want{"cached", testutil.Outcomes{Timeouts: 1}, 1}},
		{"refused", "/status/200", true, want{"cached", testutil.Outcomes{Rejected: 1}, 1}},
		{"redirect to a 500", "/redirect/500", false, want{"cached", testutil.Outcomes{Successes: 1, Failures: 1}, 1}},
		{"404", "/status/404", false, want{"404 Not Found: status 404", testutil.Outcomes{Ignored: 1}, 0}},
		{"200", "/status/200", false, want{"200 OK: status 200", testutil.Outcomes{Successes: 1}, 0}},
	}
	for _, cs := range clientSetups() {
		for _, sc := range scenarios {
			t.Run(cs.name+"/"+sc.name, func(t *testing.T) {
				f := newFixtureWith(t, testutil.Policy(), nil)
				d := newDownstream(t)
				client, counting := cs.client(t, f)
				t.Cleanup(client.CloseIdleConnections)
				host := d.Listener.Addr().String()
				b := f.breaker(d)
				if counting != nil {
					b = counting(host)
				}
				if sc.forced {
					require.NoError(t, b.SetMode(breaker.ModeForcedOpen))
				}
				ctx := context.Background()
				reqCtx := ctx
				if cs.deadline > 0 {
					var cancel context.CancelFunc
					reqCtx, cancel = context.WithTimeout(ctx, cs.deadline)
					defer cancel()
				}
				req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, d.URL+sc.path, nil)
				require.NoError(t, err)
				resp, err := client.Do(req)
				var got error
				v, err := Fallback(ctx, transportOf(client), resp, err, readBody, fromCache(&got))
				require.NoError(t, err)
				assert.Equal(t, sc.want.value, v)
				assert.Equal(t, sc.want.counts, testutil.OutcomesOf(b))
				assert.Equal(t, sc.want.fallbacks, b.Counters().Fallbacks, "fallbacks")
				for i, n := range f.base.closes() {
					assert.Equal(t, int32(1), n, "body %d closes", i)
				}
			})
		}
	}
}

// TestFallback_ServesTheCacheWhenClientTimeoutCutsTheRequest: when
// Client.Timeout ends a request before its response, http.Client replaces
// the Transport's error with its own, which names no breaker, unless the
// Transport's error is seen first (the two deadlines race). Fallback used
// to return the client's error as it was, without a fallback: for a hung
// downstream, a fallback that ran now and then. It now serves the
// fallback either way, counted when the Transport's error came through;
// and the two ways to give the request a deadline that the Transport sees
// first serve it counted, every time.
func TestFallback_ServesTheCacheWhenClientTimeoutCutsTheRequest(t *testing.T) {
	ctx := context.Background()
	get := func(t *testing.T, f *fixture, client *http.Client, reqCtx context.Context, url string) (string, error, error) {
		t.Helper()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		var got error
		v, err := Fallback(ctx, transportOf(client), resp, err, readBody, fromCache(&got))
		return v, err, got
	}

	t.Run("Client.Timeout", func(t *testing.T) {
		p := testutil.Policy()
		p.MinRequests = 100 // the timeouts below do not trip it
		f := newFixtureWith(t, p, nil)
		d := newDownstream(t)
		client := &http.Client{Transport: f.tr, Timeout: 30 * time.Millisecond}
		const n = 6 // enough for both sides of the race, as a rule
		for i := 0; i < n; i++ {
			v, err, got := get(t, f, client, ctx, d.URL+"/hang")
			require.NoError(t, err)
			assert.Equal(t, "cached", v)
			assert.ErrorIs(t, got, context.DeadlineExceeded, "the fallback gets the client's error")
		}
		b := f.breaker(d)
		assert.Equal(t, testutil.Outcomes{Timeouts: n}, testutil.OutcomesOf(b), "the Transport counted every one")
		assert.LessOrEqual(t, b.Counters().Fallbacks, uint64(n))
	})
	t.Run("Policy.CallTimeout under Client.Timeout", func(t *testing.T) {
		p := testutil.Policy()
		p.CallTimeout = 50 * time.Millisecond
		f := newFixtureWith(t, p, nil)
		d := newDownstream(t)
		client := &http.Client{Transport: f.tr, Timeout: 5 * time.Second}
		v, err, got := get(t, f, client, ctx, d.URL+"/hang")
		require.NoError(t, err)
		assert.Equal(t, "cached", v)
		assert.ErrorIs(t, got, context.DeadlineExceeded)
		b := f.breaker(d)
		assert.Equal(t, testutil.Outcomes{Timeouts: 1}, testutil.OutcomesOf(b))
		assert.Equal(t, uint64(1), b.Counters().Fallbacks)
	})
	t.Run("request deadline", func(t *testing.T) {
		f := newFixtureWith(t, testutil.Policy(), nil)
		d := newDownstream(t)
		reqCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		v, err, got := get(t, f, &http.Client{Transport: f.tr}, reqCtx, d.URL+"/hang")
		require.NoError(t, err)
		assert.Equal(t, "cached", v)
		assert.ErrorIs(t, got, context.DeadlineExceeded)
		b := f.breaker(d)
		assert.Equal(t, testutil.Outcomes{Timeouts: 1}, testutil.OutcomesOf(b))
		assert.Equal(t, uint64(1), b.Counters().Fallbacks)
	})
}

// transportOf is the Transport that client sends through, under any
// tracingRT.
func transportOf(client *http.Client) *Transport {
	switch rt := client.Transport.(type) {
	case *Transport:
		return rt
	case tracingRT:
		return rt.rt.(*Transport)
	}
	panic(fmt.Sprintf("no Transport in %T", client.Transport))
}
