package breakerprom

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hard error outage, served by the Handler to a real Prometheus that
// evaluates the generated rules (thresholds scaled to the mock clock: P3
// at 20s, P2 at 40s, P1 at 80s of the outage). The downstream answers
// every call with an error; StrictProbes is off, so each probe passes
// and the breaker closes, to trip again on the next calls: one outage
// across four closes. Each grade fires once, stays firing through the
// closes (Prometheus scrapes the breaker closed between them), and
// resolves only once the breaker has stayed closed for MaxOpenFor (40s);
// BreakerFlapping says the probes pass on errors. The open duration used
// to fall to 0 at each close, and BreakerOpen to need an open_reason,
// absent while closed: P2 and P1 never fired and P3 flickered.
func TestAlertRules_AHardErrorOutageIsOneAlertThroughItsCloses(t *testing.T) {
	prom := needTool(t, "prometheus", "prometheus")
	rules, err := AlertRules(AlertConfig{Thresholds: ops.Thresholds{P3: 20 * time.Second, P2: 40 * time.Second, P1: 80 * time.Second}})
	require.NoError(t, err)
	f := newFixture(t) // MetricsPolicy: cooldown 10s doubling to 40s, one probe, MaxOpenFor 40s
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	target, _ := newTarget(t, h)
	p := &promServer{testutil.StartPrometheus(t, prom, "shop", target, rules, scrapeEvery, promWait)}
	start := time.Now()

	// scraped waits until Prometheus has scraped the breaker as it is now,
	// its outage's length and its state.
	b := f.Breaker(pricing)
	scraped := func() {
		t.Helper()
		st := b.Status()
		dur := 0.0
		if st.Outage != nil {
			dur = st.Outage.Duration.Seconds()
		}
		q := fmt.Sprintf(`breaker_open_duration_seconds{name=%q} == %v and on(name) breaker_state{name=%q, state=%q} == 1`,
			pricing, dur, pricing, st.State)
		p.Eventually(fmt.Sprintf("a scrape at %v, %v", dur, st.State), func() (bool, string) {
			return len(p.query(q)) == 1, q
		})
		time.Sleep(2 * scrapeEvery) // and the rules evaluated on it
	}
	firing := func(sev string) bool {
		t.Helper()
		return len(p.query(`ALERTS{alertname="BreakerOpen", alertstate="firing", severity="`+sev+`"}`)) == 1
	}

	f.Calls(pricing, 4, errBoom) // trips at 0s
	scraped()
	for closes := 1; closes <= 4; closes++ {
		// The cooldown ends; the probe answers with an error and passes:
		// closed, and scraped closed.
		f.Clock.Set(*b.Status().Until)
		f.Calls(pricing, 1, errBoom)
		require.Equal(t, breaker.Closed, b.State(), "close %d", closes)
		scraped()
		dur := b.Status().Outage.Duration
		for _, g := range []struct {
			sev string
			at  time.Duration
		}{{"P3", 20 * time.Second}, {"P2", 40 * time.Second}, {"P1", 80 * time.Second}} {
			assert.Equal(t, dur >= g.at, firing(g.sev), "%s at close %d, %v into the outage", g.sev, closes, dur)
		}
		if closes == 4 {
			break
		}
		f.Calls(pricing, 4, errBoom) // trips again
		require.Equal(t, breaker.Open, b.State())
		scraped()
	}
	// BreakerFlapping: tripped 4 times in the outage, on probes that
	// passed on errors.
	var alerts struct {
		Alerts []struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
			State       string            `json:"state"`
		} `json:"alerts"`
	}
	p.API("/api/v1/alerts", url.Values{}, &alerts)
	var flapping []string
	for _, a := range alerts.Alerts {
		if a.Labels["alertname"] == "BreakerFlapping" {
			flapping = append(flapping, a.Annotations["summary"])
			assert.NotContains(t, a.Labels, "reason")
		}
		if a.Labels["alertname"] == "BreakerOpen" {
			assert.NotContains(t, a.Labels, "reason", "what changes in an outage is no label")
			assert.NotContains(t, a.Labels, "trip_reason")
		}
	}
	require.Len(t, flapping, 1)
	assert.Equal(t, "Breaker pricing.GetPrice opened on error_ratio: 4 of 4 calls failed, 0 of them timeouts and tripped 4 times in one outage of "+
		humanizeSeconds(b.Status().Outage.Duration)+": its probes pass on errors", flapping[0])

	// Closed for less than MaxOpenFor: still the outage; then settled.
	f.Clock.Add(39 * time.Second)
	scraped()
	assert.True(t, firing("P1"), "recovering, not settled")
	f.Clock.Add(time.Second)
	require.Nil(t, b.Status().Outage, "settled")
	scraped()
	for _, sev := range []string{"P3", "P2", "P1"} {
		assert.False(t, firing(sev), "%s once the outage has settled", sev)
		// One alert from its first firing to the settle: one run of
		// firing samples, no gap at a close.
		runs := episodes(p.queryRange(`ALERTS{alertname="BreakerOpen", alertstate="firing", severity="`+sev+`"}`, start, time.Now()), pricing)
		assert.Len(t, runs, 1, "%s fired once: %v", sev, runs)
	}
	assert.Empty(t, p.query(`ALERTS{alertname="BreakerFlapping"}`), "Flapping resolves when the outage settles")
}

// humanizeSeconds writes d as Prometheus's humanizeDuration does, for a
// whole number of seconds under an hour: "1m 50s", "40s".
func humanizeSeconds(d time.Duration) string {
	s := int(d / time.Second)
	if s >= 60 {
		return fmt.Sprintf("%dm %ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}
