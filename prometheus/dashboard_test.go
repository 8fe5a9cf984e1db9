package breakerprom

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

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
	// policy was applied is in the version panel's changes, and a
	// candidate's transitions, differences and would-admit counts are
	// details of the two candidate series shown.
	assert.Equal(t, []string{
		"breaker_candidate_differences_total", "breaker_candidate_transitions_total",
		"breaker_candidate_would_admit_total", "breaker_mode", "breaker_open_reason",
		"breaker_policy_applied_timestamp_seconds",
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
		"State per breaker":                        "state-timeline",
		"Calls by outcome":                         "timeseries",
		"Refusals and fallbacks":                   "timeseries",
		"Probes apart from ordinary traffic":       "timeseries",
		"Current outage length":                    "timeseries",
		"Time not closed in the range":             "bargauge",
		"Window error ratio against the threshold": "timeseries",
		"Breaker alerts firing":                    "table",
	} {
		assert.Equal(t, typ, titles[title], "panel %q", title)
	}
}
