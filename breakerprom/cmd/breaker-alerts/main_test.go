package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without flags the command writes the shipped file, which go generate
// makes with it.
func TestRun_WritesTheShippedRulesByDefault(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(nil, &out, &bytes.Buffer{}))
	shipped, err := os.ReadFile("../../rules/breaker-alerts.yml")
	require.NoError(t, err)
	assert.Equal(t, string(shipped), out.String())
}

// A drill: thresholds in seconds and links, without writing Go.
func TestRun_FlagsReachTheRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drill.yml")
	require.NoError(t, run([]string{"-p3", "10s", "-p2", "1m", "-p1", "5m", "-namespace", "shop_breaker",
		"-probe-failures", "2", "-probe-window", "90s", "-flap-opens", "3", "-flap-window", "10m",
		"-throttle-share", "0.25", "-throttle-window", "2m", "-throttle-resolve-share", "0.2",
		"-status-url", "http://{{ $labels.instance }}/status", "-dashboard-url", "https://grafana.example.com/d/govkit-breaker",
		"-o", path}, &bytes.Buffer{}, &bytes.Buffer{}))
	rules, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, s := range []string{
		"(shop_breaker_open_duration_seconds >= 10)", "(shop_breaker_open_duration_seconds >= 60)", "(shop_breaker_open_duration_seconds >= 300)",
		"(shop_breaker_outage_probes_failed >= 2)", "(shop_breaker_outage_trips >= 3)",
		"increase(shop_breaker_throttled_total[2m])", ") >= 0.25,\n", ") >= 0.2\n", "less than 20% of the calls",
		`status_url: "http://{{ $labels.instance }}/status"`, `dashboard_url: "https://grafana.example.com/d/govkit-breaker"`,
	} {
		assert.Contains(t, string(rules), s)
	}
	assert.NotContains(t, string(rules), "do not edit", "not the shipped file")
}

// A bad flag names what is wrong, and nothing is written.
func TestRun_BadFlagsAreErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yml")
	err := run([]string{"-p3", "1h", "-p2", "1m", "-o", path}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "Thresholds")
	assert.NoFileExists(t, path)
	err = run([]string{"-probe-window", "1µs"}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "ProbeWindow 1µs")
	err = run([]string{"-throttle-share", "1.5"}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "ThrottleShare 1.5 is not in (0, 1]")
	// A typo in a link's template, which Prometheus would refuse the
	// whole file for, is refused here, naming the field.
	err = run([]string{"-status-url", "http://{{ $label.instance }}/status", "-o", path}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "StatusURL")
	assert.ErrorContains(t, err, `undefined variable "$label"`)
	assert.NoFileExists(t, path)
	err = run([]string{"-p3"}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "flag needs an argument: -p3")
	err = run([]string{"rules.yml"}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorContains(t, err, `unexpected argument "rules.yml"`)
}

// Help is not an error: -h (and -help) prints the usage and exits 0. It
// exited 2, as a bad flag does, so a script that checks the command with
// -h failed.
func TestHelp_ExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var out, errb bytes.Buffer
		code := exitCode(run([]string{arg}, &out, &errb), &errb)
		assert.Equal(t, 0, code, arg)
		assert.Contains(t, errb.String(), "usage: breaker-alerts [flags]", arg)
		assert.Contains(t, errb.String(), "-throttle-share", arg)
		assert.NotContains(t, errb.String(), "breaker-alerts: flag", arg)
		assert.Empty(t, out.String(), "no rules written", arg)
	}
	var errb bytes.Buffer
	assert.Equal(t, 2, exitCode(run([]string{"-p4", "1m"}, &bytes.Buffer{}, &errb), &errb), "a bad flag still exits 2")
	assert.Contains(t, errb.String(), "breaker-alerts: flag provided but not defined: -p4")
}

// A flag given 0 where 0 is out of its range is an error naming it. The
// config's zero value stands for the default, so -flap-opens 0 (meant
// as "never") wrote the default 3, and -throttle-share 0 the default
// 0.5, without a word.
func TestRun_AZeroOutOfRangeIsAnError(t *testing.T) {
	for _, args := range [][]string{
		{"-flap-opens", "0"}, {"-probe-failures", "0"}, {"-throttle-share", "0"},
		{"-throttle-window", "0s"}, {"-flap-window", "0s"}, {"-probe-window", "0s"}, {"-namespace", ""},
	} {
		path := filepath.Join(t.TempDir(), "rules.yml")
		var errb bytes.Buffer
		code := exitCode(run(append(args, "-o", path), &bytes.Buffer{}, &errb), &errb)
		assert.Equal(t, 2, code, args)
		assert.Contains(t, errb.String(), args[0], args)
		assert.NoFileExists(t, path, args)
	}
	// 0 is in range where the help says so.
	require.NoError(t, run([]string{"-throttle-resolve-share", "0"}, &bytes.Buffer{}, &bytes.Buffer{}))
}
