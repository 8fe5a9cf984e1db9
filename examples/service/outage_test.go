package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerprom"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outageTranscript, when set, is a file where
// TestService_AHardErrorOutageIsOneAlert writes what the on-call engineer
// saw of it: the alerts, the status page, the log of its closes.
var outageTranscript = flag.String("outage.transcript", "", "write the hard error outage's transcript to this file")

// The drill's policy: the built-in one with a window and cooldowns of
// seconds; the cooldown doubles from 2s to 8s, and an outage has settled
// once the breaker has stayed closed 8s (max_open_for). StrictProbes is
// off, as by default: a probe that the downstream answers, even with an
// error, passes.
const drillPolicy = `{
  "default":   {"window": "2s", "min_requests": 10, "open_for": "2s", "max_open_for": "8s"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "100ms"},
    "pricing.GetPrice":   {"call_timeout": "100ms"}
  }
}`

// drillThresholds are the drill copy's: what breaker-alerts -p3 10s -p2 1m
// -p1 3m writes.
var drillThresholds = ops.Thresholds{P3: 10 * time.Second, P2: time.Minute, P1: 3 * time.Minute}

func drillRules(t *testing.T) []byte {
	t.Helper()
	rules, err := breakerprom.AlertRules(breakerprom.AlertConfig{
		Thresholds: drillThresholds,
		StatusURL:  "http://{{ $labels.instance }}/status",
	})
	require.NoError(t, err)
	return rules
}

// sighting is what one look at /api/v1/alerts showed of one alert.
type sighting struct {
	at       time.Time
	present  bool
	state    string
	activeAt time.Time
	labels   map[string]string
}

// alertLog keeps every look at the inventory breaker's BreakerOpen alerts,
// by severity.
type alertLog struct {
	p     *promServer
	seen  map[string][]sighting
	sevs  []string
	match func(alert) bool
}

func (l *alertLog) look() {
	l.p.T.Helper()
	now := time.Now()
	got := map[string][]alert{}
	for _, a := range l.p.alerts() {
		if a.Labels["alertname"] == "BreakerOpen" && l.match(a) {
			got[a.Labels["severity"]] = append(got[a.Labels["severity"]], a)
		}
	}
	for _, sev := range l.sevs {
		as := got[sev]
		require.LessOrEqual(l.p.T, len(as), 1, "%s: one alert, not %d: %v", sev, len(as), as)
		s := sighting{at: now}
		if len(as) == 1 {
			s = sighting{at: now, present: true, state: as[0].State, activeAt: as[0].ActiveAt, labels: as[0].Labels}
		}
		l.seen[sev] = append(l.seen[sev], s)
	}
}

// firing reports whether the last look saw sev firing.
func (l *alertLog) firing(sev string) bool {
	s := l.seen[sev]
	return len(s) > 0 && s[len(s)-1].present && s[len(s)-1].state == "firing"
}

// first is the first look that saw sev firing.
func (l *alertLog) first(sev string) (sighting, bool) {
	for _, s := range l.seen[sev] {
		if s.present && s.state == "firing" {
			return s, true
		}
	}
	return sighting{}, false
}

// transitions records the inventory breaker's transitions as they happen.
type transitions struct {
	mu     sync.Mutex
	events []breaker.Event
}

func (tr *transitions) see(b *breaker.Breaker, e breaker.Event) {
	if b.Name() != keyStock || e.From == e.To {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, e)
}

// count is the transitions into state to after since.
func (tr *transitions) count(to breaker.State, since time.Time) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, e := range tr.events {
		if e.To == to && e.Time.After(since) {
			n++
		}
	}
	return n
}

// durations are the Go durations written in text ("1m5s", "45s").
var durationRe = regexp.MustCompile(`\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ms|s)\b|\b(?:\d+h)?\d+m\b`)

func longestDuration(text string) time.Duration {
	var longest time.Duration
	for _, s := range durationRe.FindAllString(text, -1) {
		if d, err := time.ParseDuration(s); err == nil && d > longest {
			longest = d
		}
	}
	return longest
}

// cardOf is the text of one breaker's card in the status page's DOM.
func cardOf(dom, name string) string {
	re := regexp.MustCompile(`(?s)<article[^>]*data-breaker="` + regexp.QuoteMeta(name) + `".*?</article>`)
	return pageText(re.FindString(dom))
}

// A hard error outage with answered probes, as the drill copy of the
// shipped rules (10s / 1m / 3m) grades it on a real Prometheus evaluating
// every second: inventory answers every call with a 503 at once, and with
// StrictProbes off the three probes at each cooldown's end pass on their
// errors, the breaker closes and trips again within a second, cycle after
// cycle. It is one outage: the drill's P3 and P2 each fire once and stay
// firing through the closes (one alert, its activeAt unchanged, never
// absent from one look to the next, one series in ALERTS), P1 never
// fires; the status page, in Chromium, says since when the method has
// failed and for how long, not the open spell. Inventory heals: the
// breaker closes, the alerts keep firing while the outage settles
// (max_open_for, 8s, closed) and resolve within a few evaluations after.
// The close's log record tells the outage: its length, trips, refusals
// and when it settles.
func TestService_AHardErrorOutageIsOneAlert(t *testing.T) {
	bin := needTool(t, "prometheus", "prometheus")
	chromiumBin := needTool(t, "chromium", "chromium")
	// Beside the other real-time test: both mostly wait on the clock.
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "breakers.json")
	require.NoError(t, os.WriteFile(path, []byte(drillPolicy), 0o644))
	addr := freePort(t)
	base := "http://" + addr
	logs := &syncBuffer{}
	svc := serveAt(t, addr, path, logs)
	tr := &transitions{}
	t.Cleanup(svc.svc.group.Subscribe(tr.see))
	// The P2 comes a minute into the outage: the waits are longer than the
	// other tests'.
	p := &promServer{testutil.StartPrometheus(t, bin, "service", addr, drillRules(t), time.Second, 100*time.Second)}
	n := &notes{t0: time.Now(), dir: dir}
	stopTraffic := traffic(base)
	defer func() { stopTraffic() }()
	al := &alertLog{p: p, seen: map[string][]sighting{}, sevs: []string{"P3", "P2", "P1"},
		match: func(a alert) bool { return a.Labels["name"] == keyStock }}
	// wait looks at the alerts every quarter second until cond holds.
	wait := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !cond(); time.Sleep(250 * time.Millisecond) {
			al.look()
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v; alerts: %v", what, within, p.alerts())
			}
		}
	}
	p.Eventually("the inventory breaker scraped", func() (bool, string) {
		v := p.query(`breaker_state{name="inventory.GetStock", state="closed"} == 1`)
		return len(v) == 1, fmt.Sprint(v)
	})

	n.step("inventory answers every call with a 503")
	resp, err := http.Post(base+"/faults?inventory=error", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	faulted := time.Now()
	wait("P3", 30*time.Second, func() bool { return al.firing("P3") })
	n.step("the P3, 10s into the outage")
	n.block("", alertText(p.firing("BreakerOpen", func(a alert) bool { return a.Labels["name"] == keyStock })[0]))

	// The status page, a good way into the outage, while the breaker is
	// open after a close: since when the method has failed, and for how
	// long, the closes included, where the open spell is a few seconds.
	var st breaker.Status
	var dom, txt string
	for deadline := time.Now().Add(40 * time.Second); ; {
		al.look()
		st, _ = statusOf(t, base, keyStock)
		if st.State == breaker.Open && st.Outage != nil && st.Outage.Trips >= 3 && st.Outage.Duration >= 25*time.Second {
			dom = string(chromium(t, chromiumBin, base+"/status", "--window-size=1100,860", "--dump-dom"))
			txt = cardOf(dom, keyStock)
			if strings.Contains(dom, `data-breaker="inventory.GetStock" data-state="open"`) {
				break
			}
		}
		require.False(t, time.Now().After(deadline), "no open breaker 25s into the outage: %+v", st)
		time.Sleep(250 * time.Millisecond)
	}
	since := st.Outage.Since.Local().Format("15:04:05")
	assert.Contains(t, txt, since, "the card says since when the method has failed: the outage's start")
	assert.GreaterOrEqual(t, longestDuration(txt), st.Outage.Duration.Truncate(time.Second)-time.Second,
		"the card shows the outage's length (%v), not the open spell: %s", st.Outage.Duration, txt)
	assert.Contains(t, txt, st.Outage.Trip.String(), "led by the trip that began the outage")
	assert.Contains(t, txt, "of its probes passed on errors", "the page names the trap: probes that pass on errors")
	n.step("the status page, the breaker open again after its closes")
	n.block("", txt)

	wait("P2", 80*time.Second, func() bool { return al.firing("P2") })
	p2, _ := al.first("P2")
	n.step("the P2, a minute into the outage")
	n.block("", alertText(p.firing("BreakerOpen", func(a alert) bool {
		return a.Labels["name"] == keyStock && a.Labels["severity"] == "P2"
	})[0]))
	// A close and a trip after the P2 fired: it stays firing through them.
	wait("a close and a trip after the P2", 30*time.Second, func() bool {
		return tr.count(breaker.Closed, p2.at) >= 1 && tr.count(breaker.Open, p2.at) >= 1
	})
	require.Greater(t, tr.count(breaker.Closed, faulted), 3, "several closes in the outage")
	// BreakerFlapping says which of the two it is: the probes pass on
	// errors, and strict_probes is the fix.
	flap := p.firing("BreakerFlapping", func(a alert) bool { return a.Labels["name"] == keyStock })
	require.Len(t, flap, 1, "BreakerFlapping at 3 trips in the outage: %v", p.alerts())
	assert.Contains(t, flap[0].Annotations["summary"], "its probes pass on errors")
	assert.Contains(t, flap[0].Annotations["description"], "Set strict_probes")
	assert.True(t, flap[0].ActiveAt.Before(p2.activeAt), "flapping since the third trip, before the P2")
	n.step("BreakerFlapping, since the third trip")
	n.block("", alertText(flap[0]))

	n.step("inventory heals")
	resp, err = http.Post(base+"/faults?inventory=ok", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	healed := time.Now()
	var settles time.Time
	wait("the breaker closed and recovering", 30*time.Second, func() bool {
		st, _ = statusOf(t, base, keyStock)
		if st.State == breaker.Closed && st.Outage != nil && st.Outage.Recovering() {
			settles = st.Outage.SettlesAt
			return true
		}
		return false
	})
	closes := tr.count(breaker.Closed, faulted)
	recovering := p.firing("BreakerOpen", func(a alert) bool { return a.Labels["name"] == keyStock && a.Labels["severity"] == "P2" })
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) &&
		(len(recovering) != 1 || !strings.Contains(recovering[0].Annotations["summary"], "now closed and recovering")); {
		al.look()
		time.Sleep(250 * time.Millisecond)
		recovering = p.firing("BreakerOpen", func(a alert) bool { return a.Labels["name"] == keyStock && a.Labels["severity"] == "P2" })
	}
	require.Len(t, recovering, 1, "the P2 fires while the outage settles")
	assert.Contains(t, recovering[0].Annotations["summary"], "now closed and recovering")
	n.block("", alertText(recovering[0])+fmt.Sprintf("\n(closed at %s; the outage settles at %s if it stays closed)",
		st.Outage.ClosedAt.Local().Format(time.TimeOnly), settles.Local().Format(time.TimeOnly)))
	// The alerts stay until the outage has settled, and go soon after.
	wait("the outage settled", 20*time.Second, func() bool { return time.Now().After(settles) })
	var before sighting
	for _, s := range al.seen["P2"] {
		if s.at.Before(settles) {
			before = s
		}
	}
	assert.True(t, before.present && before.state == "firing" && before.at.After(settles.Add(-time.Second)),
		"the P2 fires until the outage has settled: %+v", before)
	wait("the alerts resolved", 10*time.Second, func() bool {
		return !al.seen["P3"][len(al.seen["P3"])-1].present && !al.seen["P2"][len(al.seen["P2"])-1].present
	})
	resolved := time.Since(settles)
	p.Eventually("BreakerFlapping resolved", func() (bool, string) {
		all := p.firing("BreakerFlapping", func(a alert) bool { return a.Labels["name"] == keyStock })
		return len(all) == 0, fmt.Sprint(all)
	})
	assert.Less(t, resolved, 5*time.Second, "resolved within a few evaluations of the outage's end")
	assert.Equal(t, closes, tr.count(breaker.Closed, faulted), "no close since the one that settled")
	st, _ = statusOf(t, base, keyStock)
	assert.Nil(t, st.Outage, "settled")

	// Each grade fired once: at every look from its first firing until
	// the outage settled it was there, firing, with the same activeAt
	// and labels.
	for _, sev := range []string{"P3", "P2"} {
		first, ok := al.first(sev)
		require.True(t, ok, sev)
		for _, s := range al.seen[sev] {
			if s.at.Before(first.at) || s.at.After(settles) {
				continue
			}
			if !assert.True(t, s.present && s.state == "firing", "%s gone at %s, %s into the outage, before it settled",
				sev, s.at.Format(time.TimeOnly), s.at.Sub(faulted).Round(time.Second)) {
				break
			}
			assert.Equal(t, first.activeAt, s.activeAt, "%s: a new alert at %s", sev, s.at.Format(time.TimeOnly))
			assert.Equal(t, first.labels, s.labels, "%s: labels changed at %s", sev, s.at.Format(time.TimeOnly))
		}
	}
	for _, s := range al.seen["P1"] {
		assert.False(t, s.present, "P1 at 3m: %+v", s)
	}
	// And Prometheus's own record: one firing series of each, without a
	// gap, from its activeAt to the end.
	for _, sev := range []string{"P3", "P2"} {
		runs := p.firingRuns(`ALERTS{alertname="BreakerOpen", alertstate="firing", name="inventory.GetStock", severity="`+sev+`"}`, faulted, time.Now())
		assert.Len(t, runs, 1, "%s: one firing series, one run: %v", sev, runs)
	}

	// The log record of the close that ended it tells the outage.
	var lastClose string
	for _, l := range strings.Split(logLines(logs.String(), `msg="breaker closed" breaker.name=inventory.GetStock`), "\n") {
		lastClose = l
	}
	for _, want := range []string{"breaker.outage_since=", "breaker.outage_for=", "breaker.trips=" + strconv.Itoa(closes), "breaker.refused=", "breaker.settles_at="} {
		assert.Contains(t, lastClose, want)
	}
	n.step("the outage settles")
	closeLines := strings.Split(logLines(logs.String(), `msg="breaker closed" breaker.name=inventory.GetStock`), "\n")
	if len(closeLines) > 3 {
		closeLines = append(closeLines[:2:2], "…", closeLines[len(closeLines)-1])
	}
	n.block("", strings.Join(closeLines, "\n")+
		fmt.Sprintf("\n(one outage of %d trips and %d closes; inventory healed at t0+%s; the P3 and P2 fired once each and resolved, with BreakerFlapping, %s after it settled)",
			closes, closes, healed.Sub(n.t0).Round(time.Second), resolved.Round(500*time.Millisecond)))
	if *outageTranscript != "" {
		require.NoError(t, os.WriteFile(*outageTranscript, []byte(n.sb.String()), 0o644))
	}
}

// firingRuns runs q over [start, end], a point a second, and returns the
// start of each run of points of each series: one per time the alert
// fired.
func (p *promServer) firingRuns(q string, start, end time.Time) []string {
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
		"step":  {"1"}}, &data)
	var runs []string
	for _, s := range data.Result {
		var last float64
		for _, v := range s.Values {
			at, _ := v[0].(float64)
			if last == 0 || at-last > 1.5 {
				runs = append(runs, fmt.Sprintf("%v from %s", s.Metric, time.UnixMilli(int64(at*1e3)).Format(time.TimeOnly)))
			}
			last = at
		}
	}
	return runs
}
