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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// startPrometheusEvery runs prometheus with the rules, scraping target
// and evaluating the rules every interval, and stops it when the test
// ends.
func startPrometheusEvery(t *testing.T, bin, target string, rules []byte, every time.Duration) *promServer {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]dms
  scrape_timeout: %[1]dms
  evaluation_interval: %[1]dms
rule_files: [rules.yml]
scrape_configs:
  - job_name: service
    static_configs:
      - targets: [%[2]q]
`, every.Milliseconds(), target)
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

// dashboardQuery is one query of the shipped dashboard, a panel's or an
// annotation's ("annotation Breaker trips"), with Grafana's variables put
// in for a Prometheus that scrapes twice a second.
type dashboardQuery struct{ title, expr string }

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile("../../breakerprom/dashboards/breaker.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader(data)).Decode(&dash))
	vars := strings.NewReplacer("$__rate_interval", "2s", "$__interval", "500ms", "$__range", "1m",
		"$job", "service", "$name", ".*")
	var qs []dashboardQuery
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, dashboardQuery{p.Title, vars.Replace(tg.Expr)})
		}
	}
	for _, a := range dash.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, dashboardQuery{"annotation " + a.Name, vars.Replace(a.Expr)})
		}
	}
	require.NotEmpty(t, qs)
	return qs
}

// episodes runs q over [start, end], a point every half second, and
// returns the start of each run of points above 0 for the breaker named:
// one per annotation Grafana would draw.
func (p *promServer) episodes(q, name string, start, end time.Time) []time.Time {
	p.t.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	p.api("/api/v1/query_range", url.Values{"query": {q},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1e3, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1e3, 'f', 3, 64)},
		"step":  {"0.5"}}, &data)
	var out []time.Time
	for _, s := range data.Result {
		if s.Metric["name"] != name {
			continue
		}
		var last time.Time
		for _, v := range s.Values {
			f, _ := v[0].(float64)
			at := time.UnixMilli(int64(f * 1e3))
			if val, _ := v[1].(string); val == "0" {
				continue
			}
			if last.IsZero() || at.Sub(last) > time.Second {
				out = append(out, at)
			}
			last = at
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
