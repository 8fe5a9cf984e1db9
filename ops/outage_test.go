package ops

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trafficStep is how often the traffic below sends its burst of calls:
// 20 calls every 500 ms of the mock clock, 40 calls/s.
const (
	trafficStep  = 500 * time.Millisecond
	trafficBurst = 20
)

// traffic drives one key of a harness's group through an incident: at
// every step of the mock clock it sends a burst of calls, each answered
// by answer(at) (at since t0), and at every whole watch interval it hands
// the watcher a round and writes down what it notified, as "P3@1m0s".
// While the breaker is open it skips to the step of its next probe or
// round, whichever comes first (a refused burst would change nothing but
// the refusals, and every step costs the mock clock a millisecond of real
// time). check, if set, runs after each step's burst and round.
type traffic struct {
	gh     *groupHarness
	key    string
	answer func(at time.Duration) error
	got    chan Alert
	check  func(at time.Duration, closed bool)

	notes  []string
	alerts []Alert // as notified
	closes int     // steps whose burst closed the breaker
}

func (tr *traffic) run(t *testing.T, from, to time.Duration) {
	t.Helper()
	interval := time.Duration(tr.gh.ticks.interval.Load())
	require.Positive(t, interval, "start the watcher first")
	b, err := tr.gh.g.Get(tr.key)
	require.NoError(t, err)
	for at := from; at <= to; at = tr.next(b, at, interval) {
		tr.gh.clk.Set(tr.gh.t0.Add(at))
		before := b.State()
		for range trafficBurst {
			_ = tr.gh.g.Do(context.Background(), tr.key, func(context.Context) error { return tr.answer(at) })
		}
		closed := before != breaker.Closed && b.State() == breaker.Closed
		if closed {
			tr.closes++
		}
		if at%interval == 0 {
			tr.gh.ticks.hand()
			tr.gh.ticks.hand() // the round is over
			for len(tr.got) > 0 {
				a := <-tr.got
				tr.notes = append(tr.notes, fmt.Sprintf("%v@%v", a.Severity, at))
				tr.alerts = append(tr.alerts, a)
			}
		}
		if tr.check != nil {
			tr.check(at, closed)
		}
	}
}

// next is the step after at: the next one, or, while b is open, the one
// of its next probe or of the next round, whichever comes first.
func (tr *traffic) next(b *breaker.Breaker, at, interval time.Duration) time.Duration {
	n := at + trafficStep
	st := b.Status()
	if st.State != breaker.Open || st.Until == nil {
		return n
	}
	probe := st.Until.Sub(tr.gh.t0)
	probe = (probe + trafficStep - 1) / trafficStep * trafficStep
	round := (at/interval + 1) * interval
	return max(n, min(probe, round))
}

// tripCooldowns records the cooldowns of a group's trips from closed.
type tripCooldowns struct {
	mu  sync.Mutex
	got []time.Duration
}

func (c *tripCooldowns) see(_ *breaker.Breaker, e breaker.Event) {
	if e.From == breaker.Closed && e.To == breaker.Open {
		c.mu.Lock()
		c.got = append(c.got, e.Cooldown)
		c.mu.Unlock()
	}
}

func (c *tripCooldowns) all() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.got...)
}

// Scenario (issue: a hard error outage never pages): a downstream answers
// every call with an error for 40 minutes, under the default policy
// (StrictProbes off, so an answered probe passes). The breaker closes at
// the end of every cooldown on three passing probes and trips again
// 0.5 s later, its cooldown doubling across the closes. Graded on the
// open spell, which restarted at each close, the alert never got past
// P3 and was notified anew at every spell; graded on the outage, it is
// one outage from the first trip, notified once at P3 (1m), P2 (10m) and
// P1 (30m) of its length, and a recovering phase between two trips is
// still the alert. Once the downstream heals and the breaker has stayed
// closed for MaxOpenFor (2m) the outage has settled; the next failure is
// a new outage, notified from P3.
func TestWatch_AHardErrorOutageWithAnsweredProbesIsOneOutage(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	cds := &tripCooldowns{}
	gh.g.Subscribe(cds.see)
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	var recovering []Alert
	tr := &traffic{gh: gh, key: key, got: got,
		answer: func(at time.Duration) error {
			if at < 40*time.Minute || at >= 50*time.Minute {
				return errBoom // 503s
			}
			return nil
		},
		check: func(at time.Duration, closed bool) {
			if closed && at >= time.Minute && at < 40*time.Minute {
				a := Alerts(gh.g, Thresholds{})
				require.Len(t, a, 1, "closed at %v: the outage is still the alert", at)
				recovering = append(recovering, a[0])
			}
		},
	}
	tr.run(t, 0, 52*time.Minute)

	// The fix at 40m closes the breaker by 42m and the outage settles by
	// 44m. The failure from 50m trips the breaker once the window full of
	// successes reaches the ratio, a few seconds later: the new outage is
	// a minute long at the 52m round.
	assert.Equal(t, []string{"P3@1m0s", "P2@10m0s", "P1@30m0s", "P3@52m0s"}, tr.notes,
		"one outage notified once per severity, then the new outage from P3")
	assert.GreaterOrEqual(t, tr.closes, 4+1, "four closes and more inside the outage, and the close after the fix")
	assert.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 2 * time.Minute}, cds.all()[:4],
		"the cooldown doubles across the closes")
	for _, a := range tr.alerts[:3] {
		assert.Equal(t, gh.t0, a.Since, "%v: the outage keeps its start through the closes", a.Severity)
		assert.Equal(t, breaker.ReasonErrorRatio, a.Trip.Reason)
	}
	p1 := tr.alerts[2]
	assert.Equal(t, 30*time.Minute, p1.Duration)
	assert.Greater(t, p1.Trips, 10)
	assert.Positive(t, p1.ProbesPassedOnError)
	assert.Contains(t, p1.Message, fmt.Sprintf("P1: breaker inventory.GetStock has been failing for 30m0s "+
		"(opened on error_ratio: 20 of 20 calls failed, 0 of them timeouts; tripped %d times, %d calls refused",
		p1.Trips, p1.Refused))
	assert.Contains(t, p1.Message, "of its probes passed on errors (the downstream answers, but with errors), "+
		"so the breaker closes and trips again: Policy.StrictProbes would keep it open until the downstream answers without errors; "+
		"check the health of inventory.GetStock")

	require.NotEmpty(t, recovering)
	for _, a := range recovering {
		assert.True(t, a.Recovering, "closed at %v", a.ClosedAt)
		assert.Equal(t, breaker.Closed, a.State)
		assert.Equal(t, gh.t0, a.Since)
		assert.Equal(t, a.ClosedAt.Add(2*time.Minute), a.SettlesAt, "settles MaxOpenFor after the close")
		assert.Equal(t, gh.t0.Add(a.Duration), a.ClosedAt, "graded on the outage's length at the close")
		assert.Contains(t, a.Message, "; closed at "+utcClock(a.ClosedAt)+", settles at "+utcClock(a.SettlesAt)+" if it stays closed)")
	}
	last := tr.alerts[3]
	since := last.Since.Sub(gh.t0)
	assert.True(t, since > 50*time.Minute && since < 50*time.Minute+10*time.Second, "the new outage began at %v", since)
	assert.Less(t, last.Trips, p1.Trips, "the new outage counts its own trips")
}

// Scenario: a downstream that fails for 10 s and recovers for 60 s, over
// and over. Each recovery closes the breaker, but for less than the 2m it
// takes to settle: one outage, notified once per severity, and the alert
// tells it from probes passing on errors.
func TestWatch_AFlappingDownstreamIsOneOutage(t *testing.T) {
	const key = "pricing.GetPrice"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	tr := &traffic{gh: gh, key: key, got: got, answer: func(at time.Duration) error {
		if at < 31*time.Minute && at%(70*time.Second) < 10*time.Second {
			return errBoom
		}
		return nil
	}}
	tr.run(t, 0, 35*time.Minute)

	assert.Equal(t, []string{"P3@1m0s", "P2@10m0s", "P1@30m0s"}, tr.notes)
	assert.Greater(t, tr.closes, 10)
	p1 := tr.alerts[2]
	assert.Equal(t, gh.t0, p1.Since)
	assert.Greater(t, p1.Trips, 10)
	assert.Zero(t, p1.ProbesPassedOnError, "its probes came in the healthy spells")
	assert.Contains(t, p1.Message, "; the downstream recovers and fails again; check the health of pricing.GetPrice")
	assert.NotContains(t, p1.Message, "StrictProbes")
	assert.Empty(t, Alerts(gh.g, Thresholds{}), "healthy since 31m: settled")
}

// Scenario: a downstream that times out for five minutes, then heals.
// Its probes time out (a timeout fails a probe), the cooldown doubles,
// and the first probe after the fix passes: the breaker closes and the
// outage is recovering, still the alert (P3, not notified again), until
// it has stayed closed for 2m. Then it has settled: no alert, and the
// next failure is a new outage, notified from P3.
func TestWatch_ACleanRecoverySettlesAndTheNextFailureIsANewOutage(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	var seen []string
	tr := &traffic{gh: gh, key: key, got: got,
		answer: func(at time.Duration) error {
			switch {
			case at < 5*time.Minute:
				return context.DeadlineExceeded
			case at < 8*time.Minute:
				return nil
			}
			return errBoom
		},
		check: func(at time.Duration, closed bool) {
			switch at {
			case 6 * time.Minute: // closed at 5m30s, the end of a 2m cooldown
				a := Alerts(gh.g, Thresholds{})
				require.Len(t, a, 1)
				assert.True(t, a[0].Recovering)
				assert.Equal(t, gh.t0.Add(330*time.Second), a[0].ClosedAt)
				assert.Equal(t, gh.t0.Add(450*time.Second), a[0].SettlesAt)
				assert.Equal(t, 1, a[0].Trips)
				assert.Equal(t, fmt.Sprintf("P3: breaker inventory.GetStock has been failing for 6m0s "+
					"(opened on error_ratio: 20 of 20 calls failed, 20 of them timeouts; %d calls refused; "+
					"closed at 05:11:37 UTC, settles at 05:13:37 UTC if it stays closed); check the health of inventory.GetStock",
					a[0].Refused), a[0].Message)
				seen = append(seen, "recovering")
			case 450*time.Second - trafficStep:
				assert.Len(t, Alerts(gh.g, Thresholds{}), 1, "not settled yet")
			case 450 * time.Second:
				assert.Empty(t, Alerts(gh.g, Thresholds{}), "settled")
				seen = append(seen, "settled")
			}
		},
	}
	tr.run(t, 0, 10*time.Minute)
	assert.Equal(t, []string{"recovering", "settled"}, seen)
	// The window full of successes trips a few seconds after 8m; the
	// new outage is a minute long at the 10m round.
	assert.Equal(t, []string{"P3@1m0s", "P3@10m0s"}, tr.notes)
	since := tr.alerts[1].Since.Sub(gh.t0)
	assert.True(t, since > 8*time.Minute && since < 8*time.Minute+10*time.Second, "the new outage began at %v", since)
	assert.Less(t, tr.alerts[1].Trips, 5, "the new outage counts its own trips")
}

// Scenario: the process restarts during an outage that a watcher had
// notified at P2. The new process (a new group, a new breaker for the
// key, a new watcher) knows nothing of it: the downstream still fails,
// its breaker trips, and that is a new outage, counted from 0 and
// notified from P3, not at once at P2.
func TestWatch_ARestartedProcessBeginsANewOutage(t *testing.T) {
	const key = "payment.Charge"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	fail := func(time.Duration) error { return errBoom }
	first := &traffic{gh: gh, key: key, got: got, answer: fail}
	first.run(t, 0, 11*time.Minute)
	require.Equal(t, []string{"P3@1m0s", "P2@10m0s"}, first.notes)
	require.NoError(t, w.Close())

	// The new process, on the same clock, from 11m30s.
	g2, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(gh.clk), breaker.WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	gh2 := &groupHarness{t: t, g: g2, clk: gh.clk, t0: gh.t0, ticks: &watchTicks{t: t, clk: gh.clk, c: make(chan time.Time)}}
	got2 := make(chan Alert, 16)
	_, err = gh2.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got2 <- a })
	require.NoError(t, err)
	second := &traffic{gh: gh2, key: key, got: got2, answer: fail}
	second.run(t, 11*time.Minute+trafficStep, 22*time.Minute)
	assert.Equal(t, []string{"P3@13m0s", "P2@22m0s"}, second.notes, "began at 11m30s: 1m long at 12m30s, notified at the 13m round")
	a := second.alerts[0]
	assert.Equal(t, gh.t0.Add(11*time.Minute+trafficStep), a.Since)
	assert.Less(t, a.Trips, first.alerts[1].Trips, "its trips count from 0")
	assert.Less(t, a.Refused, first.alerts[1].Refused, "its refusals count from 0")
}
