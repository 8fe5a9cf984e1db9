// Command breaker-alerts writes the Prometheus alerting rules for the
// metrics of github.com/govkit/breaker/breakerprom, as
// breakerprom.AlertRules does, with its parameters as flags. Without
// flags it writes the rules the module ships in rules/breaker-alerts.yml.
//
//	go run github.com/govkit/breaker/breakerprom/cmd/breaker-alerts \
//	    -p3 10s -p2 1m -p1 5m -status-url 'http://{{ $labels.instance }}/status' \
//	    -o breaker-alerts.yml
//
// Thresholds scaled down to seconds make a drill that fires in a minute.
// A bad flag is an error that names it (exit status 2), and nothing is
// written; -h prints the flags and exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/govkit/breaker/breakerprom"
	"github.com/govkit/breaker/ops"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode is the command's exit status for run's error: 0 for none and
// for a request for help (-h, -help: the usage is printed, as asked), 2
// for anything else, after the error is printed to stderr.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "breaker-alerts:", err)
	return 2
}

// run parses args, and writes the rules to stdout or to the file of -o.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breaker-alerts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	th := ops.DefaultThresholds()
	var cfg breakerprom.AlertConfig
	var out string
	fs.StringVar(&cfg.Namespace, "namespace", breakerprom.DefaultNamespace, "the collector's namespace (breakerprom.WithNamespace)")
	fs.DurationVar(&th.P3, "p3", th.P3, "`duration` of an outage, its closes included, that raises BreakerOpen at P3 (record)")
	fs.DurationVar(&th.P2, "p2", th.P2, "`duration` of an outage, its closes included, that raises BreakerOpen at P2 (page)")
	fs.DurationVar(&th.P1, "p1", th.P1, "`duration` of an outage, its closes included, that raises BreakerOpen at P1 (escalate)")
	fs.IntVar(&cfg.FlapOpens, "flap-opens", breakerprom.DefaultFlapOpens, "trips from closed in one outage that raise BreakerFlapping")
	fs.DurationVar(&cfg.FlapWindow, "flap-window", breakerprom.DefaultFlapWindow, "deprecated, checked and not used: trips are counted within the outage (a `window`)")
	fs.IntVar(&cfg.ProbeFailures, "probe-failures", breakerprom.DefaultProbeFailures, "failed probes in one outage that raise BreakerProbesFailing")
	fs.DurationVar(&cfg.ProbeWindow, "probe-window", breakerprom.DefaultProbeWindow, "deprecated, checked and not used: failed probes are counted within the outage (a `window`)")
	fs.Float64Var(&cfg.ThrottleShare, "throttle-share", breakerprom.DefaultThrottleShare, "`share` of a breaker's calls, in (0, 1], those an open breaker refused included, refused by its throttle within -throttle-window, outside an outage, that raises BreakerThrottling")
	fs.DurationVar(&cfg.ThrottleWindow, "throttle-window", breakerprom.DefaultThrottleWindow, "the `window` of -throttle-share")
	fs.Float64Var(&cfg.ThrottleResolveShare, "throttle-resolve-share", 0, "`share` below which a firing BreakerThrottling resolves, in (0, -throttle-share]; 0: half of -throttle-share")
	fs.StringVar(&cfg.StatusURL, "status-url", "", "link to the status page in every alert: a Prometheus `template` such as 'http://{{ $labels.instance }}/status'")
	fs.StringVar(&cfg.DashboardURL, "dashboard-url", "", "link to the dashboard in every alert: a Prometheus `template`")
	fs.StringVar(&out, "o", "", "write to this `file` instead of the standard output")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: breaker-alerts [flags]\n\nWrites Prometheus alerting rules for the breakers' metrics. Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every parameter is a flag", fs.Arg(0))
	}
	// The config's zero values stand for the defaults: a flag set to one
	// is refused rather than read as "default".
	var zero error
	fs.Visit(func(f *flag.Flag) {
		if zero == nil && zeroIsDefault[f.Name] != "" && isZero(f.Value.String()) {
			zero = fmt.Errorf("-%s: must be %s, got %q", f.Name, zeroIsDefault[f.Name], f.Value.String())
		}
	})
	if zero != nil {
		return zero
	}
	cfg.Thresholds = th
	rules, err := breakerprom.AlertRules(cfg)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = stdout.Write(rules)
		return err
	}
	return os.WriteFile(out, rules, 0o644)
}

// zeroIsDefault names the flags whose zero value the config reads as its
// default, with the range they take.
var zeroIsDefault = map[string]string{
	"namespace":       "a metric name prefix",
	"flap-opens":      "at least 1",
	"probe-failures":  "at least 1",
	"throttle-share":  "in (0, 1]",
	"throttle-window": "a positive duration",
	"flap-window":     "a positive duration",
	"probe-window":    "a positive duration",
}

// isZero reports whether a flag's value, as its String method prints it,
// is its type's zero.
func isZero(v string) bool { return v == "" || v == "0" || v == "0s" }
