package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A snapshot grades its alerts from the statuses it holds: the same
// alerts, in the same order, as Alerts gives at that instant, for a group
// with outages of every severity, a forced open and a shadow breaker among
// healthy breakers; and its breakers are sorted by name whatever the
// order of the group's map.
func TestSnapshot_AlertsAndOrderAgreeWithAlerts(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	trip := func(key string) {
		gh.calls(key, 20, errBoom)
		require.Equal(t, breaker.Open, gh.state(key), key)
	}
	trip("billing.Charge@10.0.0.1")
	gh.clk.Add(20 * time.Minute)
	trip("billing.Charge@10.0.0.2")
	gh.clk.Add(9 * time.Minute)
	trip("audit.Write")
	gh.clk.Add(2 * time.Minute)
	for i := 0; i < 50; i++ {
		gh.calls("inventory.GetStock@10.0.1."+strings.Repeat("9", i%3+1)+string(rune('a'+i%26))+string(rune('a'+i/26)), 1, nil)
	}
	f, err := gh.g.Get("maintenance.Window")
	require.NoError(t, err)
	require.NoError(t, f.SetMode(breaker.ModeForcedOpen))
	s, err := gh.g.Get("candidate.Policy")
	require.NoError(t, err)
	require.NoError(t, s.SetMode(breaker.ModeShadow))
	gh.calls("candidate.Policy", 20, errBoom)
	gh.clk.Add(time.Minute)

	th := Thresholds{}
	snap := Snapshot(gh.g, th, nil)
	assert.Equal(t, Alerts(gh.g, th), snap.Alerts)
	require.Len(t, snap.Alerts, 3)
	var sevs []Severity
	for _, a := range snap.Alerts {
		sevs = append(sevs, a.Severity)
	}
	assert.Equal(t, []Severity{SeverityP1, SeverityP2, SeverityP3}, sevs)

	names := make([]string, len(snap.Breakers))
	for i, b := range snap.Breakers {
		names[i] = b.Name
	}
	assert.True(t, slices.IsSorted(names), "sorted by name: %v", names)
	assert.Len(t, names, gh.g.Len())
}

// Regression: idle eviction dropped only closed breakers, so the breakers
// of pods that died (opened by their last calls, never called again) stayed
// in the snapshot for ever, open or half-open, alerting at P1. With a
// watcher running (it evicts every round), they leave the snapshot and its
// alerts once nobody has asked for them in IdleAfter, and the group's
// status counts them.
func TestSnapshot_DeadTargetsLeaveAfterIdleAfter(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{IdleAfter: 40 * time.Minute, ColdTargets: true},
		breaker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(Alert) {})
	require.NoError(t, err)
	var pods []string
	for i := range 10 {
		pods = append(pods, "payment.Charge@10.0.9."+strconv.Itoa(i))
		gh.calls(pods[i], 1, nil)
	}
	gh.clk.Add(time.Minute) // past their cold start
	for _, p := range pods {
		gh.calls(p, 20, errBoom) // the pod dies
		require.Equal(t, breaker.Open, gh.state(p))
	}
	gh.ticks.round()
	for range 31 {
		gh.calls("inventory.GetStock", 1, nil)
		gh.ticks.round()
	}
	snap := Snapshot(gh.g, Thresholds{}, nil)
	require.Len(t, snap.Alerts, 10)
	assert.Equal(t, SeverityP1, snap.Alerts[0].Severity, "dead for half an hour")

	for range 15 {
		gh.calls("inventory.GetStock", 1, nil)
		gh.ticks.round()
	}
	snap = Snapshot(gh.g, Thresholds{}, nil)
	require.Len(t, snap.Breakers, 1)
	assert.Equal(t, "inventory.GetStock", snap.Breakers[0].Name)
	assert.Empty(t, snap.Alerts)
	assert.Equal(t, 1, snap.Group.Breakers)
	assert.Equal(t, uint64(10), snap.Group.Evicted.Open+snap.Group.Evicted.HalfOpen)
}

// A closed breaker that throttles is in the snapshot's JSON with its
// refusal probability and its count of throttled calls, and raises no
// alert: the alerts grade outages by their length, and throttling is no
// state with a start to grade from (the Prometheus rule
// BreakerThrottling, which has the history, alerts on it).
func TestSnapshot_ShowsThrottlingAndRaisesNoAlertForIt(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.ErrorRatio = 0
	p.MinRequests = 2 // the throttle refuses nothing under 3·MinRequests counted calls
	p.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 4}
	gh := newGroupHarness(t, breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	const quote = "quote.Get@10.0.0.9"
	gh.calls(quote, 6, errBoom) // p = 6/7, above the draw of 0.5
	for range 3 {
		require.ErrorIs(t, gh.g.Do(context.Background(), quote, func(context.Context) error { return nil }), breaker.ErrOpen)
	}

	snap := Snapshot(gh.g, Thresholds{}, nil)
	assert.Empty(t, snap.Alerts)
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	var doc struct {
		Breakers []struct {
			Name                string  `json:"name"`
			State               string  `json:"state"`
			ThrottleProbability float64 `json:"throttle_probability"`
			Counters            struct {
				Rejected  uint64 `json:"rejected"`
				Throttled uint64 `json:"throttled"`
			} `json:"counters"`
		} `json:"breakers"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	require.Len(t, doc.Breakers, 1)
	b := doc.Breakers[0]
	assert.Equal(t, "closed", b.State)
	assert.Equal(t, uint64(3), b.Counters.Throttled)
	assert.Equal(t, uint64(3), b.Counters.Rejected)
	assert.InDelta(t, 9.0/10, b.ThrottleProbability, 1e-9)
}
