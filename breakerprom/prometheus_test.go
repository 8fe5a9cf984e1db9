package breakerprom

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/require"
)

// promWait bounds every wait on the Prometheus server: a failing test
// fails after it instead of hanging.
const promWait = 30 * time.Second

// promServer is the test's own Prometheus (testutil.StartPrometheus),
// scraping one target and evaluating rules every scrapeEvery.
type promServer struct{ *testutil.Prometheus }

// scrapeEvery is how often the test's Prometheus scrapes and evaluates:
// short, so that the test takes seconds.
const scrapeEvery = 250 * time.Millisecond

func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := needTool(t, "prometheus", "prometheus")
	return &promServer{testutil.StartPrometheus(t, bin, "shop", target, nil, scrapeEvery, promWait)}
}

// promSeries is one series of a query's result: its labels, and its
// values as [unix seconds, "value"] pairs (one for an instant query).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

func (p *promServer) api(path string, params url.Values) []promSeries {
	p.T.Helper()
	var data struct {
		Result []promSeries `json:"result"`
	}
	p.API(path, params, &data)
	return data.Result
}

// query runs an instant query.
func (p *promServer) query(q string) []promSeries {
	p.T.Helper()
	return p.api("/api/v1/query", url.Values{"query": {q}})
}

// queryRange runs a range query from start to end, a step a scrape.
func (p *promServer) queryRange(q string, start, end time.Time) []promSeries {
	p.T.Helper()
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
