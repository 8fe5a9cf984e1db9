package breaker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSince_SpansReopensUntilClose(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	_, ok := h.b.OpenSince()
	assert.False(t, ok)
	h.at(time.Second)
	h.trip()
	h.at(31 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	since, ok := h.b.OpenSince()
	require.True(t, ok)
	assert.Equal(t, h.t0.Add(time.Second), since)
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
	assert.Equal(t, trip, st.Trip)
	var oe *OpenError
	require.ErrorAs(t, b.Do(context.Background(), func(context.Context) error { return nil }), &oe)
	assert.Equal(t, oe.Reason, st.Reason, "the status and the refusal agree")
	assert.Equal(t, oe.Snapshot, st.Trip)

	gh.clk.Add(DefaultOpenFor)
	st = b.Status()
	assert.Equal(t, HalfOpen, st.State)
	assert.Equal(t, ReasonErrorRatio, st.Reason, "half-open: still the trip's reason")
	assert.Equal(t, trip, st.Trip)
	assert.Equal(t, gh.t0, *st.OpenSince)
	assert.Equal(t, gh.g.Now().Sub(gh.t0), st.OpenDuration)

	data, err := json.Marshal([]Status{st})
	require.NoError(t, err)
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, "err_ratio", doc[0]["reason"])
	assert.Equal(t, float64(12), doc[0]["trip"].(map[string]any)["failures"])
	var back []Status
	require.NoError(t, json.Unmarshal(data, &back), "a status decodes back")
	assert.Equal(t, []Status{st}, back)

	gh.calls(key, DefaultProbes, nil)
	st = b.Status()
	require.Equal(t, Closed, st.State)
	assert.Empty(t, st.Reason, "closed")
	assert.Zero(t, st.Trip)
	data, err = json.Marshal(st)
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"reason"`)

	require.NoError(t, b.SetMode(ModeForcedOpen))
	st = b.Status()
	assert.Equal(t, ReasonForcedOpen, st.Reason)
	assert.Equal(t, b.Snapshot(), st.Trip, "the window when it was forced open")

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
	assert.Nil(t, h.b.Status().ProbeAt, "closed")
	h.at(time.Second)
	h.trip()
	st := h.b.Status()
	require.NotNil(t, st.ProbeAt)
	assert.Equal(t, h.t0.Add(time.Second+DefaultOpenFor), *st.ProbeAt)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	assert.Equal(t, oe.Until, *st.ProbeAt, "the status and the refusal agree")

	h.at(time.Second + DefaultOpenFor)
	assert.Nil(t, h.b.Status().ProbeAt, "half-open")
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded) // the probe fails
	st = h.b.Status()
	require.Equal(t, Open, st.State)
	require.NotNil(t, st.ProbeAt)
	assert.Equal(t, h.t0.Add(time.Second+3*DefaultOpenFor), *st.ProbeAt, "cooldown doubled")
	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"probe_at":"2026-01-02T03:05:36Z"`)

	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	assert.Nil(t, h.b.Status().ProbeAt, "forced open")
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
