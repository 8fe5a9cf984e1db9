package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govkit/breaker/ops"
	breakerprom "github.com/govkit/breaker/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// e2eWait bounds every wait on the Prometheus server. The whole test
// takes about ten seconds; a failing one fails after this instead of
// hanging.
const e2eWait = 45 * time.Second

// promServer is a prometheus process of the test's own: on a free
// loopback port, with its storage in a temporary directory.
type promServer struct {
	t      *testing.T
	base   string
	out    *syncBuffer
	client *http.Client
}

// startPrometheus runs prometheus with the rules, scraping target every
// second and evaluating the rules every second, and stops it when the
// test ends.
func startPrometheus(t *testing.T, bin, target string, rules []byte) *promServer {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: service
    static_configs:
      - targets: [%q]
`, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))

	addr := freePort(t)
	p := &promServer{t: t, base: "http://" + addr, out: &syncBuffer{},
		client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
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
			t.Logf("prometheus output:\n%s", p.out)
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

// freePort returns a loopback address no one listens on. Another process
// could take it before prometheus does; on this test's scale that does
// not happen.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// eventually polls cond every 200ms until it holds, failing the test
// with cond's last word after e2eWait.
func (p *promServer) eventually(what string, cond func() (bool, string)) {
	p.t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prometheus: no %s after %v; last: %s", what, e2eWait, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// api calls the HTTP API and decodes its data, failing the test unless
// the status is success.
func (p *promServer) api(path string, params url.Values, data any) {
	p.t.Helper()
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	require.NoError(p.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	require.NoError(p.t, json.Unmarshal(body, &env), "%s: %s", path, body)
	require.Equal(p.t, "success", env.Status, "%s %v: %s", path, params, env.Error)
	require.NoError(p.t, json.Unmarshal(env.Data, data))
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns the vector.
func (p *promServer) query(q string) []sample {
	p.t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.api("/api/v1/query", url.Values{"query": {q}}, &data)
	if data.ResultType != "vector" {
		return nil
	}
	var v []sample
	require.NoError(p.t, json.Unmarshal(data.Result, &v))
	return v
}

// alert is one entry of /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

func (p *promServer) alerts() []alert {
	p.t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	p.api("/api/v1/alerts", nil, &data)
	return data.Alerts
}

// The whole operator's path with a real Prometheus: it scrapes the
// service's /metrics, inventory breaks, and the breaker's state series
// and the P3 alert of the shipped rules (thresholds scaled down from
// minutes to seconds) appear through Prometheus's HTTP API, with the
// labels an on-call engineer needs. Every query of the dashboard runs
// against the same server.
func TestService_PrometheusSeesTheOutageAndRaisesP3(t *testing.T) {
	bin := needTool(t, "prometheus", "prometheus")
	// The service on the real clock: Prometheus stamps samples with
	// its own time, and the open duration must grow with it.
	in := launch(&instance{t: t, logs: &syncBuffer{}}, nil)
	rules, err := breakerprom.AlertRules(breakerprom.AlertConfig{
		Thresholds: ops.Thresholds{P3: 2 * time.Second, P2: 10 * time.Minute, P1: 30 * time.Minute},
	})
	require.NoError(t, err)
	p := startPrometheus(t, bin, strings.TrimPrefix(in.base, "http://"), rules)

	// Healthy traffic, scraped: the breaker is there and closed.
	for i := 0; i < 3; i++ {
		in.product()
	}
	p.eventually("closed inventory breaker", func() (bool, string) {
		v := p.query(`breaker_state{job="service", name="inventory.GetStock", state="closed"} == 1`)
		return len(v) == 1, fmt.Sprint(v)
	})

	// Inventory breaks: ten failures trip its breaker (min_requests 10).
	in.fault("inventory=error")
	for i := 0; i < 10; i++ {
		code, body := in.get("/product?sku=42")
		require.Equal(t, http.StatusBadGateway, code, body)
	}
	code, _ := in.get("/product?sku=42")
	require.Equal(t, http.StatusServiceUnavailable, code, "the breaker is open")

	p.eventually("open inventory breaker", func() (bool, string) {
		v := p.query(`breaker_state{job="service", name="inventory.GetStock", state="open"} == 1`)
		return len(v) == 1, fmt.Sprint(v)
	})
	var p3 alert
	p.eventually("firing P3 alert", func() (bool, string) {
		all := p.alerts()
		for _, a := range all {
			if a.Labels["alertname"] == "BreakerOpen" && a.Labels["severity"] == "P3" && a.State == "firing" {
				p3 = a
				return true, ""
			}
		}
		return false, fmt.Sprint(all)
	})
	assert.Equal(t, "inventory.GetStock", p3.Labels["name"])
	assert.Equal(t, "inventory.GetStock", p3.Labels["method"])
	assert.Equal(t, "err_ratio", p3.Labels["reason"])
	assert.Equal(t, "service", p3.Labels["job"])
	assert.NotContains(t, p3.Labels, "target", "a per-method key has no target")
	assert.Contains(t, p3.Annotations["description"], "check the health of inventory.GetStock.")
	for _, a := range p.alerts() {
		assert.NotEqual(t, "pricing.GetPrice", a.Labels["name"], "pricing is healthy: %v", a)
		assert.NotContains(t, []string{"P2", "P1"}, a.Labels["severity"], "seconds open: %v", a)
	}

	// Every query of the dashboard runs, and those behind the panels on
	// an outage have data.
	for _, q := range dashboardQueries(t) {
		v := p.query(q.expr)
		switch q.title {
		case "State per breaker", "Current outage length", "Window error ratio against the threshold", "Open breakers":
			assert.NotEmpty(t, v, "%s: %s", q.title, q.expr)
		}
		if q.title == "Open breakers" && len(v) == 1 {
			assert.Equal(t, "1", v[0].Value[1], q.expr)
		}
	}
}

// dashboardQuery is one panel query of the shipped dashboard, with
// Grafana's variables put in.
type dashboardQuery struct{ title, expr string }

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile("../../prometheus/dashboards/breaker.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader(data)).Decode(&dash))
	vars := strings.NewReplacer("$__rate_interval", "5s", "$__interval", "5s", "$__range", "1m",
		"$job", "service", "$name", ".*")
	var qs []dashboardQuery
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, dashboardQuery{p.Title, vars.Replace(tg.Expr)})
		}
	}
	require.NotEmpty(t, qs)
	return qs
}
