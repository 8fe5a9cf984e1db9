package breakerprom

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// promWait bounds every wait on the Prometheus server: a failing test
// fails after it instead of hanging.
const promWait = 30 * time.Second

// promServer is a prometheus process of the test's own, on a free
// loopback port, with its storage in a temporary directory, scraping
// one target every scrape and evaluating rules as often.
type promServer struct {
	t      *testing.T
	base   string
	client *http.Client
}

// scrapeEvery is how often the test's Prometheus scrapes and evaluates:
// short, so that the test takes seconds.
const scrapeEvery = 250 * time.Millisecond

func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := needTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: shop
    static_configs:
      - targets: [%[2]q]
`, promDuration(scrapeEvery), target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out lockedBuffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	p := &promServer{t: t, base: "http://" + addr, client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		p.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	p.eventually("ready", func() (bool, string) {
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// eventually polls cond until it holds, failing the test with cond's
// last word after promWait.
func (p *promServer) eventually(what string, cond func() (bool, string)) {
	p.t.Helper()
	deadline := time.Now().Add(promWait)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prometheus: no %s after %v; last: %s", what, promWait, last)
		}
		time.Sleep(scrapeEvery / 2)
	}
}

// promSeries is one series of a query's result: its labels, and its
// values as [unix seconds, "value"] pairs (one for an instant query).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

func (p *promServer) api(path string, params url.Values) []promSeries {
	p.t.Helper()
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	require.NoError(p.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	var env struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	require.NoError(p.t, json.Unmarshal(body, &env), "%s: %s", path, body)
	require.Equal(p.t, "success", env.Status, "%s %v: %s", path, params, env.Error)
	return env.Data.Result
}

// query runs an instant query.
func (p *promServer) query(q string) []promSeries {
	p.t.Helper()
	return p.api("/api/v1/query", url.Values{"query": {q}})
}

// queryRange runs a range query from start to end, a step a scrape.
func (p *promServer) queryRange(q string, start, end time.Time) []promSeries {
	p.t.Helper()
	return p.api("/api/v1/query_range", url.Values{"query": {q},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1e3, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1e3, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(scrapeEvery.Seconds(), 'f', 3, 64)}})
}

// sampleTime and sampleValue read a [unix seconds, "value"] pair.
func sampleTime(v [2]any) time.Time {
	f, _ := v[0].(float64)
	return time.UnixMilli(int64(f * 1e3))
}

func sampleValue(v [2]any) float64 {
	s, _ := v[1].(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// swappable serves whatever handler it holds now: the same address
// before and after a restart of the service behind it.
type swappable struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *swappable) set(h http.Handler) { s.mu.Lock(); s.h = h; s.mu.Unlock() }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// newTarget serves h on 127.0.0.1 for Prometheus to scrape, and returns
// its address and the switch a restart flips.
func newTarget(t *testing.T, h http.Handler) (string, *swappable) {
	t.Helper()
	sw := &swappable{h: h}
	srv := httptest.NewServer(sw)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u.Host, sw
}

// lockedBuffer is the output of a process the test reads while it
// writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
