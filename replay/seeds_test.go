package replay

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A median of an even count is the mean of the two middle values, unless
// one of them is infinite (a run that answered nothing).
func TestSpread_MedianAndRange(t *testing.T) {
	assert.Equal(t, Spread{Median: 3, Min: 1, Max: 9, N: 3}, spreadOf([]float64{9, 1, 3}))
	assert.Equal(t, Spread{Median: 4, Min: 1, Max: 9, N: 4}, spreadOf([]float64{9, 1, 3, 5}))
	inf := math.Inf(1)
	assert.Equal(t, Spread{Median: inf, Min: 2, Max: inf, N: 2}, spreadOf([]float64{inf, 2}))
	assert.Equal(t, Spread{}, spreadOf(nil))
}

// faultyPair is pair with an outage of back that its breaker cuts short.
func faultyPair() *Scenario {
	s := pair(100, 40*time.Second)
	s.Entry.Arrivals = Poisson
	s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 10 * time.Second, ErrorRate: 0.9}}
	return s
}

// Each seed runs on a copy of the scenario with that seed; the spreads
// are those of the seeds' own reports, and the text prints them as
// median [least, greatest].
func TestRunSeeds_SpreadOverSeeds(t *testing.T) {
	s := faultyPair()
	all, err := RunSeeds(s, Seeds(3, 4))
	require.NoError(t, err)
	require.Len(t, all.Reports, 4)
	assert.Equal(t, []uint64{3, 4, 5, 6}, all.Seeds)
	assert.Equal(t, uint64(7), s.Seed, "the scenario given is left as it was")
	var drops []float64
	for i, rep := range all.Reports {
		assert.Equal(t, all.Seeds[i], rep.Scenario.Seed)
		drops = append(drops, rep.Run(NoBreaker).WorstDrop)
	}
	c := *s
	c.Seed = 5
	alone, err := Run(&c)
	require.NoError(t, err)
	assert.Equal(t, alone.Run(NoBreaker).Entry.Good, all.Reports[2].Run(NoBreaker).Entry.Good, "a seed's report is its own run's")
	assert.Equal(t, spreadOf(drops), all.Spread(NoBreaker, WorstDrop))
	assert.NotEqual(t, all.Spread(NoBreaker, WorstDrop).Min, all.Spread(NoBreaker, WorstDrop).Max, "the seeds differ")

	open := all.Spread(WithBreaker, FirstOpen)
	assert.Equal(t, 4, open.N, "every seed's breaker opens")
	assert.Greater(t, open.Min, 0.0)
	_, ok := FirstOpen.Of(all.Reports[0], NoBreaker)
	assert.False(t, ok, "no breaker, no time to open")

	var buf bytes.Buffer
	require.NoError(t, all.WriteText(&buf))
	out := buf.String()
	assert.Contains(t, out, "over 4 seeds (3-6): median [least, greatest]\n")
	d := all.Spread(NoBreaker, WorstDrop)
	assert.Contains(t, out, fmt.Sprintf("%.1f%% [%.1f%%, %.1f%%]", d.Median*100, d.Min*100, d.Max*100))
	assert.Contains(t, out, "goodput amplification *")
	assert.Contains(t, out, amplificationNote)
}

func TestRunSeeds_BadSeeds(t *testing.T) {
	_, err := RunSeeds(faultyPair(), nil)
	assert.EqualError(t, err, "replay: no seeds to run")
	_, err = RunSeeds(faultyPair(), []uint64{1, 0})
	assert.EqualError(t, err, "replay: seeds[1] is 0; seeds start at 1")
	bad := faultyPair()
	bad.Duration = 0
	_, err = RunSeeds(bad, Seeds(1, 2))
	assert.ErrorContains(t, err, "duration")
}

func TestSeedList(t *testing.T) {
	assert.Equal(t, "1-10", seedList(Seeds(1, 10)))
	assert.Equal(t, "1, 3, 7-9", seedList([]uint64{1, 3, 7, 8, 9}))
	assert.Equal(t, "4", seedList([]uint64{4}))
}
