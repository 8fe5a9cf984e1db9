package breakerprom

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const shippedRules = "rules/breaker-alerts.yml"

// The shipped file is what AlertRules writes for the default config, so
// the file promtool tests below is the file users get, and its thresholds
// are ops.DefaultThresholds.
func TestAlertRules_ShippedFileIsGenerated(t *testing.T) {
	want, err := AlertRules(AlertConfig{})
	require.NoError(t, err)
	got, err := os.ReadFile(shippedRules)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s is stale: run go generate in the prometheus module", shippedRules)

	th := ops.DefaultThresholds()
	explicit, err := AlertRules(AlertConfig{Namespace: DefaultNamespace, Thresholds: th,
		FlapOpens: DefaultFlapOpens, FlapWindow: DefaultFlapWindow,
		ProbeFailures: DefaultProbeFailures, ProbeWindow: DefaultProbeWindow,
		ThrottleShare: DefaultThrottleShare, ThrottleWindow: DefaultThrottleWindow})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(explicit), "the zero config means the defaults")
	for _, s := range []string{"open_duration_seconds >= 60)", "open_duration_seconds >= 600)", "open_duration_seconds >= 1800)",
		"outage_probes_failed >= 3)", "outage_trips >= 3)"} {
		assert.Contains(t, string(got), s)
	}
}

// promtool accepts the shipped rules, and the rules for another namespace
// and for thresholds scaled down to seconds and below.
func TestAlertRules_PromtoolCheckRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	runTool(t, promtool, "check", "rules", shippedRules)
	dir := t.TempDir()
	for name, cfg := range map[string]AlertConfig{
		"namespaced.yml": {Namespace: "shop_breaker"},
		"scaled.yml": {Thresholds: ops.Thresholds{P3: 1500 * time.Millisecond, P2: 3 * time.Second, P1: 90 * time.Second},
			FlapOpens: 2, FlapWindow: 30 * time.Second, ProbeFailures: 1, ProbeWindow: 250 * time.Millisecond},
		"links.yml": {StatusURL: "http://{{ $labels.instance }}/status?q='it's'",
			DashboardURL: `https://grafana.example.com/d/govkit-breaker?var-name={{ $labels.name }}&x="#1"`},
	} {
		rules, err := AlertRules(cfg)
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, rules, 0o644))
		out := runTool(t, promtool, "check", "rules", path)
		assert.Contains(t, out, "SUCCESS: 8 rules found", name)
	}
}

// The unit tests of testdata/*_test.yml: every alert fires, leading with
// the evidence of the trip's rule, and resolves once what it names is
// over. outage_test.yml: a hard error outage whose answered probes close
// the breaker every other minute for 40 minutes, graded P3, P2 and P1 by
// the outage's length, each firing once and staying through the closes,
// with Flapping saying the probes pass on errors, all resolved when it
// settles; an alert whose labels stay when its first probe fails;
// ProbesFailing counting within one outage and resolving when it settles;
// a clean recovery; a flapping downstream; a process restart that counts
// nothing of the earlier process; two groups with const labels whose
// alerts each read their own breaker. breaker-alerts_test.yml: none for a
// forced-open or shadow breaker; throttling that counts the open
// breaker's refusals and does not flicker at its line; a refused policy
// push that a gone source does not resolve; a gone source.
func TestAlertRules_PromtoolTestRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	files, err := filepath.Glob("testdata/*_test.yml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2)
	out := runTool(t, promtool, append([]string{"test", "rules"}, files...)...)
	assert.Equal(t, len(files), strings.Count(out, "SUCCESS"), out)
}

// The parameters reach the expressions and the links the annotations:
// scaled to seconds, a breaker open for 2s is a P3 and for 4s a P2,
// under another namespace, each with the links to the status page and
// the dashboard; both resolve when the breaker closes.
func TestAlertRules_ScaledThresholdsFireAndCarryLinks(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	rules, err := AlertRules(AlertConfig{Namespace: "shop_breaker",
		Thresholds:   ops.Thresholds{P3: 2 * time.Second, P2: 4 * time.Second, P1: time.Minute},
		StatusURL:    "http://{{ $labels.instance }}/status",
		DashboardURL: "https://grafana.example.com/d/govkit-breaker?var-name={{ $labels.name }}"})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
	const links = ` Status page: http://10.0.0.3:8080/status Dashboard: https://grafana.example.com/d/govkit-breaker?var-name=orders.Create`
	const cause = `slow_ratio: 30 of 40 calls slower than 250ms (2 failed)`
	open := func(sev, action string) string {
		return `
          - exp_labels: {severity: ` + sev + `, name: orders.Create, method: orders.Create, instance: "10.0.0.3:8080"}
            exp_annotations:
              summary: 'Breaker orders.Create opened on ` + cause + `; an outage of 4s, 1 trip, 0 failed probes, now open'
              description: '` + sev + ` (` + action + `): the breaker orders.Create on 10.0.0.3:8080 opened on ` + cause + `. Its outage has lasted 4s, its closes included: 1 trip, 0 failed probes, 7 calls refused; now open. The breaker only stops the bleeding: check the health of orders.Create. This resolves when the outage settles: the breaker has stayed closed for the policy''s max_open_for.` + links + `'
              status_url: 'http://10.0.0.3:8080/status'
              dashboard_url: 'https://grafana.example.com/d/govkit-breaker?var-name=orders.Create'`
	}
	test := `
rule_files: [rules.yml]
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: 'shop_breaker_open_duration_seconds{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '0+1x5 0x4'
      - series: 'shop_breaker_state{name="orders.Create", state="open", instance="10.0.0.3:8080"}'
        values: '1x5 0x4'
      - series: 'shop_breaker_open_reason{name="orders.Create", reason="slow_ratio", instance="10.0.0.3:8080"}'
        values: '1x5 stale'
      - series: 'shop_breaker_trip_reason{name="orders.Create", reason="slow_ratio", instance="10.0.0.3:8080"}'
        values: '1x5 stale'
      - series: 'shop_breaker_trip_window_calls{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '40x5 stale'
      - series: 'shop_breaker_trip_window_failures{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '2x5 stale'
      - series: 'shop_breaker_trip_window_slow{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '30x5 stale'
      - series: 'shop_breaker_trip_slow_call_seconds{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '0.25x5 stale'
      - series: 'shop_breaker_outage_trips{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '1x5 stale'
      - series: 'shop_breaker_outage_refused{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '7x5 stale'
      - series: 'shop_breaker_mode{name="orders.Create", mode="auto", instance="10.0.0.3:8080"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 1s
        alertname: BreakerOpen
        exp_alerts: []
      - eval_time: 4s
        alertname: BreakerOpen
        exp_alerts:` + open("P3", "record") + open("P2", "page") + `
      - eval_time: 6s
        alertname: BreakerOpen
        exp_alerts: []
`
	path := filepath.Join(dir, "rules_test.yml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o644))
	runTool(t, promtool, "test", "rules", path)
}

// A link's template is parsed as Prometheus parses an annotation: one
// Prometheus accepts (its functions, $labels, $value, $externalLabels)
// makes a file promtool accepts; a typo, which made breaker-alerts write
// a file Prometheus then refused to load, is an error naming the field.
func TestAlertRules_RefusesALinkTemplatePrometheusWouldRefuse(t *testing.T) {
	good := AlertConfig{
		StatusURL:    `http://{{ $labels.instance | stripPort }}:8080/status?q={{ $value | humanize }}`,
		DashboardURL: `{{ $externalLabels.grafana }}/d/govkit-breaker?var-job={{ $labels.job }}&var-name={{ $labels.name }}&{{ if $labels.target }}var-target={{ reReplaceAll ":.*" "" $labels.target }}{{ end }}`,
	}
	rules, err := AlertRules(good)
	require.NoError(t, err)
	for _, bad := range []struct{ field, url, want string }{
		{"StatusURL", "http://{{ $label.instance }}/status", `undefined variable "$label"`},
		{"DashboardURL", "https://g/d/x?var-name={{ $labels.name | urlescape }}", `function "urlescape" not defined`},
		{"StatusURL", "http://{{ $labels.instance }/status", "unexpected"},
		{"DashboardURL", "https://g/d/x{{ end }}", "unexpected {{end}}"},
	} {
		cfg := AlertConfig{}
		if bad.field == "StatusURL" {
			cfg.StatusURL = bad.url
		} else {
			cfg.DashboardURL = bad.url
		}
		_, err := AlertRules(cfg)
		require.Error(t, err, bad.url)
		assert.ErrorContains(t, err, "AlertConfig."+bad.field, bad.url)
		assert.ErrorContains(t, err, bad.want, bad.url)
	}
	promtool := needTool(t, "promtool", "prometheus")
	path := filepath.Join(t.TempDir(), "links.yml")
	require.NoError(t, os.WriteFile(path, rules, 0o644))
	assert.Contains(t, runTool(t, promtool, "check", "rules", path), "SUCCESS: 8 rules found")
}

// The policy alerts have no breaker: their dashboard link selects every
// breaker, where $labels.name left an empty var-name= that selected
// none; the breaker alerts' links keep the breaker's name.
func TestAlertRules_APolicyAlertLinksToEveryBreaker(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	rules, err := AlertRules(AlertConfig{DashboardURL: "https://grafana.example.com/d/govkit-breaker?var-instance={{ $labels.instance }}&var-name={{ $labels.name }}"})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
	test := `
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'breaker_policy_info{origin="file:/b.json", version="v1", instance="a:9090"}'
        values: '1x3'
      - series: 'breaker_policy_rejected_info{origin="file:/b.json", version="v2", instance="a:9090"}'
        values: '1x3'
      - series: 'breaker_open_duration_seconds{name="pay", instance="a:9090"}'
        values: '0+60x3'
      - series: 'breaker_mode{name="pay", mode="auto", instance="a:9090"}'
        values: '1x3'
    alert_rule_test:
      - eval_time: 2m
        alertname: BreakerPolicyRejected
        exp_alerts:
          - exp_labels: {severity: P3, version: v2, origin: "file:/b.json", in_force: v1, instance: "a:9090"}
            exp_annotations:
              summary: 'Policy version v2 refused on a:9090; version v1 stays in force'
              description: 'The policy document version v2 from file:/b.json was refused on a:9090: its breakers keep running on version v1. The log record msg="breaker policy rejected", and the status page, name every bad field. This resolves when a valid document is delivered (applied, or the version in force put back); a source that is gone meanwhile does not resolve it. Dashboard: https://grafana.example.com/d/govkit-breaker?var-instance=a:9090&var-name=$__all'
              dashboard_url: 'https://grafana.example.com/d/govkit-breaker?var-instance=a:9090&var-name=$__all'
`
	path := filepath.Join(dir, "rules_test.yml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o644))
	runTool(t, promtool, "test", "rules", path)
	assert.Contains(t, string(rules), `dashboard_url: "https://grafana.example.com/d/govkit-breaker?var-instance={{ $labels.instance }}\u0026var-name={{ $labels.name }}"`,
		"a breaker alert's link is the template as given")
}

func TestAlertRules_BadConfigNamesEachField(t *testing.T) {
	_, err := AlertRules(AlertConfig{
		Namespace:     "shop-breaker",
		Thresholds:    ops.Thresholds{P3: time.Hour, P2: time.Minute, P1: time.Hour},
		FlapOpens:     -1,
		ProbeWindow:   time.Microsecond,
		ThrottleShare: -0.5,
		StatusURL:     "http://a/status\n- alert: Injected",
		DashboardURL:  "https://g/d/x?var-name={{ $labels.nme }",
	})
	require.Error(t, err)
	for _, s := range []string{"Namespace \"shop-breaker\"", "Thresholds", "FlapOpens -1", "ProbeWindow 1µs", "ThrottleShare -0.5", "StatusURL", "DashboardURL"} {
		assert.ErrorContains(t, err, s)
	}
	rules, err := AlertRules(AlertConfig{Thresholds: ops.Thresholds{P3: 1500 * time.Millisecond, P2: 90 * time.Second, P1: 2 * time.Hour}})
	require.NoError(t, err)
	assert.Contains(t, string(rules), ">= 1.5)")
	assert.Contains(t, string(rules), "P3 (record) after 1500ms, P2 (page) after 90s, P1 (escalate) after 2h.")
}

// The alerts lead with the trip's evidence in the words of
// breaker.Trip.String(), for every rule: the slow calls of a slow trip
// (it read "0 of 169 calls failed"), the run of a consecutive one, the
// failures and timeouts of a ratio one, the reason alone of a forced
// open. Each breaker's series are the trip's fields as the collector
// writes them.
func TestAlertRules_LeadWithTheWordsOfTripString(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	trips := map[string]breaker.Trip{
		"a.Ratio":       {Reason: breaker.ReasonErrorRatio, Window: breaker.Snapshot{Counted: 18, Failures: 9, Timeouts: 9}},
		"b.Slow":        {Reason: breaker.ReasonSlowRatio, Window: breaker.Snapshot{Counted: 169, Slow: 88}, SlowCall: 200 * time.Millisecond},
		"c.Consecutive": {Reason: breaker.ReasonConsecutiveFailures, Window: breaker.Snapshot{Counted: 9, Failures: 7}, Run: 7},
		"d.Count":       {Reason: breaker.ReasonErrorCount, Window: breaker.Snapshot{Counted: 40, Failures: 12, Timeouts: 1}},
		"e.Forced":      {Reason: breaker.ReasonForcedOpen},
	}
	rules, err := AlertRules(AlertConfig{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
	var series, alerts strings.Builder
	names := make([]string, 0, len(trips))
	for name := range trips {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tr := trips[name]
		l := fmt.Sprintf(`name=%q, instance="a:9090"`, name)
		for _, s := range []struct {
			family string
			value  float64
		}{{"open_duration_seconds", 60}, {"outage_trips", 1}, {"outage_probes_failed", 0}, {"outage_refused", 0},
			{"trip_window_calls", float64(tr.Window.Counted)}, {"trip_window_failures", float64(tr.Window.Failures)},
			{"trip_window_timeouts", float64(tr.Window.Timeouts)}, {"trip_window_slow", float64(tr.Window.Slow)},
			{"trip_run", float64(tr.Run)}, {"trip_slow_call_seconds", tr.SlowCall.Seconds()}} {
			fmt.Fprintf(&series, "      - series: 'breaker_%s{%s}'\n        values: '%vx2'\n", s.family, l, s.value)
		}
		fmt.Fprintf(&series, "      - series: 'breaker_trip_reason{%s, reason=%q}'\n        values: '1x2'\n", l, tr.Reason)
		fmt.Fprintf(&series, "      - series: 'breaker_state{%s, state=\"open\"}'\n        values: '1x2'\n", l)
		fmt.Fprintf(&series, "      - series: 'breaker_mode{%s, mode=\"auto\"}'\n        values: '1x2'\n", l)
		fmt.Fprintf(&alerts, `          - exp_labels: {severity: P3, name: %s, method: %s, instance: "a:9090"}
            exp_annotations:
              summary: 'Breaker %s opened on %s; an outage of 1m 0s, 1 trip, 0 failed probes, now open'
              description: 'P3 (record): the breaker %s on a:9090 opened on %s. Its outage has lasted 1m 0s, its closes included: 1 trip, 0 failed probes, 0 calls refused; now open. The breaker only stops the bleeding: check the health of %s. This resolves when the outage settles: the breaker has stayed closed for the policy''s max_open_for.'
`, name, name, name, tr.String(), name, tr.String(), name)
	}
	test := "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" + series.String() +
		"    alert_rule_test:\n      - eval_time: 1m\n        alertname: BreakerOpen\n        exp_alerts:\n" + alerts.String()
	path := filepath.Join(dir, "rules_test.yml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o644))
	runTool(t, promtool, "test", "rules", path)
}
