package breaker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker/internal/latency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// latRelErr is the bound on a quantile's relative error for durations of
// at least 32 units (32.8 µs): half a bin of 1/16 of its lower bound,
// seen from the bin's best point.
const latRelErr = 1.0 / 33

// latTop is the latency an adaptive deadline is computed from when the
// quantile falls in the bin of d: the top of that bin.
func latTop(d time.Duration) time.Duration { return latency.BinTop(latency.Bin(int64(d))) }

// The tests of this file, but for the race hammer, share nothing and run in
// parallel: most of their time goes to the mock clock's steps, which
// sleep, and to simulations on one goroutine.

// latHarness is a harness whose calls take a set time on the mock clock.
type latHarness struct{ *harness }

func newLatHarness(t *testing.T, p Policy, opts ...Option) latHarness {
	return latHarness{newHarness(t, p, opts...)}
}

// take runs one call that takes d and returns err, or, if err is nil and
// the call's context ends first, ctx.Err().
func (h latHarness) take(ctx context.Context, d time.Duration, err error) error {
	return h.b.Do(ctx, func(ctx context.Context) error {
		h.clk.Add(d)
		if err == nil && ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	})
}

// drive makes one call that takes d every gap until the clock reaches
// t0+until.
func (h latHarness) drive(until, gap, d time.Duration, err error) {
	h.t.Helper()
	for end := h.t0.Add(until); h.clk.Now().Before(end); {
		got := h.take(context.Background(), d, err)
		require.NotErrorIs(h.t, got, ErrOpen)
		h.clk.Add(gap - d)
	}
}

func (h latHarness) latency() Latency {
	h.t.Helper()
	lat, ok := h.b.Latency()
	require.True(h.t, ok, "a timed breaker has a latency")
	return lat
}

// TestLatency_UntimedBreakerHasNone: a breaker with neither a deadline
// nor a slow-call rule keeps no histogram, reports none, and its Status
// has no latency.
func TestLatency_UntimedBreakerHasNone(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, DefaultPolicy())
	h.drive(2*time.Second, 100*time.Millisecond, 10*time.Millisecond, nil)
	assert.Nil(t, h.b.rules.Load().lat)
	_, ok := h.b.Latency()
	assert.False(t, ok)
	assert.Nil(t, h.b.Status().Latency)
	assert.Zero(t, h.b.Timeout())
}

// TestLatency_RollsWithTheWindow: the quantiles cover the window only. A
// change of latency is the whole picture once one window has passed, and
// an idle window is empty.
func TestLatency_RollsWithTheWindow(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, policy(func(p *Policy) { p.SlowCall, p.SlowRatio = time.Second, 1 }))
	// Calls every 100 ms; at t the window holds the ten 500 ms buckets
	// up to the one holding t: 45 calls.
	h.drive(5*time.Second, 100*time.Millisecond, 20*time.Millisecond, nil)
	lat := h.latency()
	assert.Equal(t, uint64(45), lat.Samples)
	assert.Equal(t, h.b.Snapshot().Counted, lat.Samples)
	assert.InEpsilon(t, float64(20*time.Millisecond), float64(lat.P50), latRelErr)
	assert.InEpsilon(t, float64(20*time.Millisecond), float64(lat.P999), latRelErr)

	h.drive(6*time.Second, 100*time.Millisecond, 80*time.Millisecond, nil)
	lat = h.latency()
	assert.Equal(t, uint64(45), lat.Samples, "35 old calls and 10 new")
	assert.InEpsilon(t, float64(20*time.Millisecond), float64(lat.P50), latRelErr)
	assert.InEpsilon(t, float64(80*time.Millisecond), float64(lat.P90), latRelErr)

	h.drive(10*time.Second, 100*time.Millisecond, 80*time.Millisecond, nil)
	lat = h.latency()
	assert.Equal(t, uint64(45), lat.Samples)
	assert.InEpsilon(t, float64(80*time.Millisecond), float64(lat.P50), latRelErr, "the old calls have left")
	assert.Equal(t, uint64(100), lat.SamplesTotal)

	h.add(time.Minute)
	lat = h.latency()
	assert.Zero(t, lat.Samples)
	assert.Zero(t, lat.P99)
	assert.Equal(t, uint64(100), lat.SamplesTotal)
}

// TestLatency_TimeoutsAreCensored: a call cut by its deadline, or late
// for it, is counted apart, and in the quantiles only as a call that
// lasted at least as long as it did; failures that answered are measured
// like successes. A quantile beyond the longest call measured is unknown.
func TestLatency_TimeoutsAreCensored(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, policy(func(p *Policy) { p.CallTimeout = 100 * time.Millisecond; p.MinRequests = 1000 }))
	ctx := context.Background()
	require.NoError(t, h.take(ctx, 10*time.Millisecond, nil))
	require.ErrorIs(t, h.take(ctx, 30*time.Millisecond, errBoom), errBoom)
	require.ErrorIs(t, h.take(ctx, time.Second, nil), context.DeadlineExceeded) // hung until cut
	require.NoError(t, h.b.Do(ctx, func(context.Context) error {
		h.clk.Add(time.Second) // ignores its context and answers late
		return nil
	}))
	lat := h.latency()
	assert.Equal(t, uint64(2), lat.Samples)
	assert.Equal(t, uint64(2), lat.Censored)
	assert.InEpsilon(t, float64(30*time.Millisecond), float64(lat.P50), latRelErr, "the 2nd of 4")
	assert.Zero(t, lat.P90, "half the calls lasted more than 30 ms, how much more is unknown")
	assert.Zero(t, lat.P999)
	assert.Equal(t, 100*time.Millisecond, lat.Timeout)
	assert.Equal(t, uint64(2), h.b.Counters().Timeouts)
	st := h.b.Status()
	require.NotNil(t, st.Latency)
	assert.Equal(t, lat, *st.Latency)
}

// adaptivePolicy is the policy of the adaptive timeout tests: deadline in
// [20ms, 2s], starting at 2s, recomputed from at least 20 calls.
func adaptivePolicy(f func(p *Policy)) Policy {
	return policy(func(p *Policy) {
		p.AdaptiveTimeout.Enabled = true
		p.AdaptiveTimeout.Min = 20 * time.Millisecond
		p.AdaptiveTimeout.Max = 2 * time.Second
		p.MinRequests = 20
		if f != nil {
			f(p)
		}
	})
}

// TestAdaptiveTimeout_StartsAtTimeoutOrMax: until it has adapted, the
// deadline is Policy.CallTimeout, or AdaptiveTimeout.Max when CallTimeout
// is 0.
func TestAdaptiveTimeout_StartsAtTimeoutOrMax(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	assert.Equal(t, 2*time.Second, h.b.Timeout())
	h2 := newLatHarness(t, adaptivePolicy(func(p *Policy) { p.CallTimeout = 300 * time.Millisecond }))
	assert.Equal(t, 300*time.Millisecond, h2.b.Timeout())
	h2.drive(10*time.Second, 100*time.Millisecond, 10*time.Millisecond, nil)
	assert.Equal(t, 300*time.Millisecond, h2.latency().Timeout, "not recomputed before AdaptiveInterval")
}

// TestAdaptiveTimeout_RecomputedEveryInterval: the deadline changes at the
// first call AdaptiveInterval after the histogram began, not before, and
// then once an interval.
func TestAdaptiveTimeout_RecomputedEveryInterval(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(AdaptiveInterval-200*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond, nil)
	assert.Equal(t, 2*time.Second, h.b.Timeout(), "before the first recompute")
	h.drive(AdaptiveInterval+200*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond, nil)
	assert.Equal(t, 2*latTop(50*time.Millisecond), h.b.Timeout(), "2 × P99 of 50 ms")
	var changes int
	for _, e := range h.eventLog() {
		if e.Reason == ReasonTimeoutAdapted {
			changes++
		}
	}
	assert.Equal(t, 1, changes)
}

// TestAdaptiveTimeout_FollowsALatencyShiftWithinOneRecompute: after the
// latency moves, up or down, the deadline follows at the next recompute:
// clamp(P99 × factor + base, min, max).
func TestAdaptiveTimeout_FollowsALatencyShiftWithinOneRecompute(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(func(p *Policy) { p.AdaptiveTimeout.Base = 5 * time.Millisecond }))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	first := h.b.Timeout()
	assert.Equal(t, 2*latTop(50*time.Millisecond)+5*time.Millisecond, first)

	// Up, within the deadline in force: 80 ms calls.
	h.drive(61*time.Second, 200*time.Millisecond, 80*time.Millisecond, nil)
	assert.Equal(t, 2*latTop(80*time.Millisecond)+5*time.Millisecond, h.b.Timeout())

	// Down: 20 ms calls.
	h.drive(91*time.Second, 200*time.Millisecond, 20*time.Millisecond, nil)
	assert.Equal(t, 2*latTop(20*time.Millisecond)+5*time.Millisecond, h.b.Timeout())
}

// TestAdaptiveTimeout_StaysWithinMinAndMax: a latency whose deadline
// would fall below AdaptiveTimeout.Min gets AdaptiveTimeout.Min, one whose deadline would
// pass AdaptiveTimeout.Max gets AdaptiveTimeout.Max.
func TestAdaptiveTimeout_StaysWithinMinAndMax(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(31*time.Second, 200*time.Millisecond, time.Millisecond, nil)
	assert.Equal(t, 20*time.Millisecond, h.b.Timeout(), "2 ms clamped to the min")

	h2 := newLatHarness(t, adaptivePolicy(nil))
	h2.drive(10*time.Second, 200*time.Millisecond, 30*time.Millisecond, nil)
	h2.drive(40*time.Second, 2*time.Second, 1500*time.Millisecond, nil)
	lat := h2.latency()
	assert.Equal(t, 2*time.Second, lat.Timeout, "3 s clamped to the max")
	assert.Equal(t, uint64(0), lat.Censored)
}

// TestAdaptiveTimeout_HangEverythingDoesNotRaiseIt: when every call hangs
// until its deadline, the timed-out calls are censored and the window
// holds no completed call, so the deadline stays where it was instead of
// climbing towards AdaptiveTimeout.Max. (The breaker is forced closed so that it
// keeps calling through recomputes; in ModeAuto it trips.)
func TestAdaptiveTimeout_HangEverythingDoesNotRaiseIt(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	adapted := h.b.Timeout()
	require.Equal(t, 2*latTop(50*time.Millisecond), adapted)

	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.drive(3*time.Minute, 500*time.Millisecond, 400*time.Millisecond, nil) // hangs: cut at the deadline
	lat := h.latency()
	assert.Equal(t, adapted, lat.Timeout)
	assert.Zero(t, lat.Samples)
	assert.Positive(t, lat.Censored)
	assert.Positive(t, h.b.Counters().Timeouts)
}

// TestAdaptiveTimeout_TooFewSamplesKeepThePreviousValue: a recompute over
// a window with fewer than MinRequests completed calls changes nothing.
func TestAdaptiveTimeout_TooFewSamplesKeepThePreviousValue(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	adapted := h.b.Timeout()
	// One call a second: 5 in the window, below MinRequests = 20.
	h.drive(2*time.Minute, time.Second, 10*time.Millisecond, nil)
	assert.Equal(t, adapted, h.b.Timeout())
	// Back to 5 a second, over the next recompute (30 s after the last
	// one, at about 2m03s).
	h.drive(2*time.Minute+35*time.Second, 200*time.Millisecond, 10*time.Millisecond, nil)
	assert.Equal(t, 2*latTop(10*time.Millisecond), h.b.Timeout())
}

// TestAdaptiveTimeout_CallerDeadlineWins: the deadline a call gets is the
// earlier of the caller's and the adaptive one.
func TestAdaptiveTimeout_CallerDeadlineWins(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	adapted := h.b.Timeout()
	require.Less(t, adapted, time.Second)

	deadlineOf := func(ctx context.Context) time.Time {
		var got time.Time
		require.NoError(t, h.b.Do(ctx, func(ctx context.Context) error {
			var ok bool
			got, ok = ctx.Deadline()
			require.True(t, ok)
			return nil
		}))
		return got
	}
	early := time.Now().Add(5 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), early)
	defer cancel()
	assert.Equal(t, early, deadlineOf(ctx), "the caller's earlier deadline")

	late, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	before := time.Now()
	got := deadlineOf(late)
	assert.WithinRange(t, got, before.Add(adapted), time.Now().Add(adapted), "the adaptive deadline")
}

// TestAdaptiveTimeout_ChangeIsAnEventAndALogRecord: every change is an
// event (Reason timeout_adapted, no change of state, old → new and the
// quantile it came from) and a log record; it is not a transition.
func TestAdaptiveTimeout_ChangeIsAnEventAndALogRecord(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newLatHarness(t, adaptivePolicy(nil), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)

	evs := h.eventLog()
	require.Len(t, evs, 1)
	e := evs[0]
	assert.Equal(t, ReasonTimeoutAdapted, e.Reason)
	assert.Equal(t, Closed, e.From)
	assert.Equal(t, Closed, e.To)
	require.NotNil(t, e.Timeout)
	assert.Equal(t, 2*time.Second, e.Timeout.Old)
	assert.Equal(t, h.b.Timeout(), e.Timeout.New)
	assert.Equal(t, 0.99, e.Timeout.Quantile)
	assert.Equal(t, latTop(50*time.Millisecond), e.Timeout.Latency)
	assert.GreaterOrEqual(t, e.Timeout.Samples, uint64(20))
	assert.Equal(t, e.Timeout.Samples, e.Snapshot.Counted)
	assert.Nil(t, h.b.Transitions(), "a change of timeout is not a transition")

	line := buf.String()
	assert.Contains(t, line, `msg="timeout changed"`)
	assert.Contains(t, line, "breaker.reason=timeout_adapted breaker.old=2s breaker.new="+e.Timeout.New.String())
	assert.Contains(t, line, "breaker.quantile=0.99 breaker.latency="+e.Timeout.Latency.String()+" breaker.samples="+strconv.FormatUint(e.Timeout.Samples, 10))

	// Same latency, same deadline: no event.
	h.drive(61*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	assert.Len(t, h.eventLog(), 1)
}

// TestAdaptiveTimeout_LateCallIsATimeout: a call that returns nil after
// the adaptive deadline it was given is a timeout, as under a fixed
// Policy.CallTimeout, and censored.
func TestAdaptiveTimeout_LateCallIsATimeout(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(func(p *Policy) { p.CallTimeout = 100 * time.Millisecond }))
	require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
		h.clk.Add(150 * time.Millisecond)
		return nil
	}))
	require.NoError(t, h.take(context.Background(), 90*time.Millisecond, nil))
	assert.Equal(t, uint64(1), h.b.Counters().Timeouts)
	lat := h.latency()
	assert.Equal(t, uint64(1), lat.Censored)
	assert.Equal(t, uint64(1), lat.Samples)
}

// TestAdaptiveTimeout_KeptAcrossAWindowChange: SetPolicy with another
// window starts a new histogram but keeps the deadline in force, within
// the new bounds.
func TestAdaptiveTimeout_KeptAcrossAWindowChange(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, adaptivePolicy(nil))
	h.drive(31*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	adapted := h.b.Timeout()
	require.NoError(t, h.b.SetPolicy(adaptivePolicy(func(p *Policy) { p.Window = 10 * time.Second })))
	assert.Equal(t, adapted, h.b.Timeout())
	h.drive(32*time.Second, 200*time.Millisecond, 50*time.Millisecond, nil)
	assert.Equal(t, adapted, h.b.Timeout())
	assert.Equal(t, uint64(5), h.latency().Samples, "a new histogram")
	require.NoError(t, h.b.SetPolicy(adaptivePolicy(func(p *Policy) { p.Window = 10 * time.Second; p.AdaptiveTimeout.Min = 150 * time.Millisecond })))
	assert.Equal(t, 150*time.Millisecond, h.b.Timeout(), "clamped to the new bounds")
	require.NoError(t, h.b.SetPolicy(DefaultPolicy()))
	assert.Nil(t, h.b.rules.Load().lat)
	assert.Zero(t, h.b.Timeout())
}

// TestAdaptiveTimeout_PolicyValidation: the adaptive fields are checked
// like the others, each problem naming its field.
func TestAdaptiveTimeout_PolicyValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f       func(p *Policy)
		field   string
		problem string
	}{
		{func(p *Policy) { p.AdaptiveTimeout.Max = 0 }, "adaptive_timeout.max", "must be positive when adaptive_timeout.enabled is true"},
		{func(p *Policy) { p.AdaptiveTimeout.Quantile = 1 }, "adaptive_timeout.quantile", "must be in (0, 1), got 1"},
		{func(p *Policy) { p.AdaptiveTimeout.Quantile = 0 }, "adaptive_timeout.quantile", "must be in (0, 1), got 0"},
		{func(p *Policy) { p.AdaptiveTimeout.Factor = 0.5 }, "adaptive_timeout.factor", "must be in [1, 10], got 0.5"},
		{func(p *Policy) { p.AdaptiveTimeout.Factor = math.Inf(1) }, "adaptive_timeout.factor", "must be in [1, 10], got +Inf"},
		{func(p *Policy) { p.AdaptiveTimeout.Min = 3 * time.Second }, "adaptive_timeout.min", "must be at most adaptive_timeout.max (2s), got 3s"},
		{func(p *Policy) { p.AdaptiveTimeout.Base = -time.Millisecond }, "adaptive_timeout.base", "must not be negative"},
		{func(p *Policy) { p.CallTimeout = 5 * time.Second }, "call_timeout", "must be in [adaptive_timeout.min, adaptive_timeout.max] ([20ms, 2s]), got 5s"},
	} {
		err := adaptivePolicy(c.f).Validate()
		var pe *PolicyError
		require.ErrorAs(t, err, &pe, c.field)
		require.Len(t, pe.Problems, 1, "%v", pe)
		assert.Equal(t, c.field, pe.Problems[0].Field)
		assert.Contains(t, pe.Problems[0].Problem, c.problem)
	}
	// A Policy built field by field, without the adaptive timeout, is
	// valid with the adaptive fields at 0.
	p := DefaultPolicy()
	p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = 0, 0
	assert.NoError(t, p.Validate())

	_, err := ParsePolicy([]byte(`{"adaptive_timeout": {"enabled": true, "max": "1s", "factor": "2"}}`))
	assert.ErrorContains(t, err, "adaptive_timeout.factor: want a number")
	got, err := ParsePolicy([]byte(`{"adaptive_timeout": {"enabled": true, "max": "1s", "min": "10ms", "base": "2ms", "quantile": 0.95, "factor": 3}}`))
	require.NoError(t, err)
	assert.Equal(t, adaptivePolicy(func(p *Policy) {
		p.MinRequests = defaultMinRequests
		p.AdaptiveTimeout.Max, p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Base = time.Second, 10*time.Millisecond, 2*time.Millisecond
		p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = 0.95, 3
	}), got)
}

// TestTimeoutChange_JSON: an event of a timeout change round-trips, with
// its durations as strings; a transition's JSON has no timeout key.
func TestTimeoutChange_JSON(t *testing.T) {
	t.Parallel()
	e := Event{Name: "a", Reason: ReasonTimeoutAdapted, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Timeout: &TimeoutChange{Old: 2 * time.Second, New: 240 * time.Millisecond, Quantile: 0.99, Latency: 120 * time.Millisecond, Samples: 40}}
	data, err := e.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"timeout":{"old":"2s","new":"240ms","quantile":0.99,"latency":"120ms","samples":40}`)
	var back Event
	require.NoError(t, back.UnmarshalJSON(data))
	assert.Equal(t, e, back)

	data, err = Event{Name: "a"}.MarshalJSON()
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"timeout"`)

	var c TimeoutChange
	assert.ErrorContains(t, c.UnmarshalJSON([]byte(`{"new":"soon"}`)), "timeout.new")
	assert.ErrorContains(t, c.UnmarshalJSON([]byte(`{"old":"-1s"}`)), "negative")
	assert.ErrorContains(t, c.UnmarshalJSON([]byte(`{"samples":"x"}`)), "timeout.samples")
	assert.Equal(t, TimeoutChange{}, c, "unchanged on error")
}

// TestLatency_InStatusJSON: a timed breaker's Status, which ops.Snapshot
// serves, carries its latency with durations in _ns keys; an untimed
// breaker's has no latency key.
func TestLatency_InStatusJSON(t *testing.T) {
	t.Parallel()
	h := newLatHarness(t, policy(func(p *Policy) { p.CallTimeout = 300 * time.Millisecond }))
	h.drive(time.Second, 100*time.Millisecond, 20*time.Millisecond, nil)
	data, err := json.Marshal(h.b.Status())
	require.NoError(t, err)
	var st struct {
		Latency map[string]any `json:"latency"`
	}
	require.NoError(t, json.Unmarshal(data, &st))
	require.NotNil(t, st.Latency, "%s", data)
	for _, k := range []string{"samples", "censored", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "timeout_ns", "samples_total", "censored_total", "sum_total_ns"} {
		assert.Contains(t, st.Latency, k)
	}
	assert.EqualValues(t, 300*time.Millisecond, st.Latency["timeout_ns"])
	assert.EqualValues(t, 10, st.Latency["samples"])

	untimed := newLatHarness(t, DefaultPolicy())
	data, err = json.Marshal(untimed.b.Status())
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"latency"`)
}

// stepClock is a Clock that moves on by step at every reading, so that
// concurrent callers see time pass, and recomputes fall due, without a
// driver.
type stepClock struct {
	t0   time.Time
	n    atomic.Int64
	step time.Duration
}

func (c *stepClock) Now() time.Time { return c.t0.Add(time.Duration(c.n.Add(1)) * c.step) }

// TestRace_AdaptiveTimeoutHammer: callers, readers of the latency and the
// status, and policy changes run at once on an adaptive breaker, across
// many buckets and recomputes. Run under -race. The deadline stays within
// its bounds, every change arrives as an event whose old value is the
// previous event's new one, and every call is measured or censored once.
func TestRace_AdaptiveTimeoutHammer(t *testing.T) {
	clk := &stepClock{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), step: 3 * time.Millisecond}
	p := adaptivePolicy(func(p *Policy) {
		p.Window, p.Buckets = time.Second, 10
		p.MinRequests = 5
		p.ErrorRatio = 1 // trips only if every call fails
	})
	var mu sync.Mutex
	var changes []TimeoutChange
	b, err := New("hammer.latency", p, WithClock(clk), OnTransition(func(e Event) {
		if e.Timeout != nil {
			mu.Lock()
			changes = append(changes, *e.Timeout)
			mu.Unlock()
		}
	}))
	require.NoError(t, err)

	const workers, each = 4, 3000
	var calls, wg sync.WaitGroup
	var made atomic.Int64 // calls made so far
	stop := make(chan struct{})
	for w := range workers {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for i := range each {
				_ = b.Do(context.Background(), func(context.Context) error {
					if (i+w)%7 == 0 {
						return errBoom
					}
					return nil
				})
				made.Add(1)
				if d := b.Timeout(); d < p.AdaptiveTimeout.Min || d > p.AdaptiveTimeout.Max {
					t.Errorf("deadline %v outside [%v, %v]", d, p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The reader reads the shared step clock too: it goes at most
		// once per few calls, so that it cannot stretch every call past
		// the deadline, which would leave the quantile unknown.
		var seen int64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if n := made.Load(); n < seen+4 {
				runtime.Gosched()
				i--
				continue
			} else {
				seen = n
			}
			_ = b.Status()
			if i%50 == 0 {
				q := p
				q.AdaptiveTimeout.Factor = 1.5 + float64(i%100)/100
				_ = b.SetPolicy(q)
			}
		}
	}()
	calls.Wait()
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, changes, "the deadline adapted")
	for i := 1; i < len(changes); i++ {
		assert.Equal(t, changes[i-1].New, changes[i].Old, "change %d", i)
	}
	lat, ok := b.Latency()
	require.True(t, ok)
	c := b.Counters()
	assert.Equal(t, c.Successes+c.Failures+c.Timeouts, lat.SamplesTotal+lat.CensoredTotal, "every call measured or censored once")
}

// latSim drives a breaker's histogram and adaptive timeout as finish
// does, at instants it chooses on the breaker's time (its mock clock
// never moves). A call whose latency passes the deadline in force is cut
// there: a timeout, censored at the deadline. One that passes its
// caller's own earlier deadline is cut there, likewise. The others are
// measured.
//
// Only the calls in the window each recompute reads are made, at an even
// rate over it: calls between those windows would change nothing the
// deadline is computed from, and would have the same share cut.
type latSim struct {
	b   *Breaker
	rng *rand.Rand
	now int64 // the instant of the last recompute
	// calls and cut count the healthy calls made, and those the
	// breaker's deadline cut, since they were last zeroed.
	calls, cut int
}

// latDraw returns the latency of a call that ends at the instant at, and
// its caller's own deadline (0: none).
type latDraw func(rng *rand.Rand, at time.Duration) (latency, caller time.Duration)

func newLatSim(t *testing.T, p Policy, seed uint64) *latSim {
	t.Helper()
	b, err := New("sim", p, WithClock(clock.NewMock()))
	require.NoError(t, err)
	return &latSim{b: b, rng: rand.New(rand.NewPCG(seed, 20))}
}

// interval makes n calls over the window that ends at the next
// recompute, the last one at it, and returns the deadline then in force.
func (s *latSim) interval(n int, draw latDraw) time.Duration {
	r := s.b.rules.Load()
	due := r.lat.next.Load()
	start := max(s.now, due-int64(r.p.Window))
	d := time.Duration(s.b.deadline(r)) // until the last call, which recomputes it
	for i := 1; i <= n; i++ {
		at := start + (due-start)*int64(i)/int64(n)
		x, caller := draw(s.rng, time.Duration(at))
		o := Success
		switch {
		case caller > 0 && caller < d:
			if x > caller {
				x, o = caller, Timeout
			}
		case x > d:
			x, o = d, Timeout
			s.cut++
		}
		s.calls++
		s.b.measure(at, int64(x), o, r)
	}
	s.now = due
	return s.b.Timeout()
}

// cutShare is the share of the calls made since they were last zeroed
// that the breaker's deadline cut.
func (s *latSim) cutShare() float64 { return float64(s.cut) / float64(max(s.calls, 1)) }

// simCases returns the cases of a simulation of the adaptive timeout to
// run: all of them, or under the race detector, which adds nothing to a
// single goroutine and slows the histogram's snapshots twentyfold, the
// first only.
func simCases[T any](all ...T) []T {
	if raceEnabled {
		return all[:1]
	}
	return all
}

// lognormal draws latencies of the given median and log-deviation; its
// q quantile is median·e^(sigma·z_q).
func lognormal(median time.Duration, sigma float64) latDraw {
	return func(rng *rand.Rand, _ time.Duration) (time.Duration, time.Duration) {
		return time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64())), 0
	}
}

// normalZ is the q quantile of the standard normal distribution.
func normalZ(q float64) float64 { return math.Sqrt2 * math.Erfinv(2*q-1) }

// lognormalQuantile is the q quantile of lognormal(median, sigma).
func lognormalQuantile(median time.Duration, sigma, q float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*normalZ(q)))
}

// lognormalOver is the share of lognormal(median, sigma) above d.
func lognormalOver(median time.Duration, sigma float64, d time.Duration) float64 {
	return 0.5 * math.Erfc(math.Log(float64(d)/float64(median))/sigma/math.Sqrt2)
}

// TestAdaptiveTimeout_SteadyLatencyKeepsASteadyDeadline: a downstream
// whose latency never changes keeps a steady deadline, at every factor
// and quantile, over three hours, and the share of its healthy calls the
// deadline cuts stays at what the factor implies. The calls a deadline
// cuts used to be left out of the next quantile, which then came out
// lower: at factor 1 and the 0.99 quantile the deadline fell, round after
// round, from 8.6 ms to under 3.3 ms, and cut 40% of the calls; and a
// fixed latency of 50 ms got a deadline of 49.3 ms at factor 1, which cut
// every call.
//
// The random latency is lognormal, median 2.5 ms, P99 10.1 ms, from a
// seeded source, with 10/(1-q) calls in a window. From the first
// recompute on, the deadline stays within [0.7, 1.35] × factor × the
// true quantile at factors above 1, and the share cut is within a third
// of what that implies (give or take three standard deviations of the
// count). At factor 1 the deadline can only fall: nothing is measured
// above it. Each window's estimate is noisy, and the deadline steps down
// one bin whenever one comes out low, until that becomes unlikely: by the
// end of the first hour it has settled between 0.7 × the quantile and
// the top of the quantile's bin, and cuts at most 2.5 × (1-q); it stays
// within one bin for the next two.
// Under the race detector only the first case runs (simCases). Run with
// -v for the figures docs/latency.md quotes.
func TestAdaptiveTimeout_SteadyLatencyKeepsASteadyDeadline(t *testing.T) {
	t.Parallel()
	const median, sigma = 2500 * time.Microsecond, 0.6
	adaptive := func(q, f float64) Policy {
		return adaptivePolicy(func(p *Policy) {
			p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = q, f
			p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 100*time.Microsecond, time.Second
		})
	}
	type steady struct{ q, f float64 }
	var cases []steady
	for _, q := range []float64{0.9, 0.99, 0.999} {
		for _, f := range []float64{1, 1.5, 2, 3} {
			cases = append(cases, steady{q, f})
		}
	}
	for _, c := range simCases(cases...) {
		q, f := c.q, c.f
		s := newLatSim(t, adaptive(q, f), 1)
		n := int(math.Round(10 / (1 - q)))
		want := time.Duration(f * float64(lognormalQuantile(median, sigma, q)))
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		var first, settled time.Duration
		for k := range 360 { // 3 hours
			d := s.interval(n, lognormal(median, sigma))
			switch {
			case k == 0:
				first = d
			case k == 119:
				settled = d
				s.calls, s.cut = 0, 0
			}
			if f > 1 || k >= 120 {
				lo, hi = min(lo, d), max(hi, d)
			}
		}
		implied := lognormalOver(median, sigma, want)
		t.Logf("q %v, factor %v: first deadline %v, then in [%.2f, %.2f] × factor × Q (%v); cut %.4f%% of calls in hours 1-3, %.4f%% implied",
			q, f, first, float64(lo)/float64(want), float64(hi)/float64(want), want, 100*s.cutShare(), 100*implied)
		if f > 1 {
			assert.GreaterOrEqual(t, float64(lo), 0.7*float64(want), "q %v, factor %v", q, f)
			assert.LessOrEqual(t, float64(hi), 1.35*float64(want), "q %v, factor %v", q, f)
			e := implied * float64(s.calls)
			assert.InDelta(t, e, float64(s.cut), e/3+3*math.Sqrt(e), "q %v, factor %v: calls cut", q, f)
			continue
		}
		assert.GreaterOrEqual(t, float64(settled), 0.7*float64(want), "q %v, factor 1: settled", q)
		assert.LessOrEqual(t, float64(hi), float64(latTop(want)), "q %v, factor 1: settled", q)
		assert.LessOrEqual(t, float64(hi), float64(lo)*(1+1.0/16), "q %v, factor 1: within one bin for two hours", q)
		assert.LessOrEqual(t, s.cutShare(), 2.5*(1-q), "q %v, factor 1: calls cut", q)
	}

	// A fixed latency: the deadline is factor × the top of its bin, and
	// no call is cut, at factor 1 too.
	for _, lat := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond} {
		for _, f := range []float64{1, 1.5, 2, 3} {
			s := newLatSim(t, adaptive(0.99, f), 1)
			fixed := func(*rand.Rand, time.Duration) (time.Duration, time.Duration) { return lat, 0 }
			for range 10 {
				s.interval(100, fixed)
			}
			assert.Equal(t, time.Duration(f*float64(latTop(lat))), s.b.Timeout(), "%v at factor %v", lat, f)
			assert.Zero(t, s.cut, "%v at factor %v", lat, f)
		}
	}
}

// TestAdaptiveTimeout_CutCallsHoldTheDeadlineUp: through Do, on the mock
// clock, the calls the deadline cuts keep their weight in the quantile it
// follows: at factor 1 and the 0.9 quantile, over ten recomputes of a
// steady latency, the deadline stays near the quantile instead of falling
// by a tenth of the calls each time. (Forced closed, so that the calls
// go on whatever the breaker would make of the timeouts.)
func TestAdaptiveTimeout_CutCallsHoldTheDeadlineUp(t *testing.T) {
	t.Parallel()
	const median, sigma = 2500 * time.Microsecond, 0.6
	h := newLatHarness(t, adaptivePolicy(func(p *Policy) {
		p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = 0.9, 1
		p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 100*time.Microsecond, time.Second
	}))
	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	rng := rand.New(rand.NewPCG(3, 20))
	draw := lognormal(median, sigma)
	gap := h.b.Policy().Window / 60
	var calls, cut int
	for k := range 10 {
		l := h.b.rules.Load().lat
		due := l.next.Load()
		h.at(time.Duration(due) - h.b.Policy().Window) // the calls of the window the recompute reads
		for l.next.Load() == due {
			x, _ := draw(rng, 0)
			d := min(x, h.b.Timeout())
			err := h.b.Do(context.Background(), func(ctx context.Context) error {
				h.clk.Add(d)
				return ctx.Err()
			})
			if k >= 5 {
				calls++
				if err != nil {
					cut++
				}
			}
			h.clk.Add(gap - d)
		}
	}
	q := lognormalQuantile(median, sigma, 0.9)
	share := float64(cut) / float64(calls)
	t.Logf("deadline %v, %.2f × the quantile; %.1f%% of the calls cut in the last five windows", h.b.Timeout(), float64(h.b.Timeout())/float64(q), 100*share)
	assert.GreaterOrEqual(t, float64(h.b.Timeout()), 0.6*float64(q))
	assert.LessOrEqual(t, share, 0.3)
	assert.Positive(t, h.latency().Censored, "calls were cut, and counted")
}

// TestAdaptiveTimeout_FollowsAShiftingLatency: the deadline follows the
// latency as it moves: steps up within the deadline's headroom and steps
// down within two recomputes, slow drifts at every recompute; outside
// those two recomputes it stays within the steady band, [0.7, 1.35] ×
// factor × the quantile of the latency then. A step past the deadline
// (more than 1-q of the calls cut) is not followed, at any factor: then
// the quantile is unknown, and the deadline stays. At factor 1 the
// deadline never rises, since nothing is measured above it: it follows
// the falls (never above the band) and stays through the rises, cutting
// more and more calls.
//
// Lognormal latency, sigma 0.6, the 0.99 quantile, 1,000 calls a window;
// the median, 2.5 ms, steps to 1.3× at 30 min, to 0.4× at 60 min (the
// steps 27 s into an interval, so that one window holds both sides),
// drifts to 3 × 0.4× from 90 to 150 min and back by 210 min, and jumps
// to 4× at 240 min. Under the race detector only factor 1 runs.
func TestAdaptiveTimeout_FollowsAShiftingLatency(t *testing.T) {
	t.Parallel()
	const base, sigma, q, n = 2500 * time.Microsecond, 0.6, 0.99, 1000
	step := func(m int) time.Duration { return time.Duration(m)*time.Minute + 27*time.Second }
	scale := func(at time.Duration) float64 {
		switch {
		case at < step(30):
			return 1
		case at < step(60):
			return 1.3
		case at < 90*time.Minute:
			return 0.4
		case at < 150*time.Minute:
			return 0.4 * (1 + 2*float64(at-90*time.Minute)/float64(time.Hour))
		case at < 210*time.Minute:
			return 0.4 * (3 - 2*float64(at-150*time.Minute)/float64(time.Hour))
		case at < step(240):
			return 0.4
		}
		return 4
	}
	draw := func(rng *rand.Rand, at time.Duration) (time.Duration, time.Duration) {
		return time.Duration(scale(at) * float64(base) * math.Exp(sigma*rng.NormFloat64())), 0
	}
	for _, f := range simCases(1, 1.5, 2, 3.0) {
		s := newLatSim(t, adaptivePolicy(func(p *Policy) {
			p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = q, f
			p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 100*time.Microsecond, time.Second
		}), 2)
		var prev time.Duration
		var lo, hi, mostCut float64 = math.Inf(1), 0, 0
		for k := range 500 { // 250 minutes
			s.calls, s.cut = 0, 0
			d := s.interval(n, draw)
			at := time.Duration(s.now)
			want := time.Duration(f * scale(at) * float64(lognormalQuantile(base, sigma, q)))
			afterStep := false
			for _, m := range []int{30, 60} {
				afterStep = afterStep || (at > step(m) && at <= step(m)+2*AdaptiveInterval)
			}
			ratio := float64(d) / float64(want)
			switch {
			case at > step(240):
				require.Equal(t, prev, d, "factor %v at %v: a jump past the deadline is not followed", f, at)
			case afterStep:
			case f == 1:
				require.LessOrEqual(t, ratio, 1.35, "factor 1 at %v: follows the falls", at)
				hi = max(hi, ratio)
				mostCut = max(mostCut, s.cutShare())
			default:
				require.GreaterOrEqual(t, ratio, 0.7, "factor %v at %v", f, at)
				require.LessOrEqual(t, ratio, 1.35, "factor %v at %v", f, at)
				lo, hi = min(lo, ratio), max(hi, ratio)
			}
			if f == 1 && k > 0 {
				require.LessOrEqual(t, d, prev, "factor 1 at %v: never rises", at)
			}
			prev = d
		}
		if f == 1 {
			t.Logf("factor 1: the deadline never rose, never above %.2f × Q; the most a window had cut in the drift up was %.0f%%", hi, 100*mostCut)
			continue
		}
		t.Logf("factor %v: outside the two recomputes after a step, the deadline was within [%.2f, %.2f] × factor × Q", f, lo, hi)
	}
}

// TestAdaptiveTimeout_PartialHangHoldsIt: when a share of the calls hangs
// (a fifth, here, beside healthy ones of a steady latency), more than
// 1-q of the calls are cut, the quantile is unknown, and the deadline
// stays where it was for the hour the hang lasts, at every factor:
// neither raised towards AdaptiveTimeout.Max by the hung calls nor lowered to the
// quantile of the healthy ones. The 0.99 quantile, 1,000 calls a
// window; under the race detector, factor 1 only.
func TestAdaptiveTimeout_PartialHangHoldsIt(t *testing.T) {
	t.Parallel()
	const median, sigma, q, n = 2500 * time.Microsecond, 0.6, 0.99, 1000
	hang := func(rng *rand.Rand, at time.Duration) (time.Duration, time.Duration) {
		if rng.IntN(5) == 0 {
			return time.Hour, 0
		}
		return lognormal(median, sigma)(rng, at)
	}
	for _, f := range simCases(1, 1.5, 2, 3.0) {
		s := newLatSim(t, adaptivePolicy(func(p *Policy) {
			p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = q, f
			p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 100*time.Microsecond, time.Second
		}), 3)
		for range 20 {
			s.interval(n, lognormal(median, sigma))
		}
		before := s.b.Timeout()
		for range 120 {
			require.Equal(t, before, s.interval(n, hang), "factor %v", f)
		}
	}
}

// TestAdaptiveTimeout_CallerDeadlinesAreCensored: calls cut by their
// caller's own earlier deadline are censored at it, like those the
// breaker's deadline cuts, and do not pull the deadline down: with 30%
// of the calls under a caller's deadline of 3 ms (above the median of
// 2.5 ms, below the P99 of 10.1 ms), the deadline stays within [0.65,
// 1.5] × factor × the quantile over two hours, at factors 1 and 2 (after
// an hour, at factor 1). The band is wider than a steady latency's: the
// calls cut early are measured no further, so each estimate rests on
// fewer calls. The 0.99 quantile, 1,000 calls a window; under the race
// detector, factor 1 only.
func TestAdaptiveTimeout_CallerDeadlinesAreCensored(t *testing.T) {
	t.Parallel()
	const median, sigma, q, n = 2500 * time.Microsecond, 0.6, 0.99, 1000
	draw := func(rng *rand.Rand, at time.Duration) (time.Duration, time.Duration) {
		x, _ := lognormal(median, sigma)(rng, at)
		if rng.IntN(10) < 3 {
			return x, 3 * time.Millisecond
		}
		return x, 0
	}
	for _, f := range simCases(1, 2.0) {
		s := newLatSim(t, adaptivePolicy(func(p *Policy) {
			p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = q, f
			p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 100*time.Microsecond, time.Second
		}), 4)
		want := time.Duration(f * float64(lognormalQuantile(median, sigma, q)))
		lo, hi := math.Inf(1), 0.0
		var last time.Duration // the deadline in force in the last window
		for k := range 240 {
			last = s.b.Timeout()
			d := s.interval(n, draw)
			if f > 1 || k >= 120 {
				lo, hi = min(lo, float64(d)/float64(want)), max(hi, float64(d)/float64(want))
			}
		}
		t.Logf("q %v, factor %v: the deadline within [%.2f, %.2f] × factor × Q", q, f, lo, hi)
		assert.GreaterOrEqual(t, lo, 0.65, "factor %v", f)
		assert.LessOrEqual(t, hi, 1.5, "factor %v", f)

		lat, _ := s.b.Latency() // the last window, read at its end
		cut := 0.3*lognormalOver(median, sigma, min(3*time.Millisecond, last)) + 0.7*lognormalOver(median, sigma, last)
		assert.InDelta(t, cut, float64(lat.Censored)/float64(lat.Samples+lat.Censored), 0.03, "factor %v: censored by their callers and by the deadline", f)
	}
}

// Latency's doc: the totals never go down. A policy that changed Window
// or Buckets started a new histogram whose totals began at 0, and
// OpenTelemetry saw breaker.latency.censored fall; a spell on a policy
// that times nothing lost them too.
func TestLatency_TotalsContinueThroughANewHistogram(t *testing.T) {
	t.Parallel()
	timed := policy(func(p *Policy) { p.CallTimeout = 100 * time.Millisecond })
	h := newHarness(t, timed)
	h.calls(5, nil)
	h.calls(3, context.DeadlineExceeded)
	before, ok := h.b.Latency()
	require.True(t, ok)
	require.Equal(t, uint64(5), before.SamplesTotal)
	require.Equal(t, uint64(3), before.CensoredTotal)

	wider := timed
	wider.Window, wider.Buckets = 10*time.Second, 20
	require.NoError(t, h.b.SetPolicy(wider)) // a new histogram
	h.calls(1, nil)
	after, _ := h.b.Latency()
	assert.Equal(t, uint64(6), after.SamplesTotal)
	assert.Equal(t, uint64(3), after.CensoredTotal)
	assert.GreaterOrEqual(t, after.SumTotal, before.SumTotal)

	require.NoError(t, h.b.SetPolicy(DefaultPolicy())) // times nothing
	_, ok = h.b.Latency()
	require.False(t, ok)
	require.NoError(t, h.b.SetPolicy(timed)) // times again
	h.calls(1, context.DeadlineExceeded)
	again, ok := h.b.Latency()
	require.True(t, ok)
	assert.Equal(t, uint64(6), again.SamplesTotal)
	assert.Equal(t, uint64(4), again.CensoredTotal)
	assert.Equal(t, after.SumTotal, again.SumTotal)
}
