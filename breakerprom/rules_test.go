package breakerprom

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
	for _, s := range []string{"open_duration_seconds >= 60)", "open_duration_seconds >= 600)", "open_duration_seconds >= 1800)"} {
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
		assert.Contains(t, out, "SUCCESS: 7 rules found", name)
	}
}

// The unit tests of testdata/breaker-alerts_test.yml: every alert fires,
// leading with the trip's rule and window, and resolves once what it names
// is over. BreakerOpen's grades at their thresholds, with name, method,
// target, reason and trip_reason, none for a forced-open or shadow
// breaker; failing probes, resolved when the breaker closes (it used to
// fire on for half an hour after); flapping, whatever the trips' rules, over
// an hour after; a refused policy push, over when the version in force is
// put back; a closed breaker that throttles most of its calls, over when
// it opens, none for a shadow breaker.
func TestAlertRules_PromtoolTestRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	out := runTool(t, promtool, "test", "rules", "testdata/breaker-alerts_test.yml")
	assert.Contains(t, out, "SUCCESS")
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
	const test = `
rule_files: [rules.yml]
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: 'shop_breaker_open_duration_seconds{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '0+1x5 0x4'
      - series: 'shop_breaker_open_reason{name="orders.Create", reason="slow_ratio", instance="10.0.0.3:8080"}'
        values: '1x5 stale'
      - series: 'shop_breaker_trip_reason{name="orders.Create", reason="slow_ratio", instance="10.0.0.3:8080"}'
        values: '1x5 stale'
      - series: 'shop_breaker_trip_window_calls{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '40x5 stale'
      - series: 'shop_breaker_trip_window_failures{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '2x5 stale'
      - series: 'shop_breaker_trip_window_timeouts{name="orders.Create", instance="10.0.0.3:8080"}'
        values: '0x5 stale'
      - series: 'shop_breaker_mode{name="orders.Create", mode="auto", instance="10.0.0.3:8080"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 1s
        alertname: BreakerOpen
        exp_alerts: []
      - eval_time: 4s
        alertname: BreakerOpen
        exp_alerts:
          - exp_labels: {severity: P3, name: orders.Create, method: orders.Create, reason: slow_ratio, trip_reason: slow_ratio, instance: "10.0.0.3:8080"}
            exp_annotations:
              summary: 'Breaker orders.Create has been open for 4s (opened on slow_ratio: 2 of 40 calls failed, 0 of them timeouts)'
              description: 'P3 (record): the breaker orders.Create on 10.0.0.3:8080 opened on slow_ratio: 2 of 40 calls failed, 0 of them timeouts, and has refused calls for 4s. The breaker only stops the bleeding: check the health of orders.Create.` + links + `'
              status_url: 'http://10.0.0.3:8080/status'
              dashboard_url: 'https://grafana.example.com/d/govkit-breaker?var-name=orders.Create'
          - exp_labels: {severity: P2, name: orders.Create, method: orders.Create, reason: slow_ratio, trip_reason: slow_ratio, instance: "10.0.0.3:8080"}
            exp_annotations:
              summary: 'Breaker orders.Create has been open for 4s (opened on slow_ratio: 2 of 40 calls failed, 0 of them timeouts)'
              description: 'P2 (page): the breaker orders.Create on 10.0.0.3:8080 opened on slow_ratio: 2 of 40 calls failed, 0 of them timeouts, and has refused calls for 4s. The breaker only stops the bleeding: check the health of orders.Create.` + links + `'
              status_url: 'http://10.0.0.3:8080/status'
              dashboard_url: 'https://grafana.example.com/d/govkit-breaker?var-name=orders.Create'
      - eval_time: 6s
        alertname: BreakerOpen
        exp_alerts: []
`
	path := filepath.Join(dir, "rules_test.yml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o644))
	runTool(t, promtool, "test", "rules", path)
}

func TestAlertRules_BadConfigNamesEachField(t *testing.T) {
	_, err := AlertRules(AlertConfig{
		Namespace:     "shop-breaker",
		Thresholds:    ops.Thresholds{P3: time.Hour, P2: time.Minute, P1: time.Hour},
		FlapOpens:     -1,
		ProbeWindow:   time.Microsecond,
		ThrottleShare: -0.5,
		StatusURL:     "http://a/status\n- alert: Injected",
	})
	require.Error(t, err)
	for _, s := range []string{"Namespace \"shop-breaker\"", "Thresholds", "FlapOpens -1", "ProbeWindow 1µs", "ThrottleShare -0.5", "StatusURL"} {
		assert.ErrorContains(t, err, s)
	}
	rules, err := AlertRules(AlertConfig{Thresholds: ops.Thresholds{P3: 1500 * time.Millisecond, P2: 90 * time.Second, P1: 2 * time.Hour}})
	require.NoError(t, err)
	assert.Contains(t, string(rules), ">= 1.5)")
	assert.Contains(t, string(rules), "P3 (record) after 1500ms, P2 (page) after 90s, P1 (escalate) after 2h.")
}
