package breakerhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	success = testutil.Outcomes{Successes: 1}
	failure = testutil.Outcomes{Failures: 1}
	timeout = testutil.Outcomes{Timeouts: 1}
	ignored = testutil.Outcomes{Ignored: 1}
)

// One request per row of the classification table, against a real server,
// each on a fresh breaker: the row's outcome is the only one counted, the
// response (for any status) reaches the caller unchanged, and nothing
// trips.
func TestTransport_ClassifiesEveryRow(t *testing.T) {
	rows := []struct {
		name string
		path string // on the downstream; "" means a refused port
		// wait is the caller's deadline; cancel makes the caller cancel
		// once the server has the request; policyTimeout sets
		// Policy.CallTimeout (on the real clock, since it must fire).
		wait          time.Duration
		cancel        bool
		cause         error // cancel with this cause
		policyTimeout time.Duration
		wantStatus    int
		wantErr       bool
		want          testutil.Outcomes
	}{
		{name: "200", path: "/status/200", wantStatus: 200, want: success},
		{name: "204 no body", path: "/status/204", wantStatus: 204, want: success},
		{name: "301", path: "/status/301", wantStatus: 301, want: success},
		{name: "304", path: "/status/304", wantStatus: 304, want: success},
		{name: "400 ignored", path: "/status/400", wantStatus: 400, want: ignored},
		{name: "404 ignored", path: "/status/404", wantStatus: 404, want: ignored},
		{name: "409 ignored", path: "/status/409", wantStatus: 409, want: ignored},
		{name: "429", path: "/status/429", wantStatus: 429, want: failure},
		{name: "500", path: "/status/500", wantStatus: 500, want: failure},
		{name: "502", path: "/status/502", wantStatus: 502, want: failure},
		{name: "503", path: "/status/503", wantStatus: 503, want: failure},
		{name: "refused", path: "", wantErr: true, want: timeout},
		{name: "reset", path: "/reset", wantErr: true, want: timeout},
		{name: "body cut short", path: "/truncate", wantStatus: 200, wantErr: true, want: timeout},
		{name: "caller deadline", path: "/hang", wait: 30 * time.Millisecond, wantErr: true, want: timeout},
		{name: "Policy.CallTimeout before headers", path: "/hang", policyTimeout: 30 * time.Millisecond, wantErr: true, want: timeout},
		{name: "Policy.CallTimeout in the body", path: "/stall", policyTimeout: 30 * time.Millisecond, wantStatus: 200, wantErr: true, want: timeout},
		{name: "caller cancels", path: "/hang", cancel: true, wantErr: true, want: ignored},
		// net/http then returns the cause, which is not context.Canceled.
		{name: "caller cancels with a cause", path: "/hang", cancel: true, cause: errors.New("user left"), wantErr: true, want: ignored},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			p := testutil.Policy()
			var f *fixture
			if row.policyTimeout > 0 {
				p.CallTimeout = row.policyTimeout
				f = newFixtureWith(t, p, nil)
			} else {
				f = newFixture(t, p)
			}
			d := newDownstream(t)
			host := d.Listener.Addr().String()
			url := d.URL + row.path
			if row.path == "" {
				host = testutil.RefusedAddr(t)
				url = "http://" + host + "/"
			}

			ctx, cancelCause := context.WithCancelCause(context.Background())
			cancel := func() { cancelCause(row.cause) }
			defer cancel()
			if row.wait > 0 {
				ctx, cancel = context.WithTimeout(ctx, row.wait)
				defer cancel()
			}
			if row.cancel {
				go func() {
					<-d.arrived
					cancel()
				}()
			}
			status, err := f.get(ctx, url)

			assert.Equal(t, row.wantStatus, status, "status")
			if row.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
			b, gerr := f.group.Get(host)
			require.NoError(t, gerr)
			assert.Equal(t, row.want, testutil.OutcomesOf(b), "counters")
			assert.Equal(t, breaker.Closed, b.State())
			if row.path == "" {
				assert.Zero(t, d.hits.Load(), "a refused port is not the test server")
			}
		})
	}
}

// The default classifier's table, cell by cell, including what no real
// server sends.
func TestDefaultClassify(t *testing.T) {
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	rows := []struct {
		resp *http.Response
		err  error
		want breaker.Outcome
	}{
		{resp(100), nil, breaker.Success},
		{resp(101), nil, breaker.Success},
		{resp(200), nil, breaker.Success},
		{resp(299), nil, breaker.Success},
		{resp(302), nil, breaker.Success},
		{resp(399), nil, breaker.Success},
		{resp(400), nil, breaker.Ignored},
		{resp(401), nil, breaker.Ignored},
		{resp(403), nil, breaker.Ignored},
		{resp(404), nil, breaker.Ignored},
		{resp(408), nil, breaker.Ignored},
		{resp(428), nil, breaker.Ignored},
		{resp(429), nil, breaker.Failure},
		{resp(431), nil, breaker.Ignored},
		{resp(499), nil, breaker.Ignored},
		{resp(500), nil, breaker.Failure},
		{resp(501), nil, breaker.Failure},
		{resp(503), nil, breaker.Failure},
		{resp(504), nil, breaker.Failure},
		{resp(599), nil, breaker.Failure},
		{resp(600), nil, breaker.Failure},
		{resp(0), nil, breaker.Failure},
		{nil, nil, breaker.Timeout},
		{nil, errors.New("dial tcp: connection refused"), breaker.Timeout},
		{nil, context.DeadlineExceeded, breaker.Timeout},
		{resp(200), io.ErrUnexpectedEOF, breaker.Timeout},
		{nil, &breaker.OpenError{Name: "inner"}, breaker.Ignored},
		{nil, fmt.Errorf("inner: %w", breaker.ErrOpen), breaker.Ignored},
	}
	for _, row := range rows {
		got := DefaultClassify(row.resp, row.err)
		code := -1
		if row.resp != nil {
			code = row.resp.StatusCode
		}
		assert.Equal(t, row.want, got, "DefaultClassify(status %d, %v)", code, row.err)
	}
}

// A Transport around another one: the inner one's refusals reach the
// outer one as its base's errors. They used to count as timeouts there, so
// an inner breaker that opened tripped the outer one, which then refused
// requests the inner one does not guard. They are ignored now, and
// Fallback counts the fallback served for one on the inner breaker, the
// one that refused.
func TestTransport_AnInnerTransportsRefusalIsIgnored(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	inner := f.breaker(d)
	require.NoError(t, inner.SetMode(breaker.ModeForcedOpen))
	outerGroup, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	outer, err := outerGroup.Get(d.Listener.Addr().String())
	require.NoError(t, err)
	client := &http.Client{Transport: New(f.tr, outerGroup)}

	for i := 0; i < 10; i++ {
		_, err := client.Get(d.URL + "/status/200")
		require.ErrorIs(t, err, breaker.ErrOpen)
	}
	assert.Equal(t, breaker.Closed, outer.State())
	assert.Equal(t, testutil.Outcomes{Ignored: 10}, testutil.OutcomesOf(outer))
	assert.Equal(t, testutil.Outcomes{Rejected: 10}, testutil.OutcomesOf(inner))

	resp, err := client.Get(d.URL + "/status/200")
	var got error
	v, err := Fallback(context.Background(), client.Transport.(*Transport), resp, err, readBody, fromCache(&got))
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	assert.Equal(t, uint64(1), inner.Counters().Fallbacks)
	assert.Zero(t, outer.Counters().Fallbacks)
	assert.Zero(t, d.hits.Load())
}

// The outcome the Transport decides is the one the breaker counts, even
// in a group whose classifier would call everything a success.
func TestReportedOutcomesBeatAGroupClassifier(t *testing.T) {
	for _, o := range []breaker.Outcome{breaker.Success, breaker.Ignored, breaker.Failure, breaker.Timeout} {
		b, err := breaker.New("x", breaker.DefaultPolicy(),
			breaker.WithClassifier(func(error) breaker.Outcome { return breaker.Success }))
		require.NoError(t, err)
		_, done, err := b.Allow(context.Background())
		require.NoError(t, err)
		report(done, o, &http.Response{StatusCode: 500}, errors.New("connect: connection refused"))
		c := b.Counters()
		got := map[breaker.Outcome]uint64{
			breaker.Success: c.Successes, breaker.Ignored: c.Ignored,
			breaker.Failure: c.Failures, breaker.Timeout: c.Timeouts,
		}
		assert.Equal(t, uint64(1), got[o], "%v: %+v", o, c)
		assert.Equal(t, uint64(1), c.Admitted)
	}
}

// Each fault trips the breaker after MinRequests calls, with the right
// counts; once open, calls are refused without reaching the base transport
// or the server; after the cooldown, probes that find the server healthy
// close it.
func TestTransport_EachFaultOpensThenRecovers(t *testing.T) {
	faults := []struct {
		name string
		path string // "" is a refused port
		wait time.Duration
		want breaker.Counters
	}{
		{name: "5xx", path: "/status/500", want: breaker.Counters{Admitted: 4, Failures: 4}},
		{name: "429", path: "/status/429", want: breaker.Counters{Admitted: 4, Failures: 4}},
		{name: "past the deadline", path: "/hang", wait: 20 * time.Millisecond, want: breaker.Counters{Admitted: 4, Timeouts: 4}},
		{name: "reset", path: "/reset", want: breaker.Counters{Admitted: 4, Timeouts: 4}},
		{name: "refused", path: "", want: breaker.Counters{Admitted: 4, Timeouts: 4}},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			f := newFixture(t, testutil.Policy())
			var d *downstream
			var base string
			if fault.path == "" {
				base = "http://" + testutil.RefusedAddr(t)
			} else {
				d = newDownstream(t)
				base = d.URL
			}
			host := strings.TrimPrefix(base, "http://")
			b, err := f.group.Get(host)
			require.NoError(t, err)

			for i := 0; i < 4; i++ {
				wait := fault.wait
				if wait == 0 {
					wait = 5 * time.Second
				}
				_, _ = f.getTimeout(wait, base+fault.path)
			}
			require.Equal(t, breaker.Open, b.State())
			c := b.Counters()
			assert.Equal(t, fault.want.Admitted, c.Admitted, "admitted")
			assert.Equal(t, fault.want.Failures, c.Failures, "failures")
			assert.Equal(t, fault.want.Timeouts, c.Timeouts, "timeouts")
			assert.Equal(t, uint64(1), c.Opens, "opens")

			calls := f.base.calls.Load()
			var hits int64
			if d != nil {
				hits = d.hits.Load()
			}
			_, err = f.get(context.Background(), base+"/status/200")
			require.ErrorIs(t, err, breaker.ErrOpen)
			var oe *breaker.OpenError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, host, oe.Name)
			assert.Equal(t, breaker.ReasonErrorRatio, oe.Reason)
			assert.Equal(t, 10*time.Second, oe.RetryAfter())
			assert.Equal(t, calls, f.base.calls.Load(), "a refused call reaches the base transport")
			if d != nil {
				assert.Equal(t, hits, d.hits.Load(), "a refused call reaches the server")
			}
			assert.Equal(t, uint64(1), b.Counters().Rejected)

			// The downstream recovers; for the refused port, a server comes
			// up on it.
			if d == nil {
				d = newDownstreamAt(t, host)
			}
			f.clk.Add(10 * time.Second)
			for i := 0; i < 2; i++ {
				status, err := f.get(context.Background(), d.URL+"/status/200")
				require.NoError(t, err)
				require.Equal(t, 200, status)
			}
			assert.Equal(t, breaker.Closed, b.State())
			assert.Equal(t, uint64(2), b.Counters().ProbesPassed)
		})
	}
}

// Probes carry Breaker-Probe: 1; ordinary calls do not, even when the
// caller's request had the header (a proxy copying an upstream's request);
// and the caller's request is never modified.
func TestTransport_ProbeHeaderOnProbesOnly(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)

	for i := 0; i < 4; i++ {
		status, err := f.get(context.Background(), d.URL+"/status/500")
		require.NoError(t, err)
		require.Equal(t, 500, status)
	}
	require.Equal(t, breaker.Open, b.State())
	f.clk.Add(10 * time.Second)

	// Two probes. The first is answered 500: an answer, so it passes.
	forwarded, err := http.NewRequest(http.MethodGet, d.URL+"/status/500", nil)
	require.NoError(t, err)
	forwarded.Header.Set(ProbeHeader, "0")
	resp, err := f.client.Do(forwarded)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, "0", forwarded.Header.Get(ProbeHeader), "the caller's request was modified")
	assert.Equal(t, breaker.HalfOpen, b.State())

	plain, err := http.NewRequest(http.MethodGet, d.URL+"/status/200", nil)
	require.NoError(t, err)
	resp, err = f.client.Do(plain)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Empty(t, plain.Header.Get(ProbeHeader), "the caller's request was modified")
	assert.Equal(t, breaker.Closed, b.State())

	// Closed again: the header is stripped from a forwarded request.
	forwarded, err = http.NewRequest(http.MethodGet, d.URL+"/status/200", nil)
	require.NoError(t, err)
	forwarded.Header.Set(ProbeHeader, "1")
	resp, err = f.client.Do(forwarded)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	assert.Equal(t, []string{"", "", "", "", "1", "1", ""}, d.probeHeaders())
	assert.Equal(t, uint64(2), b.Counters().ProbesPassed)
}

// The probe header describes the request of the breaker that guards it. A
// request that no breaker guards (a key of "", from the key function or
// the context) used to go out with a caller's Breaker-Probe: 1, copied
// from an upstream's request by a proxy, while guarded requests had it
// stripped; it is stripped there too, under any casing, and the caller's
// request is left as it was.
func TestTransport_ProbeHeaderStrippedFromUnguardedRequests(t *testing.T) {
	d := newDownstream(t)
	f := newFixture(t, testutil.Policy(), WithKey(func(r *http.Request) string {
		if r.URL.Path == "/status/204" {
			return ""
		}
		return r.URL.Host
	}))
	send := func(ctx context.Context, path string, h http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+path, nil)
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		before := req.Header.Clone()
		resp, err := f.client.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, before, req.Header, "the caller's request was modified")
	}
	send(context.Background(), "/status/204", http.Header{ProbeHeader: {"1"}})
	send(context.Background(), "/status/204", http.Header{"breaker-probe": {"1"}})
	send(WithRequestKey(context.Background(), ""), "/status/200", http.Header{ProbeHeader: {"1"}})
	assert.Equal(t, []string{"", "", ""}, d.probeHeaders())
	assert.Zero(t, f.group.Len(), "the requests were unguarded")
}

// A request guarded by a closed breaker, sent inside another breaker's
// half-open probe (a breaker around a function that makes the request),
// used to carry Breaker-Probe: 1 because its context carried the outer
// probe's mark. It carries no header now.
func TestTransport_NoProbeHeaderInsideAnotherBreakersProbe(t *testing.T) {
	d := newDownstream(t)
	f := newFixture(t, testutil.Policy())
	require.NoError(t, testutil.InsideAProbe(t, f.clk, func(ctx context.Context) error {
		_, err := f.get(ctx, d.URL+"/status/200")
		return err
	}))
	assert.Equal(t, []string{""}, d.probeHeaders())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(f.breaker(d)))
}

// A caller's header map may hold the probe header under a key that is not
// canonical, req.Header["breaker-probe"] (a proxy copying an inbound
// request, or code that fills the map by hand); net/http sends such a key
// as it is and the server canonicalizes it. Every casing is stripped from
// ordinary requests, a probe carries exactly one canonical "1", and the
// caller's header map is left as it was.
// Regression (23342f2): the request arrived as a probe while the breaker
// was closed, and a real probe carried the caller's value beside the "1".
func TestTransport_ProbeHeaderStrippedUnderAnyCase(t *testing.T) {
	var mu sync.Mutex
	var seen [][]string // every Breaker-Probe value of each request, in order
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Values(ProbeHeader))
		mu.Unlock()
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	f := newFixture(t, testutil.Policy())
	b, err := f.group.Get(srv.Listener.Addr().String())
	require.NoError(t, err)

	send := func(path string, h http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		before := req.Header.Clone()
		resp, err := f.client.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, before, req.Header, "the caller's request was modified")
	}
	send("/", http.Header{"breaker-probe": {"1"}})
	send("/", http.Header{"BREAKER-PROBE": {"1"}, "X-Other": {"kept"}})
	send("/", http.Header{"breaker-probe": {"1"}, ProbeHeader: {"1"}})
	for i := 0; i < 3; i++ { // 3 of 6 failed: trips at MinRequests 4, ratio 0.5
		send("/fail", nil)
	}
	require.Equal(t, breaker.Open, b.State())
	f.clk.Add(10 * time.Second)
	send("/", http.Header{"breaker-probe": {"0"}})
	send("/", http.Header{"bReAkEr-PrObE": {"0", "2"}})
	assert.Equal(t, breaker.Closed, b.State())

	mu.Lock()
	defer mu.Unlock()
	want := [][]string{nil, nil, nil, nil, nil, nil, {"1"}, {"1"}}
	assert.Equal(t, want, seen)
}

// A probe that times out fails the half-open episode: the breaker reopens
// with a doubled cooldown, and refuses without touching the network again.
func TestTransport_ProbeTimeoutReopens(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	for i := 0; i < 4; i++ {
		_, _ = f.get(context.Background(), d.URL+"/status/503")
	}
	require.Equal(t, breaker.Open, b.State())
	f.clk.Add(10 * time.Second)

	_, err := f.getTimeout(20*time.Millisecond, d.URL+"/hang")
	require.Error(t, err)
	require.NotErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, breaker.Open, b.State())
	c := b.Counters()
	assert.Equal(t, uint64(1), c.ProbesFailed)
	assert.Equal(t, uint64(2), c.Opens)

	hits := d.hits.Load()
	_, err = f.get(context.Background(), d.URL+"/status/200")
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, breaker.ReasonProbeFailed, oe.Reason)
	assert.Equal(t, 20*time.Second, oe.RetryAfter(), "cooldown doubled")
	assert.Equal(t, hits, d.hits.Load())
	assert.Equal(t, []string{"", "", "", "", "1"}, d.probeHeaders())
}

// A caller that gives up on a probe gives no verdict: the slot is freed
// for the next call.
func TestTransport_CancelledProbeFreesItsSlot(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	for i := 0; i < 4; i++ {
		_, _ = f.get(context.Background(), d.URL+"/status/500")
	}
	f.clk.Add(10 * time.Second)
	for range 4 {
		<-d.arrived
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-d.arrived
		cancel()
	}()
	_, err := f.get(ctx, d.URL+"/hang")
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, breaker.HalfOpen, b.State())
	assert.Equal(t, uint64(1), b.Counters().Ignored)

	for i := 0; i < 2; i++ {
		_, err := f.get(context.Background(), d.URL+"/status/200")
		require.NoError(t, err)
	}
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, []string{"", "", "", "", "1", "1", "1"}, d.probeHeaders())
}

// A request refused by the breaker, or one that fails in the transport,
// still has its body closed, exactly once; the network is not touched for
// the refused one.
func TestTransport_ClosesRequestBodies(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)
	require.NoError(t, b.SetMode(breaker.ModeForcedOpen))

	post := func(url string) (*requestBody, error) {
		body := &requestBody{Reader: strings.NewReader("payload")}
		req, err := http.NewRequest(http.MethodPost, url, body)
		require.NoError(t, err)
		resp, err := f.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return body, err
	}

	body, err := post(d.URL + "/status/200")
	require.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, int32(1), body.closes.Load(), "refused request body closes")
	assert.Zero(t, f.base.calls.Load())
	assert.Zero(t, d.hits.Load())

	body, err = post("http://" + testutil.RefusedAddr(t) + "/")
	require.Error(t, err)
	assert.Equal(t, int32(1), body.closes.Load(), "failed request body closes")

	// A caller whose context is already done is not counted and its body
	// is closed.
	require.NoError(t, b.SetMode(breaker.ModeAuto))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body = &requestBody{Reader: strings.NewReader("payload")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL+"/status/200", body)
	require.NoError(t, err)
	_, err = f.tr.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), body.closes.Load())
	assert.Zero(t, d.hits.Load())
}

// Response bodies: the Transport never closes one it returns; a caller's
// Close reaches the underlying body exactly once, however often it is
// called; and a response that comes with an error is closed by the
// Transport, since the caller never sees it.
func TestTransport_ResponseBodiesNeverLeak(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)

	for _, path := range []string{"/status/200", "/status/404", "/status/500", "/status/503"} {
		resp, err := f.client.Get(d.URL + path)
		require.NoError(t, err)
		bodies := f.base.closes()
		assert.Zero(t, bodies[len(bodies)-1], "%s: closed before the caller was done", path)
		_, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, resp.Body.Close())
	}
	assert.Equal(t, []int32{1, 1, 1, 1}, f.base.closes())
	assert.Equal(t, testutil.Outcomes{Successes: 1, Ignored: 1, Failures: 2}, testutil.OutcomesOf(b))

	// A base that breaks the contract and returns a response with an
	// error.
	leaky := &countingBody{ReadCloser: io.NopCloser(strings.NewReader("x"))}
	bad := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 502, Body: leaky}, errors.New("proxy: upstream hung up")
	})
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)
	resp, err := New(bad, g).RoundTrip(req)
	require.Error(t, err)
	assert.Nil(t, resp)
	assert.Equal(t, int32(1), leaky.closes.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The call ends when the body does, so a Policy.CallTimeout deadline stays
// alive while the caller reads: a body sent after RoundTrip has returned
// is read in full, and counted once, when it ends.
func TestTransport_BodyReadableAfterRoundTripWithTimeout(t *testing.T) {
	p := testutil.Policy()
	p.CallTimeout = time.Minute // on the mock clock: never fires, but the deadline's cancel would
	f := newFixture(t, p)
	d := newDownstream(t)
	b := f.breaker(d)

	resp, err := f.client.Get(d.URL + "/big")
	require.NoError(t, err)
	assert.Equal(t, uint64(0), b.Counters().Admitted, "counted before the body was read")
	close(d.release)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Len(t, data, bigBody)
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(b), "counted at the end of the body")
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(b), "counted twice")
}

// The same on the real clock, with a deadline that would fire if it
// outlived the call: the body of a fast response arrives after RoundTrip
// returns and is read in full well inside Policy.CallTimeout.
func TestTransport_BodyReadableAfterRoundTripWithRealTimeout(t *testing.T) {
	p := testutil.Policy()
	p.CallTimeout = 5 * time.Second
	f := newFixtureWith(t, p, nil)
	d := newDownstream(t)
	b := f.breaker(d)

	resp, err := f.client.Get(d.URL + "/big")
	require.NoError(t, err)
	close(d.release)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Len(t, data, bigBody)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(b))
}

// A caller that stops reading early and closes ends the call with the
// response's own outcome.
func TestTransport_EarlyCloseCountsTheStatus(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	d := newDownstream(t)
	b := f.breaker(d)

	resp, err := f.client.Get(d.URL + "/big")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(b))
}

// Keys: the default is the host; WithKey can split a host into routes;
// a key of "" sends the request unguarded.
func TestTransport_Keys(t *testing.T) {
	d := newDownstream(t)
	route := func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/status/") {
			return r.URL.Host + " GET /status/{code}"
		}
		return ""
	}
	f := newFixture(t, testutil.Policy(), WithKey(route))
	_, err := f.get(context.Background(), d.URL+"/status/200")
	require.NoError(t, err)
	_, err = f.get(context.Background(), d.URL+"/other")
	require.NoError(t, err)

	var keys []string
	f.group.Range(func(k string, _ *breaker.Breaker) bool {
		keys = append(keys, k)
		return true
	})
	assert.Equal(t, []string{d.Listener.Addr().String() + " GET /status/{code}"}, keys)
	assert.Equal(t, int64(2), f.base.calls.Load())

	f = newFixture(t, testutil.Policy())
	_, err = f.get(context.Background(), d.URL+"/status/200")
	require.NoError(t, err)
	assert.Equal(t, 1, f.group.Len())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(f.breaker(d)))
}

// Two requests to the same host whose contexts carry different keys go to
// two breakers: tripping one refuses its key only. The context's key beats
// the transport's key function, and "" from the context sends the request
// on unguarded even where the key function would guard it.
func TestTransport_RequestKeyWinsOverTheKeyFunction(t *testing.T) {
	d := newDownstreamAt(t, "127.0.0.1:0")
	f := newFixture(t, testutil.Policy(), WithKey(func(r *http.Request) string { return "by-function" }))
	stock := WithRequestKey(context.Background(), "inventory.GetStock")
	price := WithRequestKey(context.Background(), "inventory.GetPrice")

	for i := 0; i < 4; i++ {
		code, err := f.get(stock, d.URL+"/status/503")
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
	f.clk.Add(time.Second)
	_, err := f.get(stock, d.URL+"/status/200")
	require.ErrorIs(t, err, breaker.ErrOpen, "the tripped key must refuse")
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "inventory.GetStock", oe.Name)

	code, err := f.get(price, d.URL+"/status/200")
	require.NoError(t, err, "a neighbour's trip must not refuse another key")
	assert.Equal(t, http.StatusOK, code)

	stockB, ok := f.group.Lookup("inventory.GetStock")
	require.True(t, ok)
	priceB, ok := f.group.Lookup("inventory.GetPrice")
	require.True(t, ok)
	assert.Equal(t, breaker.Open, stockB.State())
	assert.Equal(t, breaker.Closed, priceB.State())
	assert.Equal(t, testutil.Outcomes{Successes: 1}, testutil.OutcomesOf(priceB))
	_, ok = f.group.Lookup("by-function")
	assert.False(t, ok, "the key function must not be asked when the context names a key")

	// The innermost key wins, and "" means unguarded.
	inner := WithRequestKey(stock, "inventory.GetPrice")
	_, err = f.get(inner, d.URL+"/status/200")
	require.NoError(t, err)
	assert.Equal(t, testutil.Outcomes{Successes: 2}, testutil.OutcomesOf(priceB))
	hits := d.hits.Load()
	_, err = f.get(WithRequestKey(stock, ""), d.URL+"/status/200")
	require.NoError(t, err)
	assert.Equal(t, hits+1, d.hits.Load(), "an unguarded request reaches the server")
	assert.Equal(t, 2, f.group.Len())

	// Without a key on the context the key function decides.
	_, err = f.get(context.Background(), d.URL+"/status/200")
	require.NoError(t, err)
	_, ok = f.group.Lookup("by-function")
	assert.True(t, ok)
}

func TestWithRequestKey_NilContextIsBackground(t *testing.T) {
	ctx := WithRequestKey(nil, "k") //nolint:staticcheck // the nil is the point
	key, ok := requestKey(ctx)
	assert.True(t, ok)
	assert.Equal(t, "k", key)
	_, ok = requestKey(context.Background())
	assert.False(t, ok)
}

// A replaced classifier decides every row but the caller's cancellation.
func TestTransport_WithClassifier(t *testing.T) {
	strict := func(resp *http.Response, err error) breaker.Outcome {
		if err == nil && resp.StatusCode == http.StatusNotFound {
			return breaker.Failure // a route that vanished in a bad deploy
		}
		return DefaultClassify(resp, err)
	}
	f := newFixture(t, testutil.Policy(), WithClassifier(strict))
	d := newDownstream(t)
	b := f.breaker(d)

	_, err := f.get(context.Background(), d.URL+"/status/404")
	require.NoError(t, err)
	assert.Equal(t, testutil.Outcomes{Failures: 1}, testutil.OutcomesOf(b))

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-d.arrived
		<-d.arrived
		cancel()
	}()
	_, err = f.get(ctx, d.URL+"/hang")
	require.Error(t, err)
	assert.Equal(t, testutil.Outcomes{Failures: 1, Ignored: 1}, testutil.OutcomesOf(b))
}

// A refused connection that a user classifier calls a Failure is counted
// as one, not turned back into a Timeout by the group's default
// classifier, which would find the syscall error inside.
func TestTransport_ClassifierOutcomeIsFinal(t *testing.T) {
	f := newFixture(t, testutil.Policy(), WithClassifier(func(*http.Response, error) breaker.Outcome {
		return breaker.Failure
	}))
	host := testutil.RefusedAddr(t)
	_, err := f.get(context.Background(), "http://"+host+"/")
	require.Error(t, err)
	b, err := f.group.Get(host)
	require.NoError(t, err)
	assert.Equal(t, testutil.Outcomes{Failures: 1}, testutil.OutcomesOf(b))
}

// A base that returns neither a response nor an error, or panics, still
// ends the call.
func TestTransport_MisbehavingBase(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)

	nothing := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	resp, err := New(nothing, g).RoundTrip(req)
	assert.Nil(t, resp)
	require.Error(t, err)

	panicky := roundTripFunc(func(*http.Request) (*http.Response, error) { panic("base bug") })
	assert.PanicsWithValue(t, "base bug", func() { _, _ = New(panicky, g).RoundTrip(req) })

	b, err := g.Get("downstream.test")
	require.NoError(t, err)
	assert.Equal(t, testutil.Outcomes{Timeouts: 1, Failures: 1}, testutil.OutcomesOf(b))

	_, err = New(nothing, nil).RoundTrip(req)
	require.Error(t, err)
}

// Many goroutines through one Transport, for the race detector: every
// call is counted exactly once, as an outcome or a refusal.
func TestTransport_Concurrent(t *testing.T) {
	p := testutil.Policy()
	p.MinRequests = 1000 // stays closed: every call is counted
	f := newFixture(t, p)
	d := newDownstream(t)
	paths := []string{"/status/200", "/status/404", "/status/500"}
	const workers, each = 8, 15
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := f.get(context.Background(), d.URL+paths[(w+i)%len(paths)])
				assert.NoError(t, err)
			}
		}(w)
	}
	wg.Wait()
	c := f.breaker(d).Counters()
	assert.Equal(t, uint64(workers*each), c.Admitted)
	assert.Equal(t, uint64(workers*each/3), c.Successes)
	assert.Equal(t, uint64(workers*each/3), c.Ignored)
	assert.Equal(t, uint64(workers*each/3), c.Failures)
}

// nopBody is a response body that allocates nothing to read or close.
type nopBody struct{}

func (nopBody) Read([]byte) (int, error) { return 0, io.EOF }
func (nopBody) Close() error             { return nil }

// TestTransport_AddsAtMostTwoAllocationsPerRequest: in the closed state
// the Transport adds two allocations to a request with a body (Allow's
// done, and the body that ends the call), and sends the caller's request
// itself: it used to copy it with WithContext on every request, a third
// allocation of some 250 bytes.
func TestTransport_AddsAtMostTwoAllocationsPerRequest(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	resp := &http.Response{StatusCode: http.StatusOK}
	var sent *http.Request
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		resp.Body = nopBody{}
		return resp, nil
	}), g)
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(200, func() {
		got, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = got.Body.Read(nil)
		got.Body.Close()
	})
	assert.LessOrEqual(t, allocs, 2.0, "allocations the Transport adds to a request")
	assert.Same(t, req, sent, "the caller's request is sent as it is")
}
