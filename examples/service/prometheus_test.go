package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/require"
)

// e2eWait bounds every wait on the Prometheus server. The whole test
// takes about ten seconds; a failing one fails after this instead of
// hanging.
const e2eWait = 45 * time.Second

// promServer is the test's own Prometheus (testutil.StartPrometheus).
type promServer struct{ *testutil.Prometheus }

// startPrometheusEvery runs prometheus with the rules, scraping target
// and evaluating the rules every interval, and stops it when the test
// ends.
func startPrometheusEvery(t *testing.T, bin, target string, rules []byte, every time.Duration) *promServer {
	t.Helper()
	return &promServer{testutil.StartPrometheus(t, bin, "service", target, rules, every, e2eWait)}
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

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns the vector.
func (p *promServer) query(q string) []sample {
	p.T.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.API("/api/v1/query", url.Values{"query": {q}}, &data)
	if data.ResultType != "vector" {
		return nil
	}
	var v []sample
	require.NoError(p.T, json.Unmarshal(data.Result, &v))
	return v
}

// alert is one entry of /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	// ActiveAt is when the alert's condition began to hold: the same for
	// as long as it is one alert.
	ActiveAt time.Time `json:"activeAt"`
}

func (p *promServer) alerts() []alert {
	p.T.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	p.API("/api/v1/alerts", nil, &data)
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
	p.T.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	p.API("/api/v1/query_range", url.Values{"query": {q},
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
