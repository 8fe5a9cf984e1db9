package breaker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSince_SpansReopensUntilClose(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	_, ok := openSince(h.b)
	assert.False(t, ok)
	h.at(time.Second)
	h.trip()
	h.at(31 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	since, ok := openSince(h.b)
	require.True(t, ok)
	assert.Equal(t, h.t0.Add(time.Second), since)
}

// After a forced open is released, a refusal's OpenError.Since is the
// release, as OpenSince says, so a client's error and the breaker's status
// agree on when the outage began. The test releases a two-hour forced open,
// takes the one probe slot, and is refused.
// Regression (a1b0542): the refusal gave the start of the forced open.
func TestOpenSince_AgreesWithTheRefusalsAfterARelease(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.add(2 * time.Hour)
	require.NoError(t, h.b.SetMode(ModeAuto))
	_, done, err := h.b.Allow(context.Background()) // the probe
	require.NoError(t, err)
	defer done(nil)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	since, ok := openSince(h.b)
	require.True(t, ok)
	assert.Equal(t, h.t0.Add(2*time.Hour), since)
	assert.Equal(t, since, oe.Since)
}

func TestCounters_OpenTimeCoversEveryOutageIncludingTheCurrentOne(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(3, nil) // closed after 30 s open
	assert.Equal(t, 30*time.Second, h.b.Counters().OpenTime)
	h.at(10 * time.Minute)
	h.trip()
	h.at(10*time.Minute + 12*time.Second)
	assert.Equal(t, 42*time.Second, h.b.Counters().OpenTime, "the current outage counts up to now")
	assert.Equal(t, uint64(2), h.b.Counters().Opens)
}

// Opens counts transitions to Open: forcing open a breaker that is already
// open changes no state, makes no event and counts nothing; forcing open a
// half-open one is a transition, and counts.
// Regression (bb01a75): forcing open an open breaker counted an Open.
func TestCounters_ForcingOpenAnOpenBreakerIsNotAnOpen(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(1), h.b.Counters().Opens)
	assert.Len(t, h.eventLog(), 1)
	// From half-open it is a transition, and counts.
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.requireState(HalfOpen)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Equal(t, uint64(2), h.b.Counters().Opens)
}

// recordWhileReading runs writers that each call do until stop, and one
// reader that calls check until the writers have made at least calls
// calls. check returns a description of a broken invariant, or "".
func recordWhileReading(t *testing.T, writers, calls int, do func(w, i int), check func() string) {
	t.Helper()
	var stop atomic.Bool
	var made atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				do(w, i)
				made.Add(1)
			}
		}(w)
	}
	var broken string
	for reads := 0; made.Load() < int64(calls) || reads < 1000; reads++ {
		if broken = check(); broken != "" {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Empty(t, broken)
}

// Counters never go down, however a read falls among the writes: writers
// record failures, timeouts and successes on a breaker that never trips
// while a reader calls Counters in a loop; every field of every read is at
// least its previous value, and Slow is at most Admitted.
// Regression (c0f715c): a read between a failure's adds saw Successes drop.
func TestCounters_NeverGoDownWhileCallsAreRecorded(t *testing.T) {
	p := policy(func(p *Policy) { p.SlowCall = time.Nanosecond; p.SlowRatio = 1 })
	b, err := New("counters.Monotonic", p)
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedClosed))
	ctx := context.Background()
	outcomes := []error{context.DeadlineExceeded, errBoom, context.DeadlineExceeded, nil}
	var prev Counters
	recordWhileReading(t, 4, 200_000, func(w, i int) {
		err := outcomes[(w+i)%len(outcomes)]
		_ = b.Do(ctx, func(context.Context) error { return err })
	}, func() string {
		c := b.Counters()
		if c.Admitted < prev.Admitted || c.Successes < prev.Successes || c.Failures < prev.Failures ||
			c.Timeouts < prev.Timeouts || c.Slow < prev.Slow || c.Ignored < prev.Ignored {
			return fmt.Sprintf("counters went down:\nbefore %+v\nafter  %+v", prev, c)
		}
		if c.Slow > c.Admitted {
			return fmt.Sprintf("more slow calls than admitted ones: %+v", c)
		}
		prev = c
		return ""
	})
}

// snapshotBroken says which ordering of a snapshot does not hold.
func snapshotBroken(s Snapshot) string {
	if s.Timeouts > s.Failures || s.Failures > s.Counted || s.Slow > s.Counted {
		return fmt.Sprintf("torn snapshot %+v: want Timeouts <= Failures <= Counted and Slow <= Counted", s)
	}
	return ""
}

// A snapshot is never torn: however it races with recording, Timeouts <=
// Failures <= Counted and Slow <= Counted. Writers record only timeouts and
// failures, some of them slow, on a breaker that never trips, while a
// reader takes snapshots.
// Regression (c0f715c): a snapshot taken mid-failure had more failures than calls.
func TestSnapshot_IsNeverTorn(t *testing.T) {
	p := policy(func(p *Policy) { p.SlowCall = time.Nanosecond; p.SlowRatio = 1 })
	b, err := New("snapshot.Torn", p)
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedClosed))
	ctx := context.Background()
	recordWhileReading(t, 4, 200_000, func(w, i int) {
		err := errBoom
		if (w+i)%2 == 0 {
			err = context.DeadlineExceeded
		}
		_ = b.Do(ctx, func(context.Context) error { return err })
	}, func() string { return snapshotBroken(b.Snapshot()) })
}

// The snapshot a trip stores in its Event and its OpenError is ordered the
// same way. Writers send only timeouts until the breaker trips, over and
// over: each trip's snapshot is ordered, shows Timeouts == Counted, and is
// the same in the event and in the refusal.
// Regression (c0f715c): the trip rules summed a torn window, and stored it.
func TestSnapshot_OfATripIsNeverTorn(t *testing.T) {
	ctx := context.Background()
	timeout := func(context.Context) error { return context.DeadlineExceeded }
	for round := 0; round < 200; round++ {
		var evs []Event
		var mu sync.Mutex
		b, err := New("trip.Torn", policy(func(p *Policy) { p.MinRequests = 50; p.OpenFor = time.Hour; p.MaxOpenFor = time.Hour }),
			OnTransition(func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }))
		require.NoError(t, err)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b.Do(ctx, timeout) == context.DeadlineExceeded {
				}
			}()
		}
		wg.Wait()
		var oe *OpenError
		require.ErrorAs(t, b.Do(ctx, timeout), &oe)
		require.Empty(t, snapshotBroken(oe.Trip.Window), "round %d: open error", round)
		require.Equal(t, oe.Trip.Window.Counted, oe.Trip.Window.Timeouts, "round %d: only timeouts were recorded: %+v", round, oe.Trip.Window)
		mu.Lock()
		require.Len(t, evs, 1)
		require.Equal(t, oe.Trip.Window, evs[0].Snapshot, "round %d", round)
		mu.Unlock()
	}
}

// Status says why a breaker is not closed, as its refusals do: the trip's
// rule and window while open and half-open, the forced open and the
// window at that moment, and nothing once closed. A status serves as JSON
// and decodes back.
func TestStatus_SaysWhyTheBreakerIsNotClosed(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	const key = "inventory.GetStock"
	gh.calls(key, 8, nil)
	gh.calls(key, 7, context.DeadlineExceeded)
	gh.calls(key, 5, errBoom)
	b, err := gh.g.Get(key)
	require.NoError(t, err)
	trip := Snapshot{Counted: 20, Failures: 12, Timeouts: 7}

	st := b.Status()
	assert.Equal(t, Open, st.State)
	assert.Equal(t, ReasonErrorRatio, st.Reason)
	assert.Equal(t, trip, st.Outage.Trip.Window)
	var oe *OpenError
	require.ErrorAs(t, b.Do(context.Background(), func(context.Context) error { return nil }), &oe)
	assert.Equal(t, oe.Reason, st.Reason, "the status and the refusal agree")
	assert.Equal(t, oe.Trip.Window, st.Outage.Trip.Window)

	gh.clk.Add(defaultOpenFor)
	st = b.Status()
	assert.Equal(t, HalfOpen, st.State)
	assert.Equal(t, ReasonErrorRatio, st.Reason, "half-open: still the trip's reason")
	assert.Equal(t, trip, st.Outage.Trip.Window)
	assert.Equal(t, gh.t0, st.Outage.Since)
	assert.Equal(t, gh.g.Now().Sub(gh.t0), st.Outage.Duration)

	data, err := json.Marshal([]Status{st})
	require.NoError(t, err)
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, "error_ratio", doc[0]["reason"])
	assert.Equal(t, float64(12), doc[0]["outage"].(map[string]any)["trip"].(map[string]any)["window"].(map[string]any)["failures"])
	var back []Status
	require.NoError(t, json.Unmarshal(data, &back), "a status decodes back")
	assert.Equal(t, []Status{st}, back)

	gh.calls(key, defaultProbes, nil)
	st = b.Status()
	require.Equal(t, Closed, st.State)
	assert.Empty(t, st.Reason, "closed")
	require.NotNil(t, st.Outage, "closed, but the outage has not settled")
	assert.True(t, st.Outage.Recovering())
	data, err = json.Marshal(st)
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(data, &top))
	assert.NotContains(t, top, "reason")

	require.NoError(t, b.SetMode(ModeForcedOpen))
	st = b.Status()
	assert.Equal(t, ReasonForcedOpen, st.Reason)
	assert.Equal(t, trip, st.Outage.Trip.Window, "forced open before the outage settled: still its trip")

	var s State
	assert.Error(t, s.UnmarshalText([]byte("ajar")))
	var m Mode
	assert.Error(t, m.UnmarshalText([]byte("manual")))
}

// Status says when an open breaker will let probes through: the end of
// its cooldown, doubled after a failed probe; nothing while half-open,
// closed or forced open.
func TestStatus_ProbeAtIsTheEndOfTheCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	assert.Nil(t, h.b.Status().Until, "closed")
	h.at(time.Second)
	h.trip()
	st := h.b.Status()
	require.NotNil(t, st.Until)
	assert.Equal(t, h.t0.Add(time.Second+defaultOpenFor), *st.Until)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, oe.Until, *st.Until, "the status and the refusal agree")

	h.at(time.Second + defaultOpenFor)
	assert.Nil(t, h.b.Status().Until, "half-open")
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded) // the probe fails
	st = h.b.Status()
	require.Equal(t, Open, st.State)
	require.NotNil(t, st.Until)
	assert.Equal(t, h.t0.Add(time.Second+3*defaultOpenFor), *st.Until, "cooldown doubled")
	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"until":"2026-01-02T03:05:36Z"`)

	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Nil(t, h.b.Status().Until, "forced open")
}

// Status allocates only what it points to: nothing for a breaker that is
// neither timed nor has a candidate policy (a status page or a scrape reads
// thousands of them), one allocation for a timed breaker's Latency.
// Regression (49b2d5b): Status put two pointers that stayed nil on the heap.
func TestStatus_AllocatesOnlyWhatItPointsTo(t *testing.T) {
	plain, err := New("status.Plain", DefaultPolicy())
	require.NoError(t, err)
	_ = plain.Do(context.Background(), func(context.Context) error { return nil })
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = plain.Status() }), "untimed, no candidate")

	// A timed breaker pays for the latency it reports, and no more.
	timed, err := New("status.Timed", policy(func(p *Policy) { p.CallTimeout = time.Second }))
	require.NoError(t, err)
	s := timed.Status()
	require.NotNil(t, s.Latency)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = timed.Status() }), "timed")
}

// Now is the time on the group's clock.
func TestGroup_NowReadsTheGroupsClock(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	assert.Equal(t, gh.t0, gh.g.Now())
	gh.clk.Add(time.Minute)
	assert.Equal(t, gh.t0.Add(time.Minute), gh.g.Now())
}

// Transitions counts every transition by from, to and reason, in the order
// each first happened; Reset does not
// clear them (they are monotonic, like the counters), and a transition to
// the state the breaker is already in is not one.
func TestTransitions_CountEveryTransitionByReason(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	assert.Nil(t, h.b.Transitions(), "a breaker that never left Closed")
	h.trip()
	h.at(31 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded) // probe fails
	h.at(5 * time.Minute)
	h.calls(3, nil) // probes pass
	h.b.SetMode(ModeForcedClosed)
	h.b.Reset() // closed to closed: no transition
	h.at(10 * time.Minute)
	h.trip()

	got := h.b.Transitions()
	assert.Equal(t, []TransitionCount{
		{Closed, Open, ReasonErrorRatio, 2},
		{Open, HalfOpen, ReasonCooldown, 2},
		{HalfOpen, Open, ReasonProbeFailed, 1},
		{HalfOpen, Closed, ReasonProbesPassed, 1},
	}, got)
	got[0].Count = 99
	assert.Equal(t, uint64(2), h.b.Transitions()[0].Count, "the result is a copy")
	assert.Equal(t, uint64(3), h.b.Counters().Opens, "Closed→Open and HalfOpen→Open agree with Opens")
}

// PossibleTransitions lists each transition once, with a count of 0, and
// every transition a breaker makes is among them (TestModel checks the
// rest of the state machine against it).
func TestTransitions_PossibleTransitionsHoldEveryOneMade(t *testing.T) {
	all := PossibleTransitions()
	seen := map[TransitionCount]bool{}
	for _, tc := range all {
		assert.Zero(t, tc.Count)
		assert.False(t, seen[tc], "%v twice", tc)
		seen[tc] = true
	}
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(31 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	require.NoError(t, h.b.SetMode(ModeAuto))
	h.b.Reset()
	for _, tc := range h.b.Transitions() {
		tc.Count = 0
		assert.True(t, seen[tc], "%v is not listed", tc)
	}
	all[0].Count = 7
	assert.Zero(t, PossibleTransitions()[0].Count, "the result is a copy")
}
