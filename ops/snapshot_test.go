package ops

import (
	"slices"
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
	snap := Snapshot(gh.g, th)
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
