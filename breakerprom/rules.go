package breakerprom

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/govkit/breaker/ops"
)

//go:generate go run ./cmd/breaker-alerts -o rules/breaker-alerts.yml

// Defaults of [AlertConfig] beyond the thresholds, which are
// [ops.DefaultThresholds].
const (
	// DefaultFlapOpens trips in one outage make a breaker flapping: it
	// has closed twice on a downstream that was not well, and tripped
	// again each time. (Five trips in an hour, the rule before outages,
	// missed a flapping incident of four trips.)
	DefaultFlapOpens = 3
	// DefaultFlapWindow is the former window of FlapOpens.
	//
	// Deprecated: trips are counted within the outage; AlertRules checks
	// FlapWindow and uses it no more.
	DefaultFlapWindow = time.Hour
	// DefaultProbeFailures failed probes in one outage mean the
	// downstream fails every time it is tried: with the default cooldowns
	// (30s doubling to 2m) three failures take about three and a half
	// minutes.
	DefaultProbeFailures = 3
	// DefaultProbeWindow is the former window of ProbeFailures.
	//
	// Deprecated: failed probes are counted within the outage;
	// AlertRules checks ProbeWindow and uses it no more.
	DefaultProbeWindow = 30 * time.Minute
	// DefaultThrottleShare of the calls throttled over
	// DefaultThrottleWindow is a closed breaker that refuses as much as
	// it lets through, for long enough that it is no passing burst: the
	// downstream has accepted fewer than a quarter of the calls wanted
	// of it (K 2) for five minutes.
	DefaultThrottleShare  = 0.5
	DefaultThrottleWindow = 5 * time.Minute
)

// AlertConfig parameterises [AlertRules]. The zero value gives the rules
// the module ships in rules/breaker-alerts.yml.
type AlertConfig struct {
	// Namespace is the collector's namespace ([WithNamespace]); empty
	// means DefaultNamespace.
	Namespace string
	// Thresholds are the open durations of the P3, P2 and P1 alerts; the
	// zero value means ops.DefaultThresholds, the grading of ops.Alerts.
	Thresholds ops.Thresholds
	// FlapOpens trips from closed in one outage raise BreakerFlapping;
	// zero means DefaultFlapOpens.
	FlapOpens int
	// FlapWindow was the window FlapOpens were counted in.
	//
	// Deprecated: trips are counted within the outage, so that the alert
	// resolves when the outage settles; it is checked and not used.
	FlapWindow time.Duration
	// ProbeFailures failed probes in one outage raise
	// BreakerProbesFailing; zero means DefaultProbeFailures.
	ProbeFailures int
	// ProbeWindow was the window ProbeFailures were counted in.
	//
	// Deprecated: failed probes are counted within the outage, so that
	// no count crosses outages or processes; it is checked and not used.
	ProbeWindow time.Duration
	// ThrottleShare, in (0, 1], of the calls the application made within
	// ThrottleWindow (those an open breaker refused included) refused by
	// the policy's throttle, outside an outage, raise BreakerThrottling.
	// Each zero field means its default: DefaultThrottleShare,
	// DefaultThrottleWindow.
	ThrottleShare  float64
	ThrottleWindow time.Duration
	// ThrottleResolveShare, in (0, ThrottleShare], is the share below
	// which a firing BreakerThrottling resolves: a share that hovers at
	// ThrottleShare does not make the alert flicker. Zero means half of
	// ThrottleShare.
	ThrottleResolveShare float64
	// Windows and thresholds must be whole milliseconds, the finest unit
	// of a Prometheus duration.

	// StatusURL and DashboardURL, when set, are links every alert
	// carries: in its annotations status_url and dashboard_url, and at
	// the end of its description. Each is a Prometheus template, so it
	// may use the alert's labels: http://{{ $labels.instance }}/status
	// for the status page each instance serves (see ops.StatusPage), or
	// https://grafana.example.com/d/govkit-breaker?var-job={{ $labels.job }}&var-name={{ $labels.name }}.
	// Empty: no link. Neither may hold a line break, and each must be a
	// template Prometheus accepts (AlertRules parses it as Prometheus
	// does); the policy alerts, which have no breaker, read $labels.name
	// in DashboardURL as "$__all", Grafana's value for every breaker.
	StatusURL    string
	DashboardURL string
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// orZero sets *v to d if *v is its type's zero value.
func orZero[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// orDefault fills the zero fields and checks the result.
func (c AlertConfig) orDefault() (AlertConfig, error) {
	orZero(&c.Namespace, DefaultNamespace)
	orZero(&c.Thresholds, ops.DefaultThresholds())
	orZero(&c.FlapOpens, DefaultFlapOpens)
	orZero(&c.FlapWindow, DefaultFlapWindow)
	orZero(&c.ProbeFailures, DefaultProbeFailures)
	orZero(&c.ProbeWindow, DefaultProbeWindow)
	orZero(&c.ThrottleShare, DefaultThrottleShare)
	orZero(&c.ThrottleWindow, DefaultThrottleWindow)
	orZero(&c.ThrottleResolveShare, c.ThrottleShare/2)
	var errs []error
	if !metricName.MatchString(c.Namespace) {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.Namespace %q is not a metric name prefix", c.Namespace))
	}
	if err := c.Thresholds.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.Thresholds: %w", err))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Thresholds.P3", c.Thresholds.P3}, {"Thresholds.P2", c.Thresholds.P2}, {"Thresholds.P1", c.Thresholds.P1},
		{"FlapWindow", c.FlapWindow}, {"ProbeWindow", c.ProbeWindow}, {"ThrottleWindow", c.ThrottleWindow},
	} {
		if d.v%time.Millisecond != 0 || d.v < 0 {
			errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.%s %v is not a positive whole number of milliseconds", d.name, d.v))
		}
	}
	if c.FlapOpens < 0 {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.FlapOpens %d is negative", c.FlapOpens))
	}
	if !(c.ThrottleShare > 0 && c.ThrottleShare <= 1) {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.ThrottleShare %v is not in (0, 1]", c.ThrottleShare))
	}
	if !(c.ThrottleResolveShare > 0 && c.ThrottleResolveShare <= c.ThrottleShare) {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.ThrottleResolveShare %v is not in (0, ThrottleShare %v]", c.ThrottleResolveShare, c.ThrottleShare))
	}
	if c.ProbeFailures < 0 {
		errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.ProbeFailures %d is negative", c.ProbeFailures))
	}
	for _, u := range []struct{ name, v string }{{"StatusURL", c.StatusURL}, {"DashboardURL", c.DashboardURL}} {
		if strings.ContainsFunc(u.v, unicode.IsControl) {
			errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.%s %q holds a control character, such as a line break", u.name, u.v))
		} else if err := checkPromTemplate(u.v); err != nil {
			errs = append(errs, fmt.Errorf("breakerprom: AlertConfig.%s %q is not a template Prometheus accepts: %w", u.name, u.v, err))
		}
	}
	return c, errors.Join(errs...)
}

//go:embed rules.yml.tmpl
var rulesText string

// The template's actions are [[ ]]: {{ }} belongs to Prometheus, whose
// own templates fill the alerts' annotations.
var rulesTemplate = template.Must(template.New("rules").Delims("[[", "]]").Funcs(template.FuncMap{
	"seconds": func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) },
	"span":    promDuration,
	"window":  func(d time.Duration) string { return "[" + promDuration(d) + "]" },
	"percent": func(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" },
	"list":    func(s ...string) []string { return s },
	// before and after split "calls:trip_window_calls" at the colon.
	"before": func(s string) string { b, _, _ := strings.Cut(s, ":"); return b },
	"after":  func(s string) string { _, a, _ := strings.Cut(s, ":"); return a },
	"group":  groupLinks,
	// selector is the query of "state:state%s == 1": the family and
	// where the selector goes (after the name unless it says).
	"selector": func(s string) string {
		_, a, _ := strings.Cut(s, ":")
		if !strings.Contains(a, "%s") {
			a += "%s"
		}
		return a
	},
	"need": func(d rulesData, need ...string) readData {
		return readData{d.Namespace, need}
	},
	// yaml quotes a string for YAML: a JSON string is a YAML one.
	"yaml": func(s string) (string, error) {
		b, err := json.Marshal(s)
		return string(b), err
	},
}).Parse(rulesText))

// AlertRules returns a Prometheus rules file (YAML) with the alerts on the
// collector's metrics. The breaker alerts speak of an outage
// ([breaker.Outage]: from a trip until the breaker has stayed closed for
// the policy's MaxOpenFor, its closes and re-trips included): each fires
// once in an outage, stays firing through its closes and re-trips, and
// resolves when it settles.
//
//   - BreakerOpen, severity P3, P2 and P1: the outage has lasted the
//     threshold of that severity (open_duration_seconds). The grades
//     overlap (an outage of half an hour raises all three, so each
//     routes on its own); an Alertmanager inhibit rule equal on every
//     label but severity keeps only the highest. Breakers forced open or
//     in shadow mode raise none, as with ops.Alerts.
//   - BreakerProbesFailing: ProbeFailures half-open probes failed in the
//     outage (outage_probes_failed).
//   - BreakerFlapping: the breaker tripped from closed FlapOpens times in
//     the outage (outage_trips); its text says whether its probes passed
//     on error answers (StrictProbes off: set it) or the downstream
//     recovers and falls again.
//   - BreakerThrottling: the policy's throttle refused ThrottleShare of
//     the calls the application made in ThrottleWindow (those an open
//     breaker refused included), outside an outage, which no open-state
//     alert sees; it stays firing until the share falls below
//     ThrottleResolveShare, and resolves when an outage begins. Shadow
//     breakers, which refuse nothing, raise none.
//   - BreakerPolicyRejected: a followed source's document was refused and
//     no valid one has been delivered since (policy_rejected_info); a
//     source that is gone meanwhile does not resolve it.
//   - BreakerPolicySourceDown: the followed source is gone or unreadable
//     (policy_source_down), until it delivers a readable document.
//
// The breaker alerts' labels name what each is about: name, method and
// target (the key's parts before and after "@"), the series' instance,
// job and const labels, and severity; what changes during the outage is
// in the annotations, read from the series when the alert is sent, all of
// the alert's labels matched so that groups with const labels do not
// cross. Each annotation leads with the evidence of the rule that tripped
// the breaker, in the words of [breaker.Trip.String] ("opened on
// error_ratio: 9 of 18 calls failed, 9 of them timeouts"). The policy
// alerts carry the version and origin, and in_force, the version that
// stays. An error names each bad field of cfg.
func AlertRules(cfg AlertConfig) ([]byte, error) {
	cfg, err := cfg.orDefault()
	if err != nil {
		return nil, err
	}
	def, _ := AlertConfig{}.orDefault()
	th := cfg.Thresholds
	data := rulesData{cfg, cfg == def, []severity{
		{"P3", "record", th.P3},
		{"P2", "page", th.P2},
		{"P1", "escalate", th.P1},
	}}
	var b bytes.Buffer
	if err := rulesTemplate.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("breakerprom: alert rules: %w", err)
	}
	return b.Bytes(), nil
}

// rulesData is what rules.yml.tmpl is executed on.
type rulesData struct {
	AlertConfig
	Default    bool // the shipped file's config
	Severities []severity
}

// readData is what the template "read" reads: the namespace, and the
// figures of the outage an annotation needs, each "variable:family".
type readData struct {
	Namespace string
	Need      []string
}

// links are the links of an alert, as the templates "links" and "urls"
// write them.
type links struct{ StatusURL, DashboardURL string }

// groupLinks are the links of an alert of the group as a whole, which
// has no label name: $labels.name in the dashboard's link reads "$__all",
// Grafana's value for every breaker, so that the link does not select a
// breaker named "".
func groupLinks(d rulesData) links {
	return links{d.StatusURL, labelsName.ReplaceAllString(d.DashboardURL, `(or $$labels.name "$$__all")`)}
}

var labelsName = regexp.MustCompile(`\$labels\.name\b`)

// promFuncs are the names of the functions of Prometheus's templates
// (github.com/prometheus/prometheus/template, 2.x), which AlertRules
// parses a link with; their bodies are never run.
var promFuncs = func() template.FuncMap {
	m := template.FuncMap{}
	for _, name := range []string{"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml",
		"match", "title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "humanize", "humanize1024",
		"humanizeDuration", "humanizePercentage", "humanizeTimestamp", "toTime", "pathPrefix", "externalURL",
		"parseDuration", "stripPort", "stripDomain", "toDuration", "now"} {
		m[name] = func(...any) any { return nil }
	}
	return m
}()

// promPreamble is what Prometheus puts before an annotation's template:
// the variables an annotation may use.
const promPreamble = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

// checkPromTemplate parses s as Prometheus parses an annotation: text/template
// with Prometheus's functions and its variables. An error is what
// Prometheus would refuse the rules file for.
func checkPromTemplate(s string) error {
	_, err := template.New("link").Funcs(promFuncs).Option("missingkey=zero").Parse(promPreamble + s)
	return err
}

// severity is one grade of BreakerOpen: its name, what it asks of the
// person it reaches, and the open duration that raises it.
type severity struct {
	Name, Action string
	After        time.Duration
}

// promDuration writes d the way Prometheus reads a duration: in the
// largest unit that divides it (1h, 30m, 90s, 1500ms).
func promDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
