package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowPool is a tier of 10 workers, each request holding one for 10 s,
// at 80% load, with a fault that takes 90% of its workers out from 0:10
// to 0:40.
func slowPool() *Scenario {
	return &Scenario{
		Name:     "slow-pool",
		Duration: time.Minute,
		Seed:     1,
		Entry:    Entry{Tier: "pool", Rate: 0.8, Arrivals: Uniform, Timeout: 5 * time.Minute},
		Tiers: []Tier{{
			Name: "pool", Workers: 10, Queue: Unbounded,
			Service: Service{Dist: Constant, Mean: 10 * time.Second},
		}},
		Faults: []Fault{{Tier: "pool", Start: 10 * time.Second, Duration: 30 * time.Second, CapacityLoss: 0.9}},
	}
}

// A capacity loss takes workers out for its duration: the requests
// running when it begins finish, no new one starts while as many are
// busy as are left, and the workers that come back at its end start the
// waiting requests at once, not when the next request finishes.
func TestFault_CapacityLossTakesWorkersOut(t *testing.T) {
	rep := runScenarioOnce(t, slowPool())
	base, faulty := rep.Run(Baseline).Tiers[0], rep.Run(NoBreaker).Tiers[0]
	assert.Equal(t, 8, base.Busy[30], "at 80% load, 8 of the 10 workers are busy")
	// From 0:20 every request running at 0:10 has finished.
	for sec := 21; sec < 40; sec++ {
		assert.LessOrEqual(t, faulty.Busy[sec], 1, "second %d: one worker is left", sec)
	}
	assert.Greater(t, faulty.Queue[39], 10, "the rest wait")
	assert.Equal(t, 10, faulty.Busy[40], "every worker is back, and busy, in the second the fault ends")
}

// The requests a tier is sent are counted per second: at the entry, its
// arrivals; downstream, every call made, retries included.
func TestTierSeries_OfferedCountsEveryCall(t *testing.T) {
	s := &Scenario{
		Name: "retrying", Duration: 20 * time.Second, Seed: 1,
		Entry: Entry{Tier: "front", Rate: 100, Arrivals: Poisson, Timeout: time.Second},
		Tiers: []Tier{
			{Name: "front", Workers: 100, Queue: Unbounded, Service: Service{Dist: Exponential, Mean: time.Millisecond},
				Calls: []Call{{To: "back", Probability: 1, Timeout: 100 * time.Millisecond, NoBreaker: true, Retry: &Retry{Attempts: 3}}}},
			{Name: "back", Workers: 100, Queue: Unbounded, Service: Service{Dist: Exponential, Mean: time.Millisecond}},
		},
		Faults: []Fault{{Tier: "back", Start: 5 * time.Second, Duration: 10 * time.Second, ErrorRate: 0.5}},
	}
	rep := runScenarioOnce(t, s)
	for _, run := range rep.Runs {
		front, back := run.Tiers[0], run.Tiers[1]
		assert.Equal(t, run.Entry.Offered, front.Offered, run.Label)
		assert.EqualValues(t, run.Calls[0].Sent, sum(back.Offered), run.Label)
	}
	no := rep.Run(NoBreaker)
	assert.Positive(t, no.Calls[0].Retries)
	assert.Greater(t, sum(no.Tiers[1].Offered[5:15]), sum(no.Tiers[0].Offered[5:15]), "retries add to the load the faulty tier is sent")
}

func TestFault_CapacityLossIsValidated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(f *Fault)
		field   string
		problem string
	}{
		{"all workers", func(f *Fault) { f.CapacityLoss = 1 }, "faults[0].capacity_loss", "must be in [0, 1)"},
		{"negative", func(f *Fault) { f.CapacityLoss = -0.1 }, "faults[0].capacity_loss", "got -0.1"},
		{"with an outage", func(f *Fault) { f.Outage = OutageHang }, "faults[0].outage", "excludes error_rate, slow_fraction, added_latency and capacity_loss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := slowPool()
			tc.edit(&s.Faults[0])
			err := s.Validate()
			var se *ScenarioError
			require.ErrorAs(t, err, &se)
			require.Len(t, se.Problems, 1, err.Error())
			assert.Equal(t, tc.field, se.Problems[0].Field)
			assert.Contains(t, se.Problems[0].Problem, tc.problem)
		})
	}
	s, err := ParseScenario([]byte(`{"duration": "1m", "entry": {"tier": "a", "rate": 1, "timeout": "1s"},
		"tiers": [{"name": "a", "workers": 2, "service": {"mean": "1ms"}}],
		"faults": [{"tier": "a", "duration": "10s", "capacity_loss": 0.5}]}`))
	require.NoError(t, err)
	assert.Equal(t, 0.5, s.Faults[0].CapacityLoss)
	assert.Equal(t, "a: 50% of workers out for 10s", s.Faults[0].Summary())
}

func runScenarioOnce(t *testing.T, s *Scenario) *Report {
	t.Helper()
	rep, err := Run(s)
	require.NoError(t, err)
	return rep
}
