package replay

import (
	"bytes"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// comparedInTest returns a compared scenario as the test runs it: the
// three short ones as shipped, seeds000 with its fault at 0:05 rather
// than 1:00 and cut 35 s after it (a fifth of the work; the chain is
// steady within seconds of its start, and full service is back within
// 20 s of the fault's end).
func comparedInTest(t *testing.T, name string) *Scenario {
	t.Helper()
	s, err := LoadScenario(name)
	require.NoError(t, err)
	if name == "seeds000" {
		s.Faults[0].Start = 5 * time.Second
		s.Duration = 60 * time.Second
	}
	return s
}

// figures are a protection's medians, in the order of the table's
// columns: goodput kept, worst second, fallbacks, load, recovery (s;
// -1 if full service is not back within the run), openings.
type figures [6]float64

var measures = [6]Measure{GoodputKept, WorstSecond, FallbacksServed, FaultLoad, RecoverySeconds, Openings}

func medians(c *Comparison, p int) figures {
	var f figures
	for i, m := range measures {
		sp := c.Spread(p, m)
		f[i] = sp.Median
		if sp.N == 0 {
			f[i] = -1
		}
	}
	return f
}

// pinnedSeedOne are the figures of seed 1 of each compared scenario as
// the suite runs it (seeds000 moved earlier and cut).
var pinnedSeedOne = map[string]map[string]figures{
	"partial-outage": {
		"none":     {0.6029, 0.3297, 0.0, 198.7333, 0.0, 0.0},
		"breaker":  {0.0189, 0.0000, 0.0, 13.8167, 40.0, 2.0},
		"throttle": {0.3278, 0.0097, 0.0, 48.4833, 9.0, 0.0},
		"both":     {0.3278, 0.0097, 0.0, 48.4833, 9.0, 0.0},
	},
	"hard-outage": {
		"none":     {0.4618, 0.0000, 304.0, 174.7000, 0.0, 0.0},
		"breaker":  {0.9866, 0.0591, 24550.0, 13.2500, 60.0, 1.0},
		"throttle": {0.9743, 0.0591, 11105.0, 38.1000, 9.0, 0.0},
		"both":     {0.9747, 0.0591, 24006.0, 18.1000, 58.0, 1.0},
	},
	"overload": {
		"none":     {0.0083, 0.0000, 0.0, 737.0167, -1.0, 0.0},
		"breaker":  {0.0219, 0.0000, 0.0, 32.5667, 41.0, 2.0},
		"throttle": {0.3934, 0.0000, 0.0, 145.2333, 8.0, 0.0},
		"both":     {0.0202, 0.0000, 0.0, 52.4333, 40.0, 2.0},
	},
}

// TestCompare_SeedOneIsPinned pins the comparison of protections on seed
// 1 of each compared scenario (seeds000 moved earlier and cut), so that a
// change to the simulator or the breaker that moves the table is seen in
// the suite. The command's table, medians over ten seeds, is pinned by
// TestCompare_TableMedians under BREAKER_LONG=1. seeds000, at 1,200
// req/s the longest to run by far, is pinned under BREAKER_LONG=1 only:
// the three others exercise every protection and measure.
func TestCompare_SeedOneIsPinned(t *testing.T) {
	t.Parallel()
	for _, name := range ComparedScenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "seeds000" && !long {
				t.Skip("seeds000 is compared under BREAKER_LONG=1 (scripts/stress.sh)")
			}
			c, err := Compare(comparedInTest(t, name), Seeds(1, 1), Protections())
			require.NoError(t, err)
			for p, pr := range c.Protections {
				require.NoError(t, c.Refused[p], pr.Name)
				checkPinned(t, name, pr.Name, pinnedSeedOne, medians(c, p))
			}
		})
	}
}

// checkPinned compares a protection's figures with the pinned ones, and
// names the figures to pin if there are none.
func checkPinned(t *testing.T, scenario, protection string, pinned map[string]map[string]figures, got figures) {
	t.Helper()
	w, ok := pinned[scenario][protection]
	if !ok {
		t.Errorf("%s %s: not pinned: %q: {%.4f, %.4f, %.1f, %.4f, %.1f, %.1f},", scenario, protection, protection, got[0], got[1], got[2], got[3], got[4], got[5])
		return
	}
	for i, m := range measures {
		assert.InDelta(t, w[i], got[i], 1e-3, "%s %s %s", scenario, protection, m)
	}
}

// pinnedTable are the medians over seeds 1 to 10 of the shipped compared
// scenarios: the table docs/replay.md quotes.
var pinnedTable = map[string]map[string]figures{
	"partial-outage": {
		"none":     {0.5991, 0.3167, 0.0, 200.5750, 0.0, 0.0},
		"breaker":  {0.0186, 0.0000, 0.0, 13.8083, 39.5, 2.0},
		"throttle": {0.3379, 0.0051, 0.0, 49.7750, 8.5, 0.0},
		"both":     {0.3379, 0.0051, 0.0, 49.7750, 8.5, 0.0},
	},
	"hard-outage": {
		"none":     {0.4600, 0.0000, 363.5, 174.7750, 0.0, 0.0},
		"breaker":  {0.9908, 0.2654, 24397.0, 13.3375, 58.5, 1.0},
		"throttle": {0.9779, 0.2320, 11057.5, 37.9875, 8.0, 0.0},
		"both":     {0.9781, 0.2320, 23588.0, 18.9375, 56.5, 1.0},
	},
	"overload": {
		"none":     {0.0078, 0.0000, 0.0, 742.6917, -1.0, 0.0},
		"breaker":  {0.0173, 0.0000, 0.0, 29.0583, 38.5, 2.0},
		"throttle": {0.3976, 0.0000, 0.0, 142.5750, 6.5, 0.0},
		"both":     {0.0195, 0.0000, 0.0, 51.2667, 49.0, 2.0},
	},
	"seeds000": {
		"none":     {0.8875, 0.1364, 8812.5, 1099.5500, 0.0, 0.0},
		"breaker":  {0.9998, 0.8230, 38374.0, 221.7000, 14.0, 1.0},
		"throttle": {0.9982, 0.8230, 21936.0, 681.0000, 5.0, 0.0},
		"both":     {0.9982, 0.8230, 21936.0, 681.0000, 5.0, 0.0},
	},
}

// TestCompare_TableMedians pins the medians of the table docs/replay.md
// quotes, which go run ./cmd/breaker-replay -choose prints: every
// compared scenario as shipped, over seeds 1 to 10. About 30 s of CPU
// without the race detector, so it runs under BREAKER_LONG=1 only.
func TestCompare_TableMedians(t *testing.T) {
	if !long {
		t.Skip("the ten-seed table runs under BREAKER_LONG=1 (scripts/stress.sh)")
	}
	for _, name := range ComparedScenarios() {
		s, err := LoadScenario(name)
		require.NoError(t, err)
		c, err := Compare(s, Seeds(s.Seed, 10), Protections())
		require.NoError(t, err)
		for p, pr := range c.Protections {
			require.NoError(t, c.Refused[p], pr.Name)
			checkPinned(t, name, pr.Name, pinnedTable, medians(c, p))
		}
	}
}

// tinyChain is a small chain whose breaker opens on a fault: cheap
// enough to run for the properties of the comparison.
func tinyChain() *Scenario {
	return &Scenario{
		Name: "tiny", Duration: 40 * time.Second, Seed: 1,
		Entry: Entry{Tier: "front", Rate: 100, Arrivals: Poisson, Timeout: time.Second},
		Tiers: []Tier{
			{Name: "front", Workers: 50, Queue: Unbounded, Service: Service{Dist: Exponential, Mean: 2 * time.Millisecond},
				Calls: []Call{{To: "back", Probability: 1, Timeout: 200 * time.Millisecond, Fallback: true}}},
			{Name: "back", Workers: 50, Queue: Unbounded, Service: Service{Dist: Exponential, Mean: 5 * time.Millisecond}},
		},
		Faults: []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 10 * time.Second, Outage: OutageHang}},
		Policy: breaker.DefaultPolicy(),
	}
}

// The unguarded protection is the no-breaker run and the one without an
// overlay the with-breaker run, seed for seed; an overlay is laid over
// every guarded call's own policy.
func TestCompare_ProtectionsAreTheRunsOfTheScenario(t *testing.T) {
	s := tinyChain()
	own := breaker.DefaultPolicy()
	own.MinRequests = 40
	s.Tiers[0].Calls[0].Policy = &own
	c, err := Compare(s, Seeds(2, 2), []Protection{
		{Name: "off", Unguarded: true},
		{Name: "on"},
		{Name: "short cooldown", Overlay: `{"open_for": "5s"}`},
	})
	require.NoError(t, err)
	for k, seed := range c.Seeds {
		sc := *s
		sc.Seed = seed
		rep, err := Run(&sc)
		require.NoError(t, err)
		assert.Equal(t, rep.Run(Baseline).Entry, c.Baselines[k].Entry, "seed %d", seed)
		assert.Equal(t, rep.Run(NoBreaker).Entry, c.Runs[0][k].Entry, "seed %d", seed)
		assert.Equal(t, rep.Run(NoBreaker).Recovery, c.Runs[0][k].Recovery, "seed %d", seed)
		assert.Equal(t, rep.Run(WithBreaker).Entry, c.Runs[1][k].Entry, "seed %d", seed)
		assert.Equal(t, rep.Run(WithBreaker).Calls, c.Runs[1][k].Calls, "seed %d", seed)
	}
	pol := c.Runs[2][0].Calls[0].Policy
	assert.Equal(t, 5*time.Second, pol.OpenFor, "the overlay applies")
	assert.Equal(t, 40, pol.MinRequests, "over the call's own policy")
	assert.Equal(t, []error{nil, nil, nil}, c.Refused)
}

// A protection whose policy the breaker refuses does not run, and its
// error names the protection, its policy and the call; the others run.
func TestCompare_RefusedProtectionNamesItsPolicy(t *testing.T) {
	c, err := Compare(tinyChain(), Seeds(1, 1), []Protection{{Name: "none", Unguarded: true}, {Name: "bad", Overlay: `{"probes": 0}`}})
	require.NoError(t, err)
	require.NotNil(t, c.Runs[0])
	assert.Nil(t, c.Runs[1])
	var pe *ProtectionError
	require.ErrorAs(t, c.Refused[1], &pe)
	assert.Equal(t, "bad", pe.Protection)
	assert.EqualError(t, c.Refused[1], `replay: protection bad: policy {"probes": 0} on front->back: breaker: invalid policy: probes: must be in [1, 100], got 0`)

	var buf bytes.Buffer
	require.NoError(t, c.WriteMarkdown(&buf))
	out := buf.String()
	assert.Contains(t, out, "| bad | not run: policy refused (below) | | | | | |\n")
	assert.Contains(t, out, "\nbad: "+c.Refused[1].Error()+"\n")
	assert.Contains(t, out, "| protection | goodput kept | worst second | fallbacks | load (req/s) | back after (s) | openings |\n")

	_, err = Compare(tinyChain(), nil, Protections())
	assert.EqualError(t, err, "replay: no seeds to run")
	_, err = Compare(tinyChain(), []uint64{0}, Protections())
	assert.EqualError(t, err, "replay: seeds[0] is 0; seeds start at 1")
}

// The measures, on a run whose figures are known: the hang costs the
// breaker's first seconds and the cooldown after the fault.
func TestCompare_Measures(t *testing.T) {
	c, err := Compare(tinyChain(), Seeds(1, 1), []Protection{{Name: "none", Unguarded: true}, {Name: "breaker"}})
	require.NoError(t, err)
	base, no, br := c.Baselines[0], c.Runs[0][0], c.Runs[1][0]

	kept, ok := c.Of(GoodputKept, no, base)
	require.True(t, ok)
	good, ref := sum(no.Entry.Good[10:]), sum(base.Entry.Good[10:]) // the fault starts at 0:10; the run ends before 0:50
	assert.InDelta(t, float64(good)/float64(ref), kept, 1e-12)

	fb, _ := c.Of(FallbacksServed, br, base)
	assert.Equal(t, float64(sum(br.Entry.Degraded)), fb)
	assert.Positive(t, fb)

	load, _ := c.Of(FaultLoad, br, base)
	assert.InDelta(t, float64(sum(br.Tiers[1].Offered[10:20]))/10, load, 1e-12)
	noLoad, _ := c.Of(FaultLoad, no, base)
	assert.Less(t, load, noLoad/2, "the open breaker sends the hung tier little")

	ws, _ := c.Of(WorstSecond, br, base)
	assert.Equal(t, 1-br.WorstDrop, ws)
	_, back := c.Of(RecoverySeconds, br, base)
	assert.False(t, back, "the breaker is still open at the end of the run")
	rec, ok := c.Of(RecoverySeconds, no, base)
	require.True(t, ok)
	assert.Equal(t, no.Recovery.Seconds(), rec)
}
