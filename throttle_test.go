package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// throttlePolicy is DefaultPolicy with throttling on and no ratio rule
// (a throttle alone), so that the partial outages of these tests trip
// nothing, and MinRequests 6, so that the throttle's floor (3·MinRequests
// counted calls) is 18: a window of 20 calls holds it. A test of the
// ratio rule beside the throttle sets ErrorRatio, and then a window that
// holds the floor the ratio asks for (throttleFloor).
func throttlePolicy(f func(p *Policy)) Policy {
	return policy(func(p *Policy) {
		p.ErrorRatio = 0
		p.MinRequests = 6
		p.Throttle.Enabled = true
		if f != nil {
			f(p)
		}
	})
}

// draws is a WithRand source the test steers: a fixed value, or, when
// spread, n values evenly spaced over [0, 1) in turn, so that a share p of
// the calls draws below p.
type draws struct {
	fixed  float64
	spread int
	i      int
}

func (d *draws) next() float64 {
	if d.spread == 0 {
		return d.fixed
	}
	d.i++
	return (float64(d.i%d.spread) + 0.5) / float64(d.spread)
}

func newThrottleHarness(t *testing.T, p Policy, d *draws, opts ...Option) *harness {
	h := newHarness(t, p, append([]Option{WithRand(d.next)}, opts...)...)
	return h
}

// attempt makes one call that would return err, and reports whether the
// throttle refused it.
func (h *harness) attempt(err error) bool {
	h.t.Helper()
	got := h.call(err)
	var oe *OpenError
	if errors.As(got, &oe) {
		require.Equal(h.t, ReasonThrottled, oe.Reason, "a refusal other than the throttle's: %v", got)
		return true
	}
	return false
}

// probability is Status.ThrottleProbability.
func (h *harness) probability() float64 { return h.b.Status().ThrottleProbability }

// outage fills the window with 3 successes and 17 failures: 85% failed,
// under throttlePolicy's error_ratio, and p = (20 - 2·3)/21 = 2/3.
func (h *harness) outage() {
	h.t.Helper()
	h.calls(3, nil)
	h.calls(17, errBoom)
}

// behaviour.md §4 Throttling: the formula at its edges.
func TestThrottle_FormulaAtItsEdges(t *testing.T) {
	cases := []struct {
		name              string
		requests, accepts uint64
		k                 float64
		min               uint64
		want              float64
	}{
		{"no traffic", 0, 0, 2, 1, 0},
		{"no traffic, floor 0", 0, 0, 2, 0, 0},
		{"all failures", 100, 0, 2, 20, 100.0 / 101},
		{"all successes", 100, 100, 2, 20, 0},
		{"exactly half succeed, K 2", 100, 50, 2, 20, 0},
		{"60% failures, K 2: about a fifth", 100, 40, 2, 20, 20.0 / 101},
		{"K 1 throttles the failures' share", 100, 50, 1, 20, 50.0 / 101},
		{"K 1, all successes", 100, 100, 1, 20, 0},
		{"K 10", 100, 5, 10, 20, 50.0 / 101},
		{"floor exactly at MinRequests", 20, 0, 2, 20, 20.0 / 21},
		{"one below the floor", 19, 0, 2, 20, 0},
		{"huge counts stay below 1", math.MaxUint64, 0, 2, 20, 1 - 1.0/throttleOne},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := float64(throttleProbability(c.requests, c.accepts, c.k, c.min)) / throttleOne
			assert.InDelta(t, c.want, got, 1.0/throttleOne, "p(%d requests, %d accepts, K %v)", c.requests, c.accepts, c.k)
			assert.Less(t, got, 1.0)
		})
	}
}

// behaviour.md §4 Throttling: a partial outage is throttled by the
// formula, and throttling ends as successes return and the failures'
// buckets leave the window; the trip rules are not met on the way.
func TestThrottle_FollowsAPartialOutageDownAndBackUp(t *testing.T) {
	buf := &lockedBuffer{}
	d := &draws{fixed: 0.999} // admit everything while the window fills
	h := newThrottleHarness(t, throttlePolicy(nil), d, WithLogger(slogTo(buf)))

	// 100 calls in the first bucket, 60% of them failing: p is (100 -
	// 2·40)/101, about a fifth, and nothing has been throttled yet.
	// Throttling started at the 21st call, the first failure past the
	// floor that left fewer than half the calls successful.
	for i := 0; i < 100; i++ {
		err := error(nil)
		if i%5 < 3 {
			err = errBoom
		}
		require.False(t, h.attempt(err))
	}
	assert.InDelta(t, 20.0/101, h.probability(), 1e-9)
	assert.Equal(t, `level=INFO msg="breaker throttling" breaker.name=inventory.GetStock breaker.probability=0.227 breaker.counted=21 breaker.failures=13 breaker.throttled=0 breaker.window=5s`+"\n", buf.String())

	// The next 100 attempts draw evenly over [0, 1). p starts at a fifth
	// and climbs: each refusal is a request of the formula but never an
	// accept, and the downstream still fails 60% of what it gets.
	d.spread = 100
	throttled := 0
	for i := 0; i < 100; i++ {
		err := error(nil)
		if i%5 < 3 {
			err = errBoom
		}
		if h.attempt(err) {
			throttled++
		}
	}
	assert.GreaterOrEqual(t, throttled, 20)
	assert.LessOrEqual(t, throttled, 50)
	c, s := h.b.Counters(), h.b.Snapshot()
	assert.Equal(t, uint64(throttled), c.Throttled)
	assert.Equal(t, uint64(throttled), c.Rejected, "a throttled call is a refusal")
	assert.Equal(t, uint64(200-throttled), s.Counted, "a throttled call is not in the window")
	requests := s.Counted + uint64(throttled)
	want := (float64(requests) - 2*float64(s.Counted-s.Failures)) / float64(requests+1)
	assert.InDelta(t, want, h.probability(), 1e-9)
	h.requireState(Closed)

	// The downstream recovers: every bucket from the next on holds only
	// successes, and p falls to 0 once fewer than half the window's
	// requests have failed, long before the outage's bucket leaves the
	// window; then it stays 0.
	zeroAt := 0
	for b := 1; b <= 10; b++ {
		h.at(time.Duration(b) * 500 * time.Millisecond)
		for i := 0; i < 100; i++ {
			h.attempt(nil)
		}
		if p := h.probability(); p == 0 && zeroAt == 0 {
			zeroAt = b
		} else if zeroAt != 0 {
			assert.Zero(t, p, "bucket %d: throttling started again", b)
		}
	}
	assert.NotZero(t, zeroAt)
	assert.Less(t, zeroAt, 10, "p must reach 0 before the outage's bucket leaves the window")
	// The end is recorded once p has stayed 0 for a whole window, so that
	// a p that touches 0 as the window slides does not end and start
	// throttling again within a bucket.
	assert.NotContains(t, buf.String(), `msg="breaker throttling ended"`, "p has been 0 for less than a window")
	h.add(5 * time.Second)
	h.attempt(nil)
	assert.Contains(t, buf.String(), `msg="breaker throttling ended"`)
	n := h.b.Counters().Throttled
	h.calls(100, nil)
	assert.Equal(t, n, h.b.Counters().Throttled, "nothing is throttled once p is 0")
	assert.Empty(t, h.eventLog(), "throttling is not a transition")
}

// behaviour.md §4 Throttling: a throttled call is refused with an
// *OpenError of a closed breaker, which every fallback serves.
func TestThrottle_ARefusalIsAnOpenErrorOfTheClosedBreaker(t *testing.T) {
	h := newThrottleHarness(t, throttlePolicy(nil), &draws{fixed: 0})
	h.outage() // p = 2/3; every draw of 0 is below it
	called := false
	err := h.b.Do(context.Background(), func(context.Context) error { called = true; return nil })
	require.False(t, called)
	require.ErrorIs(t, err, ErrOpen)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, Closed, oe.State)
	assert.Equal(t, ReasonThrottled, oe.Reason)
	assert.Equal(t, "breaker: inventory.GetStock is closed (throttled)", oe.Error())
	assert.Zero(t, oe.RetryAfter())

	_, _, err = h.b.Allow(context.Background())
	require.ErrorIs(t, err, ErrOpen, "Allow throttles too")

	got, err := Fallback(context.Background(), h.b, func(context.Context) (string, error) { return "live", nil },
		func(context.Context, error) (string, error) { return "cached", nil })
	require.NoError(t, err)
	assert.Equal(t, "cached", got)
	c := h.b.Counters()
	assert.Equal(t, uint64(3), c.Throttled)
	assert.Equal(t, uint64(3), c.Rejected)
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 17}, h.b.Snapshot())
}

// behaviour.md §4 Throttling: below the floor nothing is throttled, and
// ignored outcomes are neither requests nor accepts.
func TestThrottle_FloorAndIgnoredOutcomes(t *testing.T) {
	h := newThrottleHarness(t, throttlePolicy(func(p *Policy) {
		p.ErrorRatio, p.ConsecutiveFailures = 0, 1000 // no trip in this test
		p.MinRequests, p.Throttle.MinRequests = 4, 10
	}), &draws{fixed: 0})
	h.calls(9, errBoom)
	assert.Zero(t, h.probability(), "one below the floor")
	h.calls(30, Ignore(errors.New("bad request")))
	assert.Zero(t, h.probability(), "ignored calls are not requests")
	h.calls(1, errBoom)
	assert.Zero(t, h.probability(), "p is 10/11, but the window holds fewer than 3·MinRequests counted calls")
	h.calls(2, errBoom)
	assert.InDelta(t, 12.0/13, h.probability(), 1e-9, "at both floors")
	require.True(t, h.attempt(Ignore(errors.New("bad request"))))
	assert.InDelta(t, 13.0/14, h.probability(), 1e-9, "the throttled call is a request")
}

// behaviour.md §4 Throttling: the trip rules still open the breaker on a
// hard failure, at the same call as without throttling, and the
// transition resets the throttle.
func TestThrottle_TripRulesStillOpenOnAHardFailure(t *testing.T) {
	h := newThrottleHarness(t, policy(func(p *Policy) { p.Throttle.Enabled = true }), &draws{fixed: 0})
	h.calls(19, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
	assert.Equal(t, []string{"closed>open:error_ratio"}, h.transitions())
	assert.Zero(t, h.b.Counters().Throttled)
	assert.Zero(t, h.probability())

	// A partial outage that is being throttled turns into a hard one.
	// With error_ratio above 1 - 1/K the throttle acts first, and lets
	// fewer calls through the more it refuses, so the window may never
	// again hold MinRequests calls; the run of consecutive failures,
	// which refusals do not break, still opens the breaker.
	d := &draws{fixed: 0.999}
	h = newThrottleHarness(t, throttlePolicy(func(p *Policy) { p.ConsecutiveFailures = 10 }), d)
	for i := 0; i < 50; i++ {
		err := error(nil)
		if i%5 < 3 {
			err = errBoom
		}
		h.attempt(err)
	}
	require.Positive(t, h.probability())
	d.spread = 100
	for i := 0; i < 500 && h.b.State() == Closed; i++ {
		h.attempt(errBoom)
	}
	h.requireState(Open)
	assert.Equal(t, ReasonConsecutiveFailures, h.lastReason())
	assert.Positive(t, h.b.Counters().Throttled)
	assert.Zero(t, h.probability(), "an open breaker does not throttle")

	// Closed again after its probes: the throttle starts empty.
	h.add(time.Minute)
	h.calls(3, nil)
	h.requireState(Closed)
	assert.Zero(t, h.probability())
	assert.Zero(t, h.b.rules.Load().thr.win.Load().Sum(h.b.opt.tb.Now()).Counted,
		"the refusals of the last closed spell are not in the new window")
}

// behaviour.md §4 Throttling: a shadow breaker counts what it would have
// throttled and refuses nothing; a breaker forced closed never throttles.
func TestThrottle_ShadowCountsAndForcedClosedNeverThrottles(t *testing.T) {
	h := newThrottleHarness(t, throttlePolicy(nil), &draws{fixed: 0})
	require.NoError(t, h.b.SetMode(ModeShadow))
	h.outage()
	h.calls(5, nil) // each would have been throttled
	c := h.b.Counters()
	assert.Equal(t, uint64(5), c.Throttled)
	assert.Equal(t, uint64(5), c.ShadowRejected)
	assert.Zero(t, c.Rejected)
	assert.Equal(t, uint64(8), c.Successes)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 17}, h.b.Snapshot(), "would-be refusals stay off the window")
	assert.InDelta(t, 19.0/26, h.probability(), 1e-9)

	require.NoError(t, h.b.SetMode(ModeForcedClosed))
	h.calls(20, nil)
	assert.Equal(t, uint64(5), h.b.Counters().Throttled)
	assert.Zero(t, h.probability())
}

// behaviour.md §4 Throttling: SetPolicy turns throttling on and off on a
// running breaker, and a new window geometry starts its counts afresh.
func TestThrottle_SetPolicyTakesEffectAtOnce(t *testing.T) {
	buf := &lockedBuffer{}
	h := newThrottleHarness(t, policy(func(p *Policy) { p.ErrorRatio = 0.9 }), &draws{fixed: 0}, WithLogger(slogTo(buf)))
	h.outage()
	assert.Zero(t, h.probability(), "off by default")
	assert.Nil(t, h.b.rules.Load().thr, "nothing allocated while off")

	require.NoError(t, h.b.SetPolicy(throttlePolicy(nil)))
	assert.InDelta(t, 14.0/21, h.probability(), 1e-9, "the window in force is judged at once")
	require.True(t, h.attempt(nil))
	assert.Contains(t, buf.String(), `msg="breaker throttling"`)

	require.NoError(t, h.b.SetPolicy(throttlePolicy(func(p *Policy) { p.Throttle.K = 10; p.Throttle.MinRequests = 100 })))
	assert.Zero(t, h.probability(), "under the new floor")
	assert.Contains(t, buf.String(), `msg="breaker throttling ended"`)
	require.NoError(t, h.b.SetPolicy(throttlePolicy(nil)))
	assert.InDelta(t, 15.0/22, h.probability(), 1e-9, "the window's refusals are kept")

	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.ErrorRatio = 0.9 })))
	assert.Zero(t, h.probability())
	assert.False(t, h.attempt(errBoom), "throttling is off")

	require.NoError(t, h.b.SetPolicy(throttlePolicy(func(p *Policy) { p.Buckets = 5 })))
	assert.Zero(t, h.probability(), "a new window geometry starts empty")
	h.calls(3, nil)
	h.calls(16, errBoom)
	assert.Zero(t, h.probability(), "the old window's refusals are gone: 19 requests")
	h.calls(1, errBoom)
	assert.InDelta(t, 14.0/21, h.probability(), 1e-9)
}

// behaviour.md §8: a group's override enables throttling for its key only,
// and a new document changes it on the running breakers.
func TestThrottle_GroupOverridesAndReload(t *testing.T) {
	h := newDocHarness(t, GroupConfig{}, WithRand(func() float64 { return 0 }))
	h.doc("v1", `{"default": {"error_ratio": 0.9, "min_requests": 6}, "overrides": {"orders.Create": {"error_ratio": 0, "throttle": {"enabled": true}}}}`)
	for _, key := range []string{"orders.Create", "orders.List"} {
		h.calls(key, 3, nil)
		h.calls(key, 17, errBoom)
	}
	err := h.g.Do(context.Background(), "orders.Create", func(context.Context) error { return nil })
	require.ErrorIs(t, err, ErrOpen)
	require.NoError(t, h.g.Do(context.Background(), "orders.List", func(context.Context) error { return nil }))

	h.doc("v2", `{"default": {"error_ratio": 0, "min_requests": 6, "throttle": {"enabled": true, "k": 2}}}`)
	err = h.g.Do(context.Background(), "orders.List", func(context.Context) error { return nil })
	require.ErrorIs(t, err, ErrOpen, "the reload throttles the running breaker")
	list := mustGet(t, h.g, "orders.List")
	assert.Equal(t, uint64(1), list.Counters().Throttled)
}

// behaviour.md §6: Status and its JSON carry the probability, Counters the
// refusals.
func TestThrottle_StatusAndCountersShowIt(t *testing.T) {
	h := newThrottleHarness(t, throttlePolicy(nil), &draws{fixed: 0})
	s := h.b.Status()
	assert.Zero(t, s.ThrottleProbability)
	h.outage()
	require.True(t, h.attempt(nil))
	s = h.b.Status()
	assert.InDelta(t, 15.0/22, s.ThrottleProbability, 1e-9)
	assert.Equal(t, uint64(1), s.Counters.Throttled)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 17}, s.Window)
	data, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"throttled":1`)
	assert.Contains(t, string(data), `"throttle_probability":0.6818`)
	assert.Contains(t, string(data), `"throttle":{"enabled":true,"k":2,"min_requests":20}`)

	// The probability is the window's now: once the window has slid past
	// every call, it is 0 even before a call recomputes it.
	h.add(defaultWindow)
	assert.Zero(t, h.b.Status().ThrottleProbability)
	assert.False(t, h.attempt(nil), "the first call after the window reads it anew")
}

func TestPolicy_ThrottleIsANestedObject(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"throttle": {"enabled": true}}`))
	require.NoError(t, err)
	assert.Equal(t, Throttle{Enabled: true, K: defaultThrottleK, MinRequests: defaultThrottleMinRequests}, p.Throttle)
	assert.Equal(t, Throttle{K: 2, MinRequests: 20}, DefaultPolicy().Throttle, "off by default, with its defaults")

	p.Throttle.K, p.Throttle.MinRequests = 1.5, 50
	data, err := json.Marshal(p)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(data), `"strict_probes":false,"throttle":{"enabled":true,"k":1.5,"min_requests":50}}`), "%s", data)
	back, err := ParsePolicy(data)
	require.NoError(t, err)
	assert.Equal(t, p, back)

	_, err = ParsePolicy([]byte(`{"throttle": true}`))
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "throttle", pe.Problems[0].Field)
	assert.Contains(t, err.Error(), `want a JSON object such as {"enabled": true, "k": 2}, got true (the flag is throttle.enabled)`)
	_, err = ParsePolicy([]byte(`{"throttle": {"enabled": true, "kk": 2}}`))
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "throttle.kk", pe.Problems[0].Field)
}

func TestPolicy_ThrottleValidationNamesTheField(t *testing.T) {
	cases := []struct {
		field string
		edit  func(t *Throttle)
	}{
		{"throttle.k", func(t *Throttle) { t.Enabled, t.K = true, 0.99 }},
		{"throttle.k", func(t *Throttle) { t.Enabled, t.K = true, 0 }},
		{"throttle.k", func(t *Throttle) { t.Enabled, t.K = true, 10.5 }},
		{"throttle.k", func(t *Throttle) { t.Enabled, t.K = true, math.NaN() }},
		{"throttle.k", func(t *Throttle) { t.K = -1 }},
		{"throttle.min_requests", func(t *Throttle) { t.Enabled, t.MinRequests = true, 0 }},
		{"throttle.min_requests", func(t *Throttle) { t.Enabled, t.MinRequests = true, maxThrottleMinRequests+1 }},
		{"throttle.min_requests", func(t *Throttle) { t.MinRequests = -1 }},
	}
	for _, c := range cases {
		p := policy(func(p *Policy) { c.edit(&p.Throttle) })
		err := p.Validate()
		var pe *PolicyError
		require.ErrorAs(t, err, &pe, "%s: %+v", c.field, p.Throttle)
		require.Len(t, pe.Problems, 1, "%v", err)
		assert.Equal(t, c.field, pe.Problems[0].Field, "%v", err)
		_, err = New("x", p)
		assert.Error(t, err)
	}
	for _, th := range []Throttle{{}, {K: 1, MinRequests: 1}, {Enabled: true, K: 1, MinRequests: 1}, {Enabled: true, K: 10, MinRequests: maxThrottleMinRequests}} {
		p := policy(func(p *Policy) { p.Throttle = th })
		assert.NoError(t, p.Validate(), "%+v", th)
	}
}

// benchThrottling is BenchmarkDo/throttling: Do on a closed breaker whose
// throttle refuses calls with p > 0. refused: every draw is below p, the
// path of a call the throttle refuses. admitted: no draw is, and 3 calls
// in 5 fail, which keeps p near a fifth: the cost throttling adds to each
// admitted call (compare BenchmarkFailure and BenchmarkDo/closed). The
// window is a day long, so that it does not slide during a run.
func benchThrottling(b *testing.B) {
	ctx := context.Background()
	newBr := func(b *testing.B, draw float64) *Breaker {
		b.Helper()
		p := throttlePolicy(func(p *Policy) { p.Window = maxDuration })
		br, err := New("bench.Throttling", p, WithRand(func() float64 { return draw }))
		require.NoError(b, err)
		for i := 0; i < 100; i++ {
			_ = br.Do(ctx, []func(context.Context) error{benchOK, benchFail}[min(1, i%5/2)])
		}
		require.Positive(b, br.Status().ThrottleProbability)
		return br
	}
	b.Run("refused/serial", func(b *testing.B) {
		br := newBr(b, 0)
		b.ReportAllocs()
		b.ResetTimer()
		var err error
		for i := 0; i < b.N; i++ {
			err = br.Do(ctx, benchOK)
		}
		benchWantOpen(b, err)
	})
	b.Run("refused/parallel", func(b *testing.B) {
		br := newBr(b, 0)
		before := br.Counters().Admitted
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = br.Do(ctx, benchOK)
			}
		})
		if n := br.Counters().Admitted - before; n != 0 {
			b.Fatalf("%d calls admitted after the window was filled", n)
		}
	})
	b.Run("admitted/serial", func(b *testing.B) {
		br := newBr(b, 0.999)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%5 < 3 {
				_ = br.Do(ctx, benchFail)
			} else {
				_ = br.Do(ctx, benchOK)
			}
		}
		b.StopTimer()
		if br.Status().ThrottleProbability == 0 || br.State() != Closed {
			b.Fatal("the breaker stopped throttling")
		}
	})
}

// docs/policy.md, Throttling: while ErrorRatio is at most 1 - 1/K and the
// throttle's floor at least MinRequests, the ratio rule trips the breaker
// at the failure that would start throttling, so nothing is ever
// throttled, whatever the outcomes and however the window slides.
func TestThrottle_NeverActsFirstUnderALowErrorRatio(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.SampledFrom([]float64{1.5, 2, 3, 10}).Draw(rt, "k") // under K 1 no ratio is at most 0
		p := policy(func(p *Policy) {
			p.Window, p.Buckets = time.Second, 4
			p.MinRequests = rapid.IntRange(1, 10).Draw(rt, "min_requests")
			p.ErrorRatio = rapid.SampledFrom([]float64{1 - 1/k, 0.01, 0.25, (1 - 1/k) / 2}).Draw(rt, "error_ratio")
			p.Throttle = Throttle{Enabled: true, K: k, MinRequests: p.MinRequests + rapid.IntRange(0, 5).Draw(rt, "floor_above")}
		})
		// The model's step clock: *clock.Mock sleeps a millisecond a step.
		clk := &modelStepClock{t: time.Unix(1e9, 0)}
		b, err := New("x", p, WithClock(clk), WithRand(func() float64 { return 0 }))
		require.NoError(rt, err)
		for i, n := 0, rapid.IntRange(1, 200).Draw(rt, "calls"); i < n; i++ {
			clk.Set(clk.Now().Add(time.Duration(rapid.IntRange(0, 400).Draw(rt, "ms")) * time.Millisecond))
			err := []error{nil, errBoom, context.DeadlineExceeded, Ignore(errBoom)}[rapid.IntRange(0, 3).Draw(rt, "outcome")]
			_ = b.Do(context.Background(), func(context.Context) error { return err })
			if th := b.Counters().Throttled; th != 0 {
				rt.Fatalf("call %d: %d throttled under error_ratio %v, K %v", i, th, p.ErrorRatio, k)
			}
		}
	})
}

// Throttling under concurrent calls, policy changes and transitions, for
// the race detector: every throttled call is a refusal, and the
// probability stays in [0, 1).
func TestThrottle_ConcurrentCallsAndPolicyChanges(t *testing.T) {
	p := throttlePolicy(func(p *Policy) { p.Throttle.MinRequests = 5; p.ConsecutiveFailures = 50 })
	b, err := New("hammer", p)
	require.NoError(t, err)
	for i := 0; i < 20; i++ { // throttling from the start: p = 2/3
		err := errBoom
		if i < 3 {
			err = nil
		}
		_ = b.Do(context.Background(), func(context.Context) error { return err })
	}
	require.Positive(t, b.Status().ThrottleProbability)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				err := error(nil)
				if (i+g)%5 < 3 {
					err = errBoom
				}
				if i%2 == 0 {
					_ = b.Do(context.Background(), func(context.Context) error { return err })
				} else if _, done, aerr := b.Allow(context.Background()); aerr == nil {
					done(err)
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			q := p
			q.Throttle.Enabled = i%3 != 0
			if i%7 == 0 {
				q.Buckets = 5
			}
			assert.NoError(t, b.SetPolicy(q))
			if i%50 == 0 {
				b.Reset()
			}
			s := b.Status()
			assert.True(t, s.ThrottleProbability >= 0 && s.ThrottleProbability < 1, "%v", s.ThrottleProbability)
		}
	}()
	wg.Wait()
	c := b.Counters()
	assert.LessOrEqual(t, c.Throttled, c.Rejected)
	assert.Equal(t, c.Admitted, c.Successes+c.Failures+c.Timeouts+c.Ignored)
}

// Regression: a throttle that acts first (error_ratio above 1 - 1/K)
// refused nearly every call of a partial outage, so the window held too
// few counted calls for the ratio rule, and an outage that then turned
// hard never opened the breaker without ConsecutiveFailures: it stayed
// closed, refusing almost everything, with no open-state alert. The
// throttle now lets calls through while the window holds fewer than
// MinRequests counted calls, so the trip rules always have their sample.
func TestThrottle_NeverStarvesTheTripRulesOfTheirSample(t *testing.T) {
	d := &draws{spread: 100}
	h := newThrottleHarness(t, throttlePolicy(func(p *Policy) { p.MinRequests, p.ErrorRatio = 20, 0.9 }), d)
	// A partial outage, 70% failed, at 100 calls a second for 4 s.
	for i := 0; i < 400; i++ {
		err := error(nil)
		if i%10 < 7 {
			err = errBoom
		}
		h.attempt(err)
		if i%10 == 9 {
			h.add(100 * time.Millisecond)
		}
	}
	h.requireState(Closed)
	require.Greater(t, h.probability(), 0.5, "the throttle refuses most calls")
	assert.GreaterOrEqual(t, h.b.Snapshot().Counted, uint64(81), "yet the window keeps the floor: 81 calls, which every one failed show 0.9 with confidence")

	// The outage turns hard: the ratio rule opens the breaker within a
	// window.
	for i := 0; i < 500 && h.b.State() == Closed; i++ {
		h.attempt(errBoom)
		if i%10 == 9 {
			h.add(100 * time.Millisecond)
		}
	}
	h.requireState(Open)
	assert.Equal(t, ReasonErrorRatio, h.lastReason())
}
