package breakerhttp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Every test closes its own transports; this catches a test that
		// fell back on the default one.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// downstream is a real HTTP server on loopback whose behaviour is chosen by
// the request path:
//
//	/status/N    answers status N with a short body
//	/redirect/N  redirects (302) to /status/N
//	/empty/N     answers status N with no body (Content-Length: 0)
//	/hang        waits until the client goes away
//	/reset       resets the connection (RST) without answering
//	/truncate    promises 100 bytes of body, sends 3, closes
//	/stall       sends headers and part of the body, then waits for the client to go
//	/big         sends headers, waits for release, then 256 KiB
//
// It counts requests and records the Breaker-Probe header of each.
type downstream struct {
	*httptest.Server
	hits    atomic.Int64
	arrived chan string // path of each request, as it starts
	release chan struct{}

	mu     sync.Mutex
	probes []string // Breaker-Probe header of each request, in order
}

const bigBody = 256 << 10

func newDownstream(t *testing.T) *downstream {
	d := &downstream{arrived: make(chan string, 1024), release: make(chan struct{})}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

// newDownstreamAt is newDownstream listening on addr.
func newDownstreamAt(t *testing.T, addr string) *downstream {
	t.Helper()
	d := &downstream{arrived: make(chan string, 1024), release: make(chan struct{})}
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	d.Server = httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	d.Server.Listener.Close()
	d.Server.Listener = l
	d.Start()
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	d.hits.Add(1)
	d.mu.Lock()
	d.probes = append(d.probes, r.Header.Get(ProbeHeader))
	d.mu.Unlock()
	d.arrived <- r.URL.Path
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/status/"):
		code, _ := strconv.Atoi(strings.TrimPrefix(p, "/status/"))
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/status/200")
		}
		w.WriteHeader(code)
		if code != http.StatusNoContent && code != http.StatusNotModified {
			fmt.Fprintf(w, "status %d\n", code)
		}
	case strings.HasPrefix(p, "/empty/"):
		code, _ := strconv.Atoi(strings.TrimPrefix(p, "/empty/"))
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(code)
	case strings.HasPrefix(p, "/redirect/"):
		http.Redirect(w, r, "/status/"+strings.TrimPrefix(p, "/redirect/"), http.StatusFound)
	case p == "/hang":
		<-r.Context().Done()
	case p == "/reset":
		resetConn(w, r)
	case p == "/truncate":
		truncated(w, r)
	case p == "/stall":
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "abc")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case p == "/big":
		w.Header().Set("Content-Length", strconv.Itoa(bigBody))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-d.release:
		case <-r.Context().Done():
			return
		}
		bw := bufio.NewWriter(w)
		for i := 0; i < bigBody; i++ {
			bw.WriteByte(byte('a' + i%26))
		}
		bw.Flush()
	default:
		http.NotFound(w, r)
	}
}

// probeHeaders returns the Breaker-Probe header of every request so far.
func (d *downstream) probeHeaders() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.probes...)
}

// countingBase is a base RoundTripper that counts the requests it is given
// and the Close calls on every response body it hands out.
type countingBase struct {
	rt    http.RoundTripper
	calls atomic.Int64

	mu     sync.Mutex
	bodies []*countingBody
}

type countingBody struct {
	io.ReadCloser
	closes atomic.Int32
}

func (c *countingBody) Close() error {
	c.closes.Add(1)
	return c.ReadCloser.Close()
}

func (c *countingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	resp, err := c.rt.RoundTrip(r)
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		cb := &countingBody{ReadCloser: resp.Body}
		resp.Body = cb
		c.mu.Lock()
		c.bodies = append(c.bodies, cb)
		c.mu.Unlock()
	}
	return resp, err
}

// closes returns the Close count of every response body handed out.
func (c *countingBase) closes() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := make([]int32, len(c.bodies))
	for i, b := range c.bodies {
		n[i] = b.closes.Load()
	}
	return n
}

func (c *countingBase) CloseIdleConnections() {
	c.rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
}

// requestBody is a request body that counts Close calls.
type requestBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *requestBody) Close() error {
	b.closes.Add(1)
	return nil
}

// fixture is a client whose Transport guards a real base transport with a
// group on a mock clock.
type fixture struct {
	t      *testing.T
	clk    *clock.Mock
	group  *breaker.Group
	base   *countingBase
	tr     *Transport
	client *http.Client
}

func newFixture(t *testing.T, p breaker.Policy, opts ...Option) *fixture {
	t.Helper()
	return newFixtureWith(t, p, testutil.NewClock(), opts...)
}

// newFixtureWith builds a fixture on clk; a nil clk is the real clock.
func newFixtureWith(t *testing.T, p breaker.Policy, clk *clock.Mock, opts ...Option) *fixture {
	t.Helper()
	var bopts []breaker.Option
	if clk != nil {
		bopts = append(bopts, breaker.WithClock(clk))
	}
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, bopts...)
	require.NoError(t, err)
	base := &countingBase{rt: &http.Transport{}}
	tr := New(base, g, opts...)
	t.Cleanup(tr.CloseIdleConnections)
	return &fixture{
		t: t, clk: clk, group: g, base: base, tr: tr,
		client: &http.Client{
			Transport: tr,
			// 3xx is a row of its own; following it would add a second call.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// breaker returns the group's breaker for a server's host.
func (f *fixture) breaker(d *downstream) *breaker.Breaker {
	f.t.Helper()
	b, err := f.group.Get(d.Listener.Addr().String())
	require.NoError(f.t, err)
	return b
}

// get sends GET url with ctx, reads and closes the body, and returns the
// status (0 if no response came) and the error of the request or, failing
// that, of reading the body.
func (f *fixture) get(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(f.t, err)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// getTimeout is get with a context that times out after d.
func (f *fixture) getTimeout(d time.Duration, url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.get(ctx, url)
}
