package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshot_ServesAsJSON(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("orders.Create", 5, nil)
	gh.calls("inventory.GetStock", 12, context.DeadlineExceeded)
	gh.calls("inventory.GetStock", 8, errBoom)
	gh.clk.Add(90 * time.Second) // past the cooldown, so half-open... and P3
	s := Snapshot(gh.g, Thresholds{}, nil)
	require.Len(t, s.Breakers, 2)
	inv := s.Breakers[0]
	assert.Equal(t, "inventory.GetStock", inv.Name, "sorted by name")
	assert.Equal(t, breaker.HalfOpen, inv.State)
	require.NotNil(t, inv.Outage)
	assert.Equal(t, gh.t0, inv.Outage.Since)
	assert.Equal(t, uint64(12), inv.Counters.Timeouts)
	assert.Equal(t, breaker.ReasonErrorRatio, inv.Reason, "why it is open")
	assert.Equal(t, breaker.Snapshot{Counted: 20, Failures: 20, Timeouts: 12}, inv.Outage.Trip.Window)
	assert.Equal(t, gh.g.Now(), s.Time)
	assert.Nil(t, s.Breakers[1].Outage)
	require.Len(t, s.Alerts, 1)

	data, err := json.Marshal(s)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	br := doc["breakers"].([]any)[0].(map[string]any)
	assert.Equal(t, "half_open", br["state"])
	assert.Equal(t, "auto", br["mode"])
	assert.Equal(t, "5s", br["policy"].(map[string]any)["window"])
	assert.Equal(t, "P3", doc["alerts"].([]any)[0].(map[string]any)["severity"])
	assert.Equal(t, 90*time.Second, inv.Outage.Duration)

	var back GroupSnapshot
	require.NoError(t, json.Unmarshal(data, &back), "a snapshot decodes back")
	assert.Equal(t, s.Breakers, back.Breakers)
	assert.Equal(t, s.Alerts[0].Severity, back.Alerts[0].Severity)
	var sev Severity
	assert.Error(t, sev.UnmarshalText([]byte("P0")))
}

// behaviour.md §6 Observability: severity from the outage's length, P3
// ≥1m, P2 ≥10m, P1 ≥30m, with the method and the trip's evidence.
func TestAlerts_SeverityGrowsWithTheOutagesLength(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock@10.0.0.7", 8, nil)
	gh.calls("inventory.GetStock@10.0.0.7", 7, context.DeadlineExceeded)
	gh.calls("inventory.GetStock@10.0.0.7", 5, errBoom)
	gh.calls("orders.Create", 5, nil)
	steps := []struct {
		at   time.Duration
		want Severity
	}{
		{0, SeverityNone},
		{time.Minute - 1, SeverityNone},
		{time.Minute, SeverityP3},
		{10*time.Minute - 1, SeverityP3},
		{10 * time.Minute, SeverityP2},
		{30*time.Minute - 1, SeverityP2},
		{30 * time.Minute, SeverityP1},
	}
	for _, s := range steps {
		gh.clk.Set(gh.t0.Add(s.at))
		alerts := Alerts(gh.g, Thresholds{})
		if s.want == SeverityNone {
			assert.Empty(t, alerts, "at %v", s.at)
			continue
		}
		require.Len(t, alerts, 1, "at %v", s.at)
		a := alerts[0]
		assert.Equal(t, s.want, a.Severity, "at %v", s.at)
		assert.Equal(t, "inventory.GetStock", a.Method)
		assert.Equal(t, "10.0.0.7", a.Target)
		assert.Equal(t, breaker.ReasonErrorRatio, a.Trip.Reason)
		assert.Equal(t, breaker.ReasonErrorRatio, a.Reason)
		assert.Equal(t, breaker.Snapshot{Counted: 20, Failures: 12, Timeouts: 7}, a.Trip.Window)
		assert.Equal(t, s.at, a.Duration)
	}
	a := Alerts(gh.g, Thresholds{})[0]
	assert.Equal(t, "P1: breaker inventory.GetStock@10.0.0.7 has been failing for 30m0s "+
		"(opened on error_ratio: 12 of 20 calls failed, 7 of them timeouts; probing now); check the health of inventory.GetStock on 10.0.0.7", a.Message)
}

// An alert leads with why the breaker opened, the rule and the window
// that tripped it, and says what reopened it since after: a probe that
// timed out 30s into the outage used to make every later alert say the
// breaker had opened on probe_failed, with the trip's window beside it.
func TestAlerts_LeadWithTheTripNotTheLastProbe(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock", 9, nil)
	gh.calls("inventory.GetStock", 9, context.DeadlineExceeded)
	gh.calls("inventory.GetStock", 2, errBoom) // 11 of 20: error_ratio
	gh.clk.Add(30 * time.Second)
	gh.calls("inventory.GetStock", 1, context.DeadlineExceeded) // the probe times out
	gh.clk.Add(41 * time.Second)
	alerts := Alerts(gh.g, Thresholds{})
	require.Len(t, alerts, 1)
	a := alerts[0]
	assert.Equal(t, breaker.ReasonErrorRatio, a.Trip.Reason)
	assert.Equal(t, breaker.ReasonProbeFailed, a.Reason)
	assert.Equal(t, breaker.Snapshot{Counted: 20, Failures: 11, Timeouts: 9}, a.Trip.Window)
	assert.Equal(t, "P3: breaker inventory.GetStock has been failing for 1m11s (opened on error_ratio: 11 of 20 calls failed, "+
		"9 of them timeouts; now probe_failed); check the health of inventory.GetStock", a.Message)
}

func TestAlerts_ForcedAndShadowBreakersAreNotAlerts(t *testing.T) {
	th := Thresholds{P3: time.Second, P2: time.Minute, P1: time.Hour}
	gh := newGroupHarness(t, breaker.GroupConfig{})
	f, _ := gh.g.Get("maintenance.Window")
	require.NoError(t, f.SetMode(breaker.ModeForcedOpen))
	s, _ := gh.g.Get("candidate.Policy")
	require.NoError(t, s.SetMode(breaker.ModeShadow))
	gh.calls("candidate.Policy", 20, errBoom)
	gh.clk.Add(time.Hour)
	assert.Empty(t, Alerts(gh.g, th))
	assert.Equal(t, SeverityP1, th.Severity(time.Hour), "custom thresholds")
	assert.Empty(t, Snapshot(gh.g, th, nil).Alerts)
}

// A forced open is not an outage: a breaker forced open for a two-hour
// maintenance raises no alert, neither while forced nor when released to
// half-open; if its probes then fail, the outage counts from the release.
// OpenTime still counts every minute the breaker was open.
// Regression (5ac3dd3): the release raised a P1 at once, for a healthy downstream.
func TestAlerts_ReleasingAForcedOpenRaisesNoAlert(t *testing.T) {
	for _, tc := range []struct {
		name string
		trip bool // the breaker had tripped on its own before it was forced open
	}{{"from_closed", false}, {"from_open", true}} {
		t.Run(tc.name, func(t *testing.T) {
			gh := newGroupHarness(t, breaker.GroupConfig{})
			const key = "payment.Charge"
			b, err := gh.g.Get(key)
			require.NoError(t, err)
			if tc.trip {
				gh.calls(key, 20, errBoom)
				gh.clk.Add(5 * time.Second)
			}
			require.NoError(t, b.SetMode(breaker.ModeForcedOpen))
			gh.clk.Add(2 * time.Hour)
			assert.Empty(t, Alerts(gh.g, Thresholds{}), "forced open")
			require.NoError(t, b.SetMode(breaker.ModeAuto))
			require.Equal(t, breaker.HalfOpen, b.State())
			assert.Empty(t, Alerts(gh.g, Thresholds{}), "just released")

			// The probes time out: a real outage, counted from the release.
			gh.calls(key, 1, context.DeadlineExceeded)
			require.Equal(t, breaker.Open, b.State())
			gh.clk.Add(time.Minute - 1)
			assert.Empty(t, Alerts(gh.g, Thresholds{}))
			gh.clk.Add(1)
			alerts := Alerts(gh.g, Thresholds{})
			require.Len(t, alerts, 1)
			assert.Equal(t, SeverityP3, alerts[0].Severity)
			assert.Equal(t, time.Minute, alerts[0].Duration)

			// The time spent open still counts every minute of it.
			open := 2*time.Hour + time.Minute
			if tc.trip {
				open += 5 * time.Second
			}
			assert.Equal(t, open, b.Counters().OpenTime)
		})
	}
}

// Thresholds out of order are an error from Validate and from Watch; the
// zero value means the defaults, for grading and for Validate alike.
func TestThresholds_ZeroMeansTheDefaultsAndDisorderIsAnError(t *testing.T) {
	bad := Thresholds{P3: time.Hour, P2: time.Minute, P1: time.Hour}
	assert.ErrorContains(t, bad.Validate(), "alert thresholds")
	assert.ErrorContains(t, Thresholds{P2: time.Minute, P1: time.Hour}.Validate(), "P3=0s")
	gh := newGroupHarness(t, breaker.GroupConfig{})
	w, err := gh.watch(WatchConfig{Interval: time.Minute, Thresholds: bad}, func(Alert) {})
	assert.ErrorContains(t, err, "alert thresholds")
	assert.Nil(t, w)
	assert.Equal(t, int32(0), gh.ticks.starts.Load(), "bad thresholds start no ticks")

	assert.NoError(t, Thresholds{}.Validate())
	def := DefaultThresholds()
	assert.Equal(t, Thresholds{P3: time.Minute, P2: 10 * time.Minute, P1: 30 * time.Minute}, def)
	for _, d := range []time.Duration{0, time.Minute - 1, time.Minute, 10 * time.Minute, time.Hour} {
		assert.Equal(t, def.Severity(d), Thresholds{}.Severity(d), "open %v", d)
	}
	def.P1 = time.Second
	assert.Equal(t, 30*time.Minute, DefaultThresholds().P1, "each call returns its own value")

	var sev Severity
	require.NoError(t, sev.UnmarshalText([]byte("P2")))
	assert.Equal(t, SeverityP2, sev)
	assert.Equal(t, "severity(9)", Severity(9).String())
}

// A downstream that answers every call with an error, under the default
// policy: its probes pass on their answers, so the breaker closes at the
// end of each cooldown and trips again half a second later. It is one
// outage, graded by its length: a P2 at ten minutes, whose message tells
// what the outage has cost and where it stands (here just after a close,
// recovering) and which kind of outage it is.
func ExampleAlerts_anOutageThroughItsCloses() {
	mock := clock.NewMock() // starts at 00:00:00 UTC
	g, _ := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(mock), breaker.WithRand(func() float64 { return 0.5 }))
	const key = "inventory.GetStock"
	b, _ := g.Get(key)
	fail := func(context.Context) error { return errors.New("503 Service Unavailable") }
	for {
		for range 20 { // 20 calls every half second
			_ = g.Do(context.Background(), key, fail)
		}
		if b.State() == breaker.Closed && mock.Now().Sub(time.Unix(0, 0)) >= 10*time.Minute {
			break // closed by its probes, ten minutes into the outage
		}
		mock.Add(500 * time.Millisecond)
	}
	for _, a := range Alerts(g, Thresholds{}) {
		fmt.Println(a.Message)
	}
	// Output:
	// P2: breaker inventory.GetStock has been failing for 11m33s (opened on error_ratio: 20 of 20 calls failed, 0 of them timeouts; tripped 7 times, 27562 calls refused; closed at 00:11:33 UTC, settles at 00:13:33 UTC if it stays closed); 21 of its probes passed on errors (the downstream answers, but with errors), so the breaker closes and trips again: Policy.StrictProbes would keep it open until the downstream answers without errors; check the health of inventory.GetStock
}
