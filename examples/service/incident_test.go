package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerprom"
	"github.com/govkit/breaker/live"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transcript, when set, is a file where TestService_AnIncidentWithPrometheus
// writes what the on-call engineer saw, step by step: the alerts as
// Prometheus serves them, the status page, the log. docs/operating.md
// walks an incident with it.
var transcript = flag.String("incident.transcript", "", "write the incident's transcript to this file")

// The incident's policy: the built-in one with cooldowns and a window of
// seconds, so that an outage, its probes and its recovery take seconds;
// both deadlines 100ms. incidentBad is an edit that is refused: its
// open_for is beyond max_open_for.
const (
	incidentPolicy = `{
  "default":   {"window": "2s", "min_requests": 10, "open_for": "1s", "max_open_for": "4s"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "100ms"},
    "pricing.GetPrice":   {"call_timeout": "100ms"}
  }
}`
	incidentBad = `{
  "default":   {"window": "2s", "min_requests": 10, "open_for": "1s", "max_open_for": "4s"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "100ms"},
    "pricing.GetPrice":   {"call_timeout": "100ms", "open_for": "10s"}
  }
}`
)

// incidentRules are the shipped rules with thresholds in seconds and the
// links to the status page each instance serves and to the dashboard.
func incidentRules(t *testing.T) []byte {
	t.Helper()
	rules, err := breakerprom.AlertRules(breakerprom.AlertConfig{
		Thresholds:    ops.Thresholds{P3: 2 * time.Second, P2: 10 * time.Minute, P1: 30 * time.Minute},
		ProbeFailures: 3, ProbeWindow: time.Minute,
		StatusURL:    "http://{{ $labels.instance }}/status",
		DashboardURL: "https://grafana.example.com/d/govkit-breaker?var-job={{ $labels.job }}&var-name={{ $labels.name }}",
	})
	require.NoError(t, err)
	return rules
}

// running is the service serving on a fixed address until stopped, on the
// real clock (Prometheus stamps samples with its own time), following
// the policy file at path.
type running struct {
	svc  *service
	stop func()
}

func serveAt(t *testing.T, addr, path string, logs *syncBuffer) *running {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logs, nil))
	src, err := policyFlags{file: path, interval: 50 * time.Millisecond}.source(nil)
	require.NoError(t, err)
	svc, err := newService(log, src)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		// The address of the instance before the restart: free again
		// once its server has shut down.
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, svc.routes(), log) }()
	var once sync.Once
	r := &running{svc: svc, stop: func() {
		once.Do(func() {
			cancel()
			assert.NoError(t, <-done)
			assert.NoError(t, svc.close())
		})
	}}
	t.Cleanup(r.stop)
	return r
}

// traffic asks for a product every 50ms until stopped, as the service's
// clients would; errors while the service restarts are expected.
func traffic(base string) (stop func()) {
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if resp, err := client.Get(base + "/product?sku=42"); err == nil {
				resp.Body.Close()
			}
		}
	}()
	return func() { close(quit); <-done; client.CloseIdleConnections() }
}

// notes is the transcript: what the on-call engineer saw, by step.
type notes struct {
	sb  strings.Builder
	t0  time.Time
	dir string // the test's directory, written /srv/shop
}

func (n *notes) step(title string) {
	fmt.Fprintf(&n.sb, "\n### %s (t0+%s)\n\n", title, time.Since(n.t0).Round(100*time.Millisecond))
}

func (n *notes) block(lang, text string) {
	if n.dir != "" {
		text = strings.ReplaceAll(text, n.dir, "/srv/shop")
	}
	fmt.Fprintf(&n.sb, "```%s\n%s\n```\n", lang, strings.TrimRight(text, "\n"))
}

// alertText is an alert as an Alertmanager notification would carry it.
func alertText(a alert) string {
	var keys []string
	for k := range a.Labels {
		keys = append(keys, k)
	}
	var sb strings.Builder
	sb.WriteString(a.Labels["alertname"] + " " + a.State + "\n  labels:")
	for _, k := range sortedStrings(keys) {
		if k != "alertname" {
			fmt.Fprintf(&sb, " %s=%s", k, a.Labels[k])
		}
	}
	for _, k := range []string{"summary", "description", "status_url", "dashboard_url"} {
		if v, ok := a.Annotations[k]; ok {
			fmt.Fprintf(&sb, "\n  %s: %s", k, v)
		}
	}
	return sb.String()
}

func sortedStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// firing returns the firing alerts named alertname for the breaker or
// group matched by match.
func (p *promServer) firing(alertname string, match func(alert) bool) []alert {
	var out []alert
	for _, a := range p.alerts() {
		if a.Labels["alertname"] == alertname && a.State == "firing" && match(a) {
			out = append(out, a)
		}
	}
	return out
}

func pricingAlert(a alert) bool { return a.Labels["name"] == keyPrice }

// statusOf reads one breaker's status from /breakers.
func statusOf(t *testing.T, base, key string) (breaker.Status, ops.PolicySnapshot) {
	t.Helper()
	resp, err := http.Get(base + "/breakers")
	require.NoError(t, err)
	defer resp.Body.Close()
	var snap ops.GroupSnapshot
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	for _, st := range snap.Breakers {
		if st.Name == key {
			return st, snap.Policy
		}
	}
	return breaker.Status{}, snap.Policy
}

// logLines are the lines of logs that contain one of the words.
func logLines(logs string, words ...string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				// Without the time, which differs at every run.
				out = append(out, regexp.MustCompile(`^time=\S+ `).ReplaceAllString(l, ""))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// An incident as the on-call engineer lives it, with the shipped rules
// (thresholds in seconds, links on) on a real Prometheus scraping the
// service twice a second: pricing turns slow, its breaker trips on
// error_ratio, the P3 leads with that cause and the window that tripped
// it, then the failing probes raise BreakerProbesFailing; the status page,
// in Chromium, says the same, with the cooldown that runs. Pricing heals:
// the breaker closes, its log record tells the outage (its length, trips,
// refusals, when it settles), and every alert fires until the outage has
// settled (closed for max_open_for) and resolves within seconds after. A refused
// policy push raises BreakerPolicyRejected, which resolves when the file is
// put back, the version in force keeping its record. The service
// restarts, pricing trips again: the dashboard's trip annotation marks
// both trips and not the restart.
func TestService_AnIncidentWithPrometheus(t *testing.T) {
	bin := needTool(t, "prometheus", "prometheus")
	chromiumBin := needTool(t, "chromium", "chromium")
	// Beside the other real-time test: both mostly wait on the clock.
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "breakers.json")
	require.NoError(t, os.WriteFile(path, []byte(incidentPolicy), 0o644))
	addr := freePort(t)
	base := "http://" + addr
	logs := &syncBuffer{}
	svc := serveAt(t, addr, path, logs)
	p := startPrometheusEvery(t, bin, addr, incidentRules(t), 500*time.Millisecond)
	n := &notes{t0: time.Now(), dir: dir}
	stopTraffic := traffic(base)
	defer func() { stopTraffic() }()
	start := time.Now()

	p.Eventually("closed pricing breaker, its trips at 0", func() (bool, string) {
		v := p.query(`count_over_time(breaker_transitions_total{name="pricing.GetPrice", from="closed", to="open", reason="error_ratio"}[10s]) >= 2`)
		return len(v) == 1, fmt.Sprint(v)
	})
	assert.NotContains(t, logs.String(), "override unused", "pricing's override is used once it is called: no warning at start")

	// The fault: pricing answers after 1s, its deadline is 100ms.
	n.step("pricing turns slow")
	resp, err := http.Post(base+"/faults?pricing=slow", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	var p3 alert
	p.Eventually("BreakerOpen P3 for pricing", func() (bool, string) {
		all := p.firing("BreakerOpen", func(a alert) bool { return pricingAlert(a) && a.Labels["severity"] == "P3" })
		if len(all) == 1 {
			p3 = all[0]
		}
		return len(all) == 1, fmt.Sprint(p.alerts())
	})
	st, _ := statusOf(t, base, keyPrice)
	require.NotEqual(t, breaker.Closed, st.State)
	require.NotNil(t, st.Outage)
	trip := st.Outage.Trip.Window
	cause := "opened on " + st.Outage.Trip.String()
	assert.Equal(t, fmt.Sprintf("opened on error_ratio: %d of %d calls failed, %d of them timeouts", trip.Failures, trip.Counted, trip.Timeouts), cause)
	assert.Equal(t, breaker.ReasonErrorRatio, st.Outage.Trip.Reason)
	assert.Equal(t, trip.Failures, trip.Timeouts, "a slow downstream: every failure a timeout")
	// The labels name what the alert is about; what changes during the
	// outage is in its text.
	assert.Equal(t, keyPrice, p3.Labels["method"])
	assert.Equal(t, addr, p3.Labels["instance"])
	assert.NotContains(t, p3.Labels, "reason")
	assert.NotContains(t, p3.Labels, "trip_reason")
	assert.Contains(t, p3.Annotations["summary"], "Breaker pricing.GetPrice "+cause+"; an outage of", "the alert leads with the trip's rule and window")
	assert.Contains(t, p3.Annotations["description"], "P3 (record): the breaker pricing.GetPrice on "+addr+" "+cause)
	assert.Contains(t, p3.Annotations["description"], "check the health of pricing.GetPrice.")
	assert.Equal(t, base+"/status", p3.Annotations["status_url"])
	assert.Equal(t, "https://grafana.example.com/d/govkit-breaker?var-job=service&var-name=pricing.GetPrice", p3.Annotations["dashboard_url"])
	assert.Contains(t, p3.Annotations["description"], "Status page: "+base+"/status")
	n.block("", alertText(p3))
	n.block("", logLines(logs.String(), `msg="breaker opened"`, "fault injected"))

	// The probes time out: the downstream has not recovered.
	var probes alert
	p.Eventually("BreakerProbesFailing for pricing", func() (bool, string) {
		all := p.firing("BreakerProbesFailing", pricingAlert)
		if len(all) == 1 {
			probes = all[0]
		}
		return len(all) == 1, fmt.Sprint(p.alerts())
	})
	n.step("its probes fail")
	assert.NotContains(t, probes.Labels, "trip_reason")
	assert.Contains(t, probes.Annotations["summary"], "Breaker pricing.GetPrice "+cause+";", "still led by the trip, not the probe")
	assert.Contains(t, probes.Annotations["description"], "The breaker pricing.GetPrice on "+addr+" "+cause+", and pricing.GetPrice")
	assert.Contains(t, probes.Annotations["description"], "the downstream has not recovered")
	n.block("", alertText(probes))
	// The first failed probe changes the P3's text, not the alert: the
	// same labels, the same activeAt.
	p.Eventually("the P3 saying the probe's reason behind the cause", func() (bool, string) {
		all := p.firing("BreakerOpen", pricingAlert)
		return len(all) == 1 && strings.Contains(all[0].Annotations["summary"], cause+"; an outage of") &&
			strings.Contains(all[0].Annotations["summary"], "now open on probe_failed"), fmt.Sprint(all)
	})
	now := p.firing("BreakerOpen", pricingAlert)[0]
	assert.Equal(t, p3.Labels, now.Labels, "one alert through the failed probes")
	assert.Equal(t, p3.ActiveAt, now.ActiveAt, "one alert through the failed probes")
	n.block("", alertText(now))
	// The dashboard's panels on an outage have data, the window that
	// tripped the breaker among them.
	for _, q := range dashboardQueries(t) {
		v := p.query(q.expr)
		switch q.title {
		case "State per breaker", "Current outage length", "Open breakers", "Window that tripped the breaker, while not closed":
			assert.NotEmpty(t, v, "%s: %s", q.title, q.expr)
		}
		if q.title == "Window that tripped the breaker, while not closed" && len(v) > 0 && v[0].Metric["reason"] != "" {
			assert.Equal(t, "error_ratio", v[0].Metric["reason"], q.expr)
			assert.Equal(t, fmt.Sprint(st.Outage.Trip.Window.Counted), v[0].Value[1], q.expr)
		}
	}

	// The status page, in a real browser: the cause apart from the
	// probe's verdict, the cooldown that runs, the grading note.
	// The breaker spends a moment half-open between cooldowns; a page
	// rendered then (a loaded machine renders slowly) shows the probes
	// instead, so render until one shows it open, within a few cooldowns.
	var dom string
	for deadline := time.Now().Add(30 * time.Second); ; {
		dom = pageText(string(chromium(t, chromiumBin, base+"/status", "--window-size=1100,860", "--dump-dom")))
		if strings.Contains(dom, "Next probe at") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{cause + "; reopened on probe_failed", "at the end of a cooldown of",
		"This page's own grading of this process's breakers", "It is not the state of Prometheus's alerts"} {
		assert.Contains(t, dom, want)
	}
	assert.Regexp(t, `Next probe at \d\d:\d\d:\d\d \(in \d+(ms|s)\), at the end of a cooldown of [1-5]s ; the policy's cooldown is 1s, doubling to 4s`, dom)
	n.step("the status page")
	n.block("", card(dom, "pricing.GetPrice"))
	chromium(t, chromiumBin, base+"/status", "--window-size=1100,860", "--screenshot="+filepath.Join(dir, "status.png"))

	// Pricing heals: the breaker closes, and the outage is over once it
	// has stayed closed for max_open_for (4s). The alerts on it stay until
	// then, and resolve within a few evaluations after.
	n.step("pricing heals")
	resp, err = http.Post(base+"/faults?pricing=ok", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	var settles time.Time
	p.Eventually("pricing closed, recovering", func() (bool, string) {
		st, _ := statusOf(t, base, keyPrice)
		if st.State == breaker.Closed && st.Outage != nil && st.Outage.Recovering() {
			settles = st.Outage.SettlesAt
			return true, ""
		}
		return false, fmt.Sprintf("%s %+v", st.State, st.Outage)
	})
	var left []alert
	for time.Now().Before(settles.Add(-time.Second)) {
		left = nil
		for _, a := range p.alerts() {
			if pricingAlert(a) && a.Labels["alertname"] == "BreakerOpen" {
				left = append(left, a)
			}
		}
		require.NotEmpty(t, left, "BreakerOpen resolved at %s, before the outage settled at %s",
			time.Now().Format(time.TimeOnly), settles.Format(time.TimeOnly))
		time.Sleep(p.Every / 2)
	}
	p.Eventually("every pricing alert resolved", func() (bool, string) {
		var left []alert
		for _, a := range p.alerts() {
			if pricingAlert(a) {
				left = append(left, a)
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	resolved := time.Since(settles)
	assert.Less(t, resolved, 3*time.Second, "resolved within a few evaluations of the outage's end")
	st, _ = statusOf(t, base, keyPrice)
	assert.Nil(t, st.Outage, "settled")
	closeLine := logLines(logs.String(), `msg="breaker closed" breaker.name=pricing.GetPrice`)
	for _, want := range []string{"breaker.outage_since=", "breaker.outage_for=", "breaker.trips=1 ", "breaker.refused=", "breaker.settles_at="} {
		assert.Contains(t, closeLine, want, "the close tells the outage")
	}
	n.block("", closeLine+fmt.Sprintf("\n(the alerts fired until the outage settled, max_open_for after the close, and resolved %s after)", resolved.Round(500*time.Millisecond)))

	// A refused push: Prometheus says so, with the versions, and the page
	// names the bad field; putting the file back resolves it, the version
	// in force keeping the record of what it changed.
	n.step("a bad policy push")
	_, before := statusOf(t, base, keyPrice)
	replace(t, path, incidentBad)
	var rejected alert
	p.Eventually("BreakerPolicyRejected", func() (bool, string) {
		all := p.firing("BreakerPolicyRejected", func(alert) bool { return true })
		if len(all) == 1 {
			rejected = all[0]
		}
		return len(all) == 1, fmt.Sprint(p.alerts())
	})
	_, ps := statusOf(t, base, keyPrice)
	require.NotNil(t, ps.Last)
	assert.Equal(t, ps.Last.Version, rejected.Labels["version"])
	assert.Equal(t, before.Version, rejected.Labels["in_force"])
	assert.Equal(t, "file:"+path, rejected.Labels["origin"])
	assert.Equal(t, base+"/status", rejected.Annotations["status_url"])
	page := html.UnescapeString(pageText(get(t, base+"/status")))
	assert.Contains(t, page, "was rejected: not live (overrides[\"pricing.GetPrice\"].open_for: 10s is above max_open_for (4s); lower it, or set max_open_for to at least 10s);")
	n.block("", alertText(rejected))
	if i, j := strings.Index(page, "Policy: "), strings.Index(page, " Alerts "); i >= 0 && j > i {
		n.block("", page[i:j])
	}
	n.block("", logLines(logs.String(), `msg="breaker policy rejected"`))
	replace(t, path, incidentPolicy)
	p.Eventually("BreakerPolicyRejected resolved", func() (bool, string) {
		all := p.firing("BreakerPolicyRejected", func(alert) bool { return true })
		return len(all) == 0, fmt.Sprint(all)
	})
	_, after := statusOf(t, base, keyPrice)
	assert.Equal(t, before.Version, after.Version)
	assert.Equal(t, before.AppliedAt, after.AppliedAt, "the version in force keeps its record")
	assert.Equal(t, before.Changes, after.Changes)
	assert.Equal(t, uint64(1), after.Reloads.Unchanged)
	assert.Equal(t, live.Unchanged, after.Last.Result)
	assert.NotContains(t, logs.String(), "breaker policy unchanged", "Debug, below the service's level")
	n.block("", "put back: "+after.Last.Result.String()+", in force "+after.Version+" (applied "+after.AppliedAt.Format(time.TimeOnly)+"), reloads "+
		fmt.Sprintf("%+v", after.Reloads))

	// The service restarts, and pricing trips again: the trip annotation
	// marks the two trips, not the restart.
	n.step("the service restarts; pricing trips again")
	svc.stop()
	restarted := time.Now()
	svc = serveAt(t, addr, path, logs)
	p.Eventually("the restarted service scraped, its trips at 0", func() (bool, string) {
		v := p.query(`breaker_transitions_total{name="pricing.GetPrice", from="closed", to="open", reason="error_ratio"} == 0`)
		return len(v) == 1, fmt.Sprint(v)
	})
	time.Sleep(3 * time.Second) // past the dashboard's rate interval
	resp, err = http.Post(base+"/faults?pricing=slow", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	p.Eventually("the second trip", func() (bool, string) {
		v := p.query(`breaker_transitions_total{name="pricing.GetPrice", from="closed", to="open", reason="error_ratio"} == 1`)
		return len(v) == 1, fmt.Sprint(v)
	})
	var annotation string
	for _, q := range dashboardQueries(t) {
		if q.title == "annotation Breaker trips" {
			annotation = q.expr
		}
	}
	require.NotEmpty(t, annotation)
	var trips []time.Time
	p.Eventually("two trip annotations", func() (bool, string) {
		trips = p.episodes(annotation, keyPrice, start, time.Now())
		return len(trips) == 2, fmt.Sprint(trips)
	})
	assert.True(t, trips[0].Before(restarted), "the first trip: %v", trips)
	assert.True(t, trips[1].After(restarted.Add(3*time.Second)), "the second trip, not the restart: %v (restart at %v)", trips, restarted)
	n.block("", fmt.Sprintf("Breaker trips annotation: %d marks, at t0+%s and t0+%s; the restart at t0+%s has none",
		len(trips), trips[0].Sub(n.t0).Round(time.Second), trips[1].Sub(n.t0).Round(time.Second), restarted.Sub(n.t0).Round(time.Second)))

	// Every query of the dashboard runs against the same server.
	for _, q := range dashboardQueries(t) {
		p.query(q.expr)
	}
	if *transcript != "" {
		require.NoError(t, os.WriteFile(*transcript, []byte(n.sb.String()), 0o644))
	}
}

// card is the text of one breaker's card on the status page's text.
func card(page, name string) string {
	i := strings.Index(page, "Breakers ")
	if i < 0 {
		return ""
	}
	page = page[i:]
	j := strings.Index(page, name)
	if j < 0 {
		return ""
	}
	page = page[j:]
	if k := strings.Index(page, " All transitions"); k >= 0 {
		page = page[:k]
	}
	return page
}

// get fetches url and returns its body, which must be a 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
