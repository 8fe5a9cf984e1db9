package breakerprom

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const shippedDashboard = "dashboards/breaker.json"

// dashboardQuery is one PromQL expression of the dashboard, where it is
// used and the expression as Prometheus would receive it once Grafana has
// put in its variables.
type dashboardQuery struct {
	where, raw, expr string
}

// grafanaVars are values for the variables the dashboard's queries use,
// as Grafana would put them in: every job and breaker, a one-minute rate
// interval, a three-hour range.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "30s",
	"$__range", "3h",
	"$job", ".*",
	"$name", ".*",
)

// dashboardQueries returns every PromQL expression of the shipped
// dashboard: the panels' targets, the annotations, and the metric
// selectors of the template variables (label_values(selector, label) is
// Grafana's, not PromQL; its selector is).
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(shippedDashboard)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
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
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	var qs []dashboardQuery
	add := func(where, raw string) {
		expr := grafanaVars.Replace(raw)
		require.NotContains(t, expr, "$", "%s: a variable the test does not know: %s", where, raw)
		qs = append(qs, dashboardQuery{where, raw, expr})
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q target %d has no expression", p.Title, i)
			add(fmt.Sprintf("panel %q target %d", p.Title, i), tg.Expr)
		}
	}
	for _, a := range dash.Annotations.List {
		if a.Expr != "" {
			add(fmt.Sprintf("annotation %q", a.Name), a.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(map[string]any)
		require.True(t, ok, "variable %s: query is not an object", v.Name)
		m := labelValues.FindStringSubmatch(q["query"].(string))
		require.NotNil(t, m, "variable %s: %v is not label_values(selector, label)", v.Name, q["query"])
		add("variable "+v.Name, m[1])
	}
	return qs
}

// Every PromQL expression of the dashboard is valid: promtool checks them
// all, written as recording rules.
func TestDashboard_PromtoolChecksEveryQuery(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	qs := dashboardQueries(t)
	require.Greater(t, len(qs), 15)
	var sb strings.Builder
	sb.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range qs {
		expr, err := json.Marshal(q.expr) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&sb, "      # %s\n      - record: dashboard:query_%d\n        expr: %s\n", q.where, i, expr)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o644))
	out := runTool(t, promtool, "check", "rules", path)
	assert.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(qs)))
}

// The dashboard reads only families the collector exposes (and ALERTS,
// Prometheus's own series of the alerting rules), so renaming a metric
// without updating the dashboard fails here.
func TestDashboard_QueriesOnlyTheCollectorsFamilies(t *testing.T) {
	families := map[string]bool{"ALERTS": true}
	ch := make(chan *prometheus.Desc, 64)
	NewCollector(nil).Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		families[fqName.FindStringSubmatch(d.String())[1]] = true
	}
	metric := regexp.MustCompile(`\b(breaker_[a-z_]+|ALERTS)\b`)
	used := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		for _, m := range metric.FindAllString(q.expr, -1) {
			assert.True(t, families[m], "%s reads %s, which the collector does not expose", q.where, m)
			used[m] = true
		}
	}
	var unused []string
	for f := range families {
		if !used[f] {
			unused = append(unused, f)
		}
	}
	sort.Strings(unused)
	// Not every family needs a panel; these are the ones left out, on
	// purpose: the mode and the reason are in the alerts' labels, when a
	// policy was applied is in the version panel's changes, the last
	// reload's result in the reloads panel and an alert, a candidate's
	// transitions, differences and would-admit counts are details of the
	// two candidate series shown, the outage's passed probes and the slow
	// rule's slow_call and counts are in the alerts' text beside the
	// ratios and the failures shown.
	assert.Equal(t, []string{
		"breaker_candidate_differences_total", "breaker_candidate_transitions_total",
		"breaker_candidate_would_admit_total", "breaker_mode", "breaker_open_reason",
		"breaker_outage_probes_passed",
		"breaker_policy_applied_timestamp_seconds", "breaker_policy_last_reload_info",
		"breaker_policy_slow_call_seconds", "breaker_trip_slow_call_seconds", "breaker_window_slow_calls",
	}, unused)
}

// The panels the operator's questions need are there, each on the data
// source variable, and panel ids are unique (Grafana links by id).
func TestDashboard_HasThePanelsAnOperatorNeeds(t *testing.T) {
	data, err := os.ReadFile(shippedDashboard)
	require.NoError(t, err)
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	assert.NotEmpty(t, dash.UID)
	ids := map[int]bool{}
	titles := map[string]string{}
	for _, p := range dash.Panels {
		assert.False(t, ids[p.ID], "panel id %d used twice", p.ID)
		ids[p.ID] = true
		titles[p.Title] = p.Type
		if p.Type != "row" {
			require.NotNil(t, p.Datasource, "panel %q", p.Title)
			assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q", p.Title)
		}
	}
	for title, typ := range map[string]string{
		"State per breaker":                                              "state-timeline",
		"Calls by outcome":                                               "timeseries",
		"Refusals and fallbacks":                                         "timeseries",
		"Probes apart from ordinary traffic":                             "timeseries",
		"Throttled calls and the refusal probability":                    "timeseries",
		"Current outage length":                                          "timeseries",
		"Time not closed in the range":                                   "bargauge",
		"Window error ratio against the threshold":                       "timeseries",
		"Window that tripped the breaker, for the outage":                "timeseries",
		"Window slow ratio against the threshold":                        "timeseries",
		"The outage in progress: trips, probes and refusals":             "timeseries",
		"Latency p99 over the window, and the share cut by the deadline": "timeseries",
		"Transitions":           "timeseries",
		"Breaker alerts firing": "table",
	} {
		assert.Equal(t, typ, titles[title], "panel %q", title)
	}
}

// dashboardExprs returns the dashboard's expressions by where they are
// used, with Grafana's variables put in for a Prometheus that scrapes
// every scrapeEvery: a rate interval of four scrapes.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", promDuration(4*scrapeEvery), "$__interval", promDuration(scrapeEvery),
		"$__range", "1m", "$job", ".*", "$name", ".*")
	out := map[string]string{}
	for _, q := range dashboardQueries(t) {
		out[q.where] = vars.Replace(q.raw)
	}
	return out
}

// episodes are the runs of a range query's points above 0, each by its
// first point's time: one per annotation Grafana would draw.
func episodes(series []promSeries, name string) []time.Time {
	var out []time.Time
	for _, s := range series {
		if s.Metric["name"] != name {
			continue
		}
		var last time.Time
		for _, v := range s.Values {
			at := sampleTime(v)
			if sampleValue(v) > 0 && (last.IsZero() || at.Sub(last) > 2*scrapeEvery) {
				out = append(out, at)
			}
			if sampleValue(v) > 0 {
				last = at
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// The dashboard against a real Prometheus scraping a group's Handler,
// across a breaker's first trip and a restart of the service: the "Breaker
// trips" annotation marks the first trip, not the restart, and the trip
// after it; the Transitions panel shows the trip; the panel of the
// tripping window has the trip's rule and window while the breaker is
// open. Each transition series used to appear at its first trip, at 1,
// and the annotation and the panel showed nothing of it.
func TestDashboard_TripAnnotationAndPanelsAcrossAFirstTripAndARestart(t *testing.T) {
	f := newFixture(t)
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	f.Calls(pricing, 1, nil)
	target, sw := newTarget(t, h)
	p := startPrometheus(t, target)
	exprs := dashboardExprs(t)
	annotation := exprs[`annotation "Breaker trips"`]
	transitions := exprs[`panel "Transitions" target 0`]
	tripWindow := exprs[`panel "Window that tripped the breaker, for the outage" target 0`]
	require.NotEmpty(t, annotation)
	require.NotEmpty(t, transitions)
	require.NotEmpty(t, tripWindow)
	start := time.Now()

	// Scraped at 0 a few times, then the first trip.
	seen := func(what, q string, want float64) {
		t.Helper()
		p.Eventually(what, func() (bool, string) {
			v := p.query(q)
			return len(v) == 1 && sampleValue(v[0].Value) == want, fmt.Sprint(v)
		})
	}
	seen("the trip series at 0", `count_over_time(breaker_transitions_total{name="pricing.GetPrice", reason="error_ratio"}[5s]) >= 4`, 4)
	f.Calls(pricing, 1, nil)
	f.Calls(pricing, 2, errBoom) // 2 of 4: it trips
	require.Equal(t, breaker.Open, f.Breaker(pricing).State())
	seen("the first trip", `breaker_transitions_total{name="pricing.GetPrice", reason="error_ratio"}`, 1)
	p.Eventually("the Transitions panel", func() (bool, string) {
		v := p.query(transitions)
		for _, s := range v {
			if s.Metric["name"] == pricing && s.Metric["to"] == "open" && s.Metric["reason"] == "error_ratio" {
				return true, ""
			}
		}
		return false, fmt.Sprint(v)
	})
	v := p.query(tripWindow)
	require.Len(t, v, 1, "the tripping window while open")
	assert.Equal(t, map[string]string{"name": pricing, "reason": "error_ratio"}, v[0].Metric)
	assert.Equal(t, 4.0, sampleValue(v[0].Value))

	// The service restarts: a new group, whose breaker starts closed, its
	// counters at 0. The reset is no trip.
	time.Sleep(8 * scrapeEvery)
	restarted := time.Now()
	f2 := newFixture(t)
	h2, err := NewHandler(f2.Group, nil)
	require.NoError(t, err)
	f2.Calls(pricing, 1, nil)
	sw.set(h2)
	seen("the restart", `breaker_transitions_total{name="pricing.GetPrice", reason="error_ratio"}`, 0)
	time.Sleep(8 * scrapeEvery)
	assert.Empty(t, p.query(tripWindow), "closed: no tripping window")

	// The first trip after the restart.
	tripped := time.Now()
	f2.Calls(pricing, 1, nil)
	f2.Calls(pricing, 2, context.DeadlineExceeded)
	require.Equal(t, breaker.Open, f2.Breaker(pricing).State())
	seen("the trip after the restart", `breaker_transitions_total{name="pricing.GetPrice", reason="error_ratio"}`, 1)
	time.Sleep(4 * scrapeEvery)

	var got []time.Time
	p.Eventually("two trip annotations", func() (bool, string) {
		got = episodes(p.queryRange(annotation, start, time.Now()), pricing)
		return len(got) == 2, fmt.Sprint(got)
	})
	assert.True(t, got[0].Before(restarted), "the first trip, before the restart: %v", got)
	assert.True(t, got[1].After(tripped.Add(-scrapeEvery)), "the second trip, after the restart and not at it: %v (restart %v, trip %v)",
		got, restarted, tripped)
}
