package breakerotel

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errBoom = errors.New("boom")

const (
	inventory = testutil.Inventory
	pricing   = testutil.Pricing
	payment   = testutil.Payment
)

// fixture is a group on a mock clock (testutil.MockGroup, whose breakers
// run testutil.MetricsPolicy), registered with an SDK meter provider
// whose manual reader the test collects from.
type fixture struct {
	*testutil.MockGroup
	t      *testing.T
	m      *Metrics
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	return newFixtureOf(t, breaker.GroupConfig{}, opts...)
}

// newFixtureOf is newFixture with a group of cfg.
func newFixtureOf(t *testing.T, cfg breaker.GroupConfig, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{MockGroup: testutil.NewMockGroup(t, cfg), t: t, reader: sdkmetric.NewManualReader()}
	f.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() { require.NoError(t, f.mp.Shutdown(context.Background())) })
	var err error
	f.m, err = Register(f.Group, f.mp, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.m.Unregister()) })
	return f
}

// collect returns what the reader collects from this package's scope; an
// empty ScopeMetrics if the scope reported nothing.
func (f *fixture) collect() metricdata.ScopeMetrics {
	f.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(f.t, f.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == ScopeName {
			return sm
		}
	}
	return metricdata.ScopeMetrics{}
}

// expect compares the collected metrics named in want (all of them when
// only is false) with want, exactly but for timestamps and
// breaker.incarnation, which the tests of incarnations check apart.
func (f *fixture) expect(want []metricdata.Metrics, only bool) {
	f.t.Helper()
	got := f.collect()
	for i := range got.Metrics {
		got.Metrics[i].Data = withoutIncarnation(got.Metrics[i].Data)
	}
	if only {
		got.Metrics = slices.DeleteFunc(got.Metrics, func(m metricdata.Metrics) bool {
			return !slices.ContainsFunc(want, func(w metricdata.Metrics) bool { return w.Name == m.Name })
		})
	}
	metricdatatest.AssertEqual(f.t, metricdata.ScopeMetrics{
		Scope:   got.Scope, // checked by name in collect
		Metrics: want,
	}, got, metricdatatest.IgnoreTimestamp())
}

// withoutIncarnation returns a with breaker.incarnation taken out of the
// attributes of its points.
func withoutIncarnation(a metricdata.Aggregation) metricdata.Aggregation {
	switch d := a.(type) {
	case metricdata.Sum[int64]:
		d.DataPoints = stripIncarnation(d.DataPoints)
		return d
	case metricdata.Sum[float64]:
		d.DataPoints = stripIncarnation(d.DataPoints)
		return d
	case metricdata.Gauge[int64]:
		d.DataPoints = stripIncarnation(d.DataPoints)
		return d
	case metricdata.Gauge[float64]:
		d.DataPoints = stripIncarnation(d.DataPoints)
		return d
	}
	return a
}

func stripIncarnation[N int64 | float64](pts []metricdata.DataPoint[N]) []metricdata.DataPoint[N] {
	for i := range pts {
		pts[i].Attributes, _ = pts[i].Attributes.Filter(func(kv attribute.KeyValue) bool { return kv.Key != KeyIncarnation })
	}
	return pts
}

// The expected side of every instrument: its description and unit are
// part of what the test asserts.
var instruments = map[string]struct{ desc, unit string }{
	"breaker.state":                         {"Current state of the breaker: 1 for the state it is in, 0 for the others.", "{breaker}"},
	"breaker.transitions":                   {"State transitions of the breaker, by the rule or event that caused them.", "{transition}"},
	"breaker.calls":                         {"Admitted calls that have returned, by outcome; probes included.", "{call}"},
	"breaker.slow_calls":                    {"Closed-state calls slower than the policy's slow_call.", "{call}"},
	"breaker.rejected":                      {"Calls refused without calling the downstream.", "{call}"},
	"breaker.shadow_rejected":               {"Calls a shadow breaker admitted but would have refused.", "{call}"},
	"breaker.throttled":                     {"Calls the policy's throttle refused while the breaker was closed; a subset of breaker.rejected, or of breaker.shadow_rejected for a shadow breaker, which admits them.", "{call}"},
	"breaker.throttle.probability":          {"Probability with which the policy's throttle refuses the breaker's next call; 0 while it throttles nothing, and for a breaker that does not throttle.", "1"},
	"breaker.fallbacks":                     {"Results served by a fallback instead of the downstream.", "{call}"},
	"breaker.probes":                        {"Half-open probe verdicts.", "{probe}"},
	"breaker.not_closed.time":               {"Time the breaker has spent open or half-open, the current outage included.", "s"},
	"breaker.open.duration":                 {"Length of the outage in progress: from the trip that began it, its closes and re-trips included, until the breaker has stayed closed for the policy's max_open_for; 0 while there is none.", "s"},
	"breaker.window.calls":                  {"Counted calls (successes, failures and timeouts) in the sliding window.", "{call}"},
	"breaker.window.error_ratio":            {"Failures divided by counted calls in the sliding window; 0 when it is empty.", "1"},
	"breaker.outage.trips":                  {"Trips from closed in the outage in progress, the first included; not reported while there is none.", "{trip}"},
	"breaker.outage.probes.failed":          {"Half-open probes that failed, timeouts included, in the outage in progress; not reported while there is none.", "{probe}"},
	"breaker.outage.probes.passed":          {"Half-open probes that passed in the outage in progress; not reported while there is none.", "{probe}"},
	"breaker.outage.probes.passed_on_error": {"Half-open probes in the outage in progress that answered with an error and passed, as they do while the policy's strict_probes is off; not reported while there is none.", "{probe}"},
	"breaker.outage.refused":                {"Calls refused with ErrOpen in the outage in progress; not reported while there is none.", "{call}"},
	"breaker.window.slow_calls":             {"Counted calls in the sliding window slower than the policy's slow_call; 0 while that rule is off.", "{call}"},
	"breaker.window.slow_ratio":             {"Slow calls divided by counted calls in the sliding window; 0 when it is empty.", "1"},
	"breaker.policy.slow_ratio":             {"The policy's slow ratio: the breaker trips when the window's slow ratio reaches it; 0 when that rule is off.", "1"},
	"breaker.policy.slow_call":              {"The policy's slow_call: a call slower than it counts as slow; 0 when the slow rule is off.", "s"},
	"breaker.trip":                          {"1 while an outage is in progress, with the rule of the trip that began it, which failed probes and re-trips do not change.", "{breaker}"},
	"breaker.trip.window.calls":             {"Counted calls in the sliding window that the rule judged at the trip that began the outage in progress.", "{call}"},
	"breaker.trip.window.failures":          {"Failures, timeouts included, in the window of the trip that began the outage in progress.", "{call}"},
	"breaker.trip.window.timeouts":          {"Timeouts in the window of the trip that began the outage in progress.", "{call}"},
	"breaker.trip.window.slow":              {"Calls slower than the policy's slow_call in the window of the trip that began the outage in progress.", "{call}"},
	"breaker.trip.run":                      {"Consecutive failures at the trip that began the outage in progress, counted while the policy's consecutive_failures is set (0 otherwise).", "{call}"},
	"breaker.trip.slow_call":                {"The policy's slow_call at the trip that began the outage in progress, what breaker.trip.window.slow counts calls slower than; 0 if the slow rule was off.", "s"},
	"breaker.policy.info":                   {"The policy document in force: 1, with its origin and version (empty for a policy set by code).", "1"},
	"breaker.policy.applied_at":             {"When the policy document in force was applied, in Unix seconds on the group's clock.", "s"},
	"breaker.policy.reloads":                {"Policy documents a followed source delivered, by what became of them.", "{document}"},
	"breaker.group.breakers":                {"Breakers the group holds.", "{breaker}"},
	"breaker.group.max_breakers":            {"The most breakers the group holds; calls for further keys run through its overflow breaker.", "{breaker}"},
	"breaker.group.overflow_calls":          {"Calls for keys that had no breaker while the group was full, run through its overflow breaker.", "{call}"},
	"breaker.group.evicted":                 {"Breakers dropped as idle, by the state they were in.", "{breaker}"},
	"breaker.policy.last_reload":            {"The last document a followed source delivered: 1, with what became of it and its version.", "1"},
	"breaker.policy.source_down":            {"1 while the followed source is gone or unreadable and has delivered nothing readable since, with its origin; not reported while it delivers. The version in force keeps running.", "1"},
	"breaker.policy.rejected":               {"1 while the last document refused has not been followed by a valid one, with its origin and version; a gone or unreadable source does not end it.", "1"},
	"breaker.candidate.state":               {"State of the breaker's candidate policy, run in shadow: 1 for the state it is in, 0 for the others.", "{breaker}"},
	"breaker.candidate.transitions":         {"State transitions of the breaker's candidate policy, by the rule or event that caused them.", "{transition}"},
	"breaker.candidate.would_refuse":        {"Calls the breaker admitted that its candidate policy would have refused.", "{call}"},
	"breaker.candidate.would_admit":         {"Calls the breaker refused that its candidate policy would have admitted.", "{call}"},
	"breaker.candidate.differences":         {"Times the breaker's candidate policy and its policy in force came to differ in state.", "{difference}"},
	"breaker.latency":                       {"Latency of the calls, by quantile over the sliding window, the calls cut by a deadline counted as lasting at least what they ran; a quantile is not reported while it is unknown.", "s"},
	"breaker.latency.censored":              {"Calls cut by a deadline, which the quantiles count as lasting at least what they ran.", "{call}"},
	"breaker.timeout":                       {"The deadline the breaker gives calls now: the policy's timeout, or the adaptive timeout in force; 0 for none.", "s"},
}

// groupPoint is a point of a group-wide instrument, without breaker.name.
func groupPoint[N int64 | float64](v N, kv ...attribute.KeyValue) metricdata.DataPoint[N] {
	return metricdata.DataPoint[N]{Attributes: attribute.NewSet(kv...), Value: v}
}

// quantiles is the four points of breaker.latency for a breaker whose
// window's quantiles are qs (0.5, 0.9, 0.99, 0.999).
func quantiles(name string, qs ...time.Duration) []metricdata.DataPoint[float64] {
	var pts []metricdata.DataPoint[float64]
	for i, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		pts = append(pts, point(qs[i].Seconds(), name, KeyLatencyQuantile.Float64(q)))
	}
	return pts
}

func point[N int64 | float64](v N, name string, kv ...attribute.KeyValue) metricdata.DataPoint[N] {
	return metricdata.DataPoint[N]{Attributes: attribute.NewSet(append([]attribute.KeyValue{KeyName.String(name)}, kv...)...), Value: v}
}

func metricOf(name string, data metricdata.Aggregation) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Description: instruments[name].desc, Unit: instruments[name].unit, Data: data}
}

func counter[N int64 | float64](name string, pts ...metricdata.DataPoint[N]) metricdata.Metrics {
	return metricOf(name, metricdata.Sum[N]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true})
}

func upDown[N int64 | float64](name string, pts ...metricdata.DataPoint[N]) metricdata.Metrics {
	return metricOf(name, metricdata.Sum[N]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality})
}

func gauge[N int64 | float64](name string, pts ...metricdata.DataPoint[N]) metricdata.Metrics {
	return metricOf(name, metricdata.Gauge[N]{DataPoints: pts})
}

// stateOf is the three points of breaker.state for a breaker in st.
func stateOf(name string, st breaker.State) []metricdata.DataPoint[int64] {
	var pts []metricdata.DataPoint[int64]
	for _, s := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen} {
		v := int64(0)
		if s == st {
			v = 1
		}
		pts = append(pts, point(v, name, KeyState.String(s.String())))
	}
	return pts
}

func moved(name string, from, to breaker.State, reason breaker.Reason, n int64) metricdata.DataPoint[int64] {
	return point(n, name,
		KeyTransitionFrom.String(from.String()), KeyTransitionTo.String(to.String()),
		KeyTransitionReason.String(string(reason)))
}

// moves is every possible transition of the breakers named, as
// breaker.transitions reports them: at the count made gives one, or at 0.
func moves(names []string, made ...metricdata.DataPoint[int64]) []metricdata.DataPoint[int64] {
	var pts []metricdata.DataPoint[int64]
	for _, n := range names {
		for _, t := range breaker.PossibleTransitions() {
			pt := moved(n, t.From, t.To, t.Reason, 0)
			for _, m := range made {
				if m.Attributes.Equals(&pt.Attributes) {
					pt.Value = m.Value
				}
			}
			pts = append(pts, pt)
		}
	}
	return pts
}

func outcome(o string) attribute.KeyValue { return KeyOutcome.String(o) }
func result(r string) attribute.KeyValue  { return KeyProbeResult.String(r) }

// Every instrument, from one group that has seen a full outage and
// recovery (pricing), a shadow breaker that would be open (payment), and a
// healthy breaker with slow and ignored calls (inventory): the story of
// testutil.PlayEveryCount, and the same numbers as the Prometheus
// adapter's test.
func TestMetrics_ReportEveryInstrument(t *testing.T) {
	f := newFixture(t)
	f.PlayEveryCount()

	f.expect([]metricdata.Metrics{
		upDown("breaker.state", slices.Concat(
			stateOf(inventory, breaker.Closed),
			stateOf(payment, breaker.Open),
			stateOf(pricing, breaker.Closed))...),
		counter("breaker.transitions", moves([]string{inventory, payment, pricing},
			moved(payment, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1),
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1),
			moved(pricing, breaker.Open, breaker.HalfOpen, breaker.ReasonCooldown, 2),
			moved(pricing, breaker.HalfOpen, breaker.Open, breaker.ReasonProbeFailed, 1),
			moved(pricing, breaker.HalfOpen, breaker.Closed, breaker.ReasonProbesPassed, 1))...),
		counter("breaker.calls",
			point[int64](4, inventory, outcome("success")),
			point[int64](0, inventory, outcome("failure")),
			point[int64](0, inventory, outcome("timeout")),
			point[int64](1, inventory, outcome("ignored")),
			point[int64](3, payment, outcome("success")),
			point[int64](2, payment, outcome("failure")),
			point[int64](0, payment, outcome("timeout")),
			point[int64](0, payment, outcome("ignored")),
			point[int64](3, pricing, outcome("success")),
			point[int64](2, pricing, outcome("failure")),
			point[int64](1, pricing, outcome("timeout")),
			point[int64](0, pricing, outcome("ignored"))),
		counter("breaker.slow_calls", point[int64](1, inventory), point[int64](0, payment), point[int64](0, pricing)),
		counter("breaker.rejected", point[int64](0, inventory), point[int64](0, payment), point[int64](3, pricing)),
		counter("breaker.shadow_rejected", point[int64](0, inventory), point[int64](1, payment), point[int64](0, pricing)),
		counter("breaker.throttled", point[int64](0, inventory), point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.throttle.probability", point(0.0, inventory), point(0.0, payment), point(0.0, pricing)),
		counter("breaker.fallbacks", point[int64](0, inventory), point[int64](0, payment), point[int64](1, pricing)),
		counter("breaker.probes",
			point[int64](0, inventory, result("passed")), point[int64](0, inventory, result("failed")),
			point[int64](0, payment, result("passed")), point[int64](0, payment, result("failed")),
			point[int64](1, pricing, result("passed")), point[int64](1, pricing, result("failed"))),
		counter("breaker.not_closed.time", point(0.0, inventory), point(8.0, payment), point(30.0, pricing)),
		// Pricing closed at 30s and is recovering: its outage (38s) and
		// the trip that began it are reported until it settles.
		gauge("breaker.open.duration", point(0.0, inventory), point(8.0, payment), point(38.0, pricing)),
		upDown("breaker.window.calls", point[int64](4, inventory), point[int64](4, payment), point[int64](0, pricing)),
		gauge("breaker.window.error_ratio", point(0.0, inventory), point(0.5, payment), point(0.0, pricing)),
		upDown("breaker.window.slow_calls", point[int64](1, inventory), point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.window.slow_ratio", point(0.25, inventory), point(0.0, payment), point(0.0, pricing)),
		gauge("breaker.policy.slow_ratio", point(1.0, inventory), point(1.0, payment), point(1.0, pricing)),
		gauge("breaker.policy.slow_call", point(2.0, inventory), point(2.0, payment), point(2.0, pricing)),
		gauge("breaker.outage.trips", point[int64](1, payment), point[int64](1, pricing)),
		gauge("breaker.outage.probes.failed", point[int64](0, payment), point[int64](1, pricing)),
		gauge("breaker.outage.probes.passed", point[int64](0, payment), point[int64](1, pricing)),
		gauge("breaker.outage.probes.passed_on_error", point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.outage.refused", point[int64](0, payment), point[int64](3, pricing)),
		upDown("breaker.trip", point[int64](1, payment, KeyTripReason.String("error_ratio")), point[int64](1, pricing, KeyTripReason.String("error_ratio"))),
		gauge("breaker.trip.window.calls", point[int64](4, payment), point[int64](4, pricing)),
		gauge("breaker.trip.window.failures", point[int64](2, payment), point[int64](2, pricing)),
		gauge("breaker.trip.window.timeouts", point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.trip.window.slow", point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.trip.run", point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.trip.slow_call", point(2.0, payment), point(2.0, pricing)),
		gauge("breaker.policy.info", groupPoint[int64](1, KeyPolicyOrigin.String("code"), KeyPolicyVersion.String(""))),
		gauge("breaker.policy.applied_at", groupPoint(float64(f.T0.Unix()))),
		counter("breaker.policy.reloads",
			groupPoint[int64](0, KeyPolicyResult.String("applied")),
			groupPoint[int64](0, KeyPolicyResult.String("rejected")),
			groupPoint[int64](0, KeyPolicyResult.String("gone")),
			groupPoint[int64](0, KeyPolicyResult.String("unreadable")),
			groupPoint[int64](0, KeyPolicyResult.String("unchanged"))),
		upDown("breaker.group.breakers", groupPoint[int64](3)),
		gauge("breaker.group.max_breakers", groupPoint[int64](10000)),
		counter("breaker.group.overflow_calls", groupPoint[int64](0)),
		counter("breaker.group.evicted",
			groupPoint[int64](0, KeyState.String("closed")),
			groupPoint[int64](0, KeyState.String("open")),
			groupPoint[int64](0, KeyState.String("half_open"))),
		// The test policy times calls (a slow-call rule). A call of no
		// mock time is in the histogram's first bin, reported as 512 ns;
		// the 3 s call as the point of its bin, within 3.1%. Pricing's
		// calls have left the window, so its quantiles are unknown and
		// not reported (they read 0); payment's shadow admission is not
		// measured, as it is not counted.
		gauge("breaker.latency", slices.Concat(
			quantiles(inventory, 512, 3018407571, 3018407571, 3018407571),
			quantiles(payment, 512, 512, 512, 512))...),
		counter("breaker.latency.censored", point[int64](0, inventory), point[int64](0, payment), point[int64](0, pricing)),
		gauge("breaker.timeout", point(0.0, inventory), point(0.0, payment), point(0.0, pricing)),
	}, false)
}

// The state and the open-time instruments follow an outage step by step.
func TestMetrics_StateAndOpenTimeFollowAnOutage(t *testing.T) {
	f := newFixture(t)
	const (
		t0 = 0
		t1 = 4 * time.Second
		t2 = 10 * time.Second // the cooldown ends
	)
	tripped := moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1)
	steps := []struct {
		at        time.Duration
		do        func()
		state     breaker.State
		open      float64 // breaker.open.duration and breaker.not_closed.time alike in one outage
		moves     []metricdata.DataPoint[int64]
		rejection int64
	}{
		{t0, func() { f.Trip(pricing) }, breaker.Open, 0, []metricdata.DataPoint[int64]{tripped}, 0},
		{t1, func() { f.Refused(pricing, 1) }, breaker.Open, 4, []metricdata.DataPoint[int64]{tripped}, 1},
		// A collection notices the ended cooldown, as any look at the
		// breaker does: half-open before a call comes.
		{t2, nil, breaker.HalfOpen, 10, []metricdata.DataPoint[int64]{tripped,
			moved(pricing, breaker.Open, breaker.HalfOpen, breaker.ReasonCooldown, 1)}, 1},
	}
	for i, s := range steps {
		t.Logf("step %d at t0+%v", i, s.at)
		f.At(s.at)
		if s.do != nil {
			s.do()
		}
		f.expect([]metricdata.Metrics{
			upDown("breaker.state", stateOf(pricing, s.state)...),
			counter("breaker.transitions", moves([]string{pricing}, s.moves...)...),
			counter("breaker.rejected", point(s.rejection, pricing)),
			counter("breaker.not_closed.time", point(s.open, pricing)),
			gauge("breaker.open.duration", point(s.open, pricing)),
		}, true)
	}
}

// A breaker the group drops stops being reported, transitions included;
// one created again under the same key counts afresh.
func TestMetrics_ForgetBreakersTheGroupDrops(t *testing.T) {
	f := newFixture(t)
	f.Trip(pricing)
	f.Calls(inventory, 1, nil)
	f.expect([]metricdata.Metrics{
		upDown("breaker.state", slices.Concat(stateOf(inventory, breaker.Closed), stateOf(pricing, breaker.Open))...),
		counter("breaker.transitions", moves([]string{inventory, pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1))...),
	}, true)

	require.True(t, f.Group.Remove(pricing))
	f.expect([]metricdata.Metrics{
		upDown("breaker.state", stateOf(inventory, breaker.Closed)...),
		counter("breaker.transitions", moves([]string{inventory})...),
	}, true)

	f.Trip(pricing)
	f.expect([]metricdata.Metrics{
		upDown("breaker.state", slices.Concat(stateOf(inventory, breaker.Closed), stateOf(pricing, breaker.Open))...),
		counter("breaker.transitions", moves([]string{inventory, pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1))...),
	}, true)
}

// After Unregister nothing is reported for the group.
func TestMetrics_UnregisterStopsTheCallback(t *testing.T) {
	f := newFixture(t)
	f.Calls(inventory, 1, nil)
	require.NotEmpty(t, f.collect().Metrics)

	require.NoError(t, f.m.Unregister())
	require.NoError(t, f.m.Unregister())
	f.Trip(pricing)
	assert.Empty(t, f.collect().Metrics)
}

// WithAttributes adds its attributes to every measurement.
func TestMetrics_WithAttributesTagsEveryMeasurement(t *testing.T) {
	group := attribute.String("breaker.group", "outbound")
	f := newFixture(t, WithAttributes(group))
	f.Trip(pricing)
	tagged := func(pts []metricdata.DataPoint[int64]) []metricdata.DataPoint[int64] {
		for i := range pts {
			pts[i].Attributes = attribute.NewSet(append(pts[i].Attributes.ToSlice(), group)...)
		}
		return pts
	}
	f.expect([]metricdata.Metrics{
		upDown("breaker.state", tagged(stateOf(pricing, breaker.Open))...),
		counter("breaker.transitions", tagged(moves([]string{pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1)))...),
	}, true)
}

func TestRegister_RefusesNilArguments(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	_, err = Register(nil, noop.NewMeterProvider())
	assert.Error(t, err)
	_, err = Register(g, nil)
	assert.Error(t, err)

	// Any implementation of the API will do, including the no-op one.
	m, err := Register(g, noop.NewMeterProvider())
	require.NoError(t, err)
	require.NoError(t, m.Unregister())
}

// tripOnFirst is an Observer that runs f at the first measurement: by
// then the callback has taken its snapshot of the group.
type tripOnFirst struct {
	metric.Observer
	f    func()
	done bool
}

func (o *tripOnFirst) ObserveInt64(metric.Int64Observable, int64, ...metric.ObserveOption) {
	if !o.done {
		o.done = true
		o.f()
	}
}

func (o *tripOnFirst) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

// A breaker created after a collection took its snapshot, whose first
// transition lands while the callback is still observing, is absent from
// that snapshot but alive: the callback must not take it for a dropped
// breaker and forget the transition.
func TestMetrics_KeepATransitionThatLandsDuringACollection(t *testing.T) {
	f := newFixture(t)
	f.Calls(inventory, 1, nil) // so the callback has something to observe
	require.NoError(t, f.m.observe(context.Background(), &tripOnFirst{f: func() { f.Trip(pricing) }}))
	f.expect([]metricdata.Metrics{
		counter("breaker.transitions", moves([]string{inventory, pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1))...),
	}, true)
}

// Collections run while breakers trip and recover on other goroutines;
// every transition is counted exactly once.
func TestMetrics_RaceHammer(t *testing.T) {
	f := newFixture(t)
	seen := f.Hammer(func() {
		var rm metricdata.ResourceMetrics
		assert.NoError(t, f.reader.Collect(context.Background(), &rm))
	}, inventory, pricing, payment)

	var total int64
	for _, m := range f.collect().Metrics {
		if m.Name == "breaker.transitions" {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				total += p.Value
			}
		}
	}
	assert.Equal(t, int64(seen), total)
	assert.Equal(t, int64(3*50*2), total, "each round trips once and resets once")
}

// A breaker removed and created again under its key starts its
// transition counts from zero, as its calls, probes and own Opens do:
// pricing tripped, was removed, and tripped again before the next
// collection, and reports one trip.
// Regression (31429fa): counts were kept by name and forgotten only when a
// collection found the name gone, so the new breaker reported the old
// one's trip as well as its own (2).
func TestMetrics_TransitionCountsStartAfreshWithARecreatedBreaker(t *testing.T) {
	f := newFixture(t)
	f.Trip(pricing)
	require.True(t, f.Group.Remove(pricing))
	f.Trip(pricing)
	require.Equal(t, uint64(1), f.Breaker(pricing).Counters().Opens)
	f.expect([]metricdata.Metrics{
		counter("breaker.transitions", moves([]string{pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1))...),
	}, true)
}

// Instruments registered after the group has served traffic (a service
// whose telemetry came up late) count the transitions made before them:
// pricing tripped, failed a probe and recovered in between, and
// breaker.transitions reports all of it.
// Regression (7500589): transitions were counted through Group.Subscribe
// from the registration on, so none of these were reported, while the
// breaker's own breaker.probes reported both verdicts.
func TestMetrics_RegisteredLateCountEarlierTransitions(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.m.Unregister()) // only the late registration reports
	f.Trip(pricing)
	f.Recover(pricing) // a probe fails, open for 20s; the next passes

	late, err := Register(f.Group, f.mp)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, late.Unregister()) })
	f.expect([]metricdata.Metrics{
		counter("breaker.transitions", moves([]string{pricing},
			moved(pricing, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1),
			moved(pricing, breaker.Open, breaker.HalfOpen, breaker.ReasonCooldown, 2),
			moved(pricing, breaker.HalfOpen, breaker.Open, breaker.ReasonProbeFailed, 1),
			moved(pricing, breaker.HalfOpen, breaker.Closed, breaker.ReasonProbesPassed, 1))...),
		counter("breaker.not_closed.time", point(30.0, pricing)),
	}, true)
}

// Every transition a breaker can make is reported at 0 from its
// creation, so that a backend's rate sees the first trip; each used to be
// reported only once made, starting at 1. The trip's rule and window are
// reported for the whole outage, whatever reopened the breaker since.
func TestMetrics_TransitionsFromZeroAndTheTripForTheWholeOutage(t *testing.T) {
	f := newFixture(t)
	f.Calls(pricing, 1, nil)
	f.expect([]metricdata.Metrics{counter("breaker.transitions", moves([]string{pricing})...)}, true)
	f.Calls(pricing, 1, nil)
	f.Calls(pricing, 1, errBoom)
	f.Calls(pricing, 1, context.DeadlineExceeded) // 2 of 4 failed: it trips
	f.At(10 * time.Second)
	f.Calls(pricing, 1, context.DeadlineExceeded) // the probe times out
	require.Equal(t, breaker.ReasonProbeFailed, f.Breaker(pricing).Status().Reason)
	trip := []metricdata.Metrics{
		upDown("breaker.trip", point[int64](1, pricing, KeyTripReason.String("error_ratio"))),
		gauge("breaker.trip.window.calls", point[int64](4, pricing)),
		gauge("breaker.trip.window.failures", point[int64](2, pricing)),
		gauge("breaker.trip.window.timeouts", point[int64](1, pricing)),
	}
	f.expect(trip, true)
	f.At(30 * time.Second)
	f.Calls(pricing, 1, nil) // closed: recovering, the outage goes on
	f.expect(trip, true)
	f.At(70 * time.Second) // closed for MaxOpenFor (40s): settled
	got := f.collect()
	for _, m := range got.Metrics {
		assert.NotContains(t, []string{"breaker.trip", "breaker.trip.window.calls", "breaker.trip.run", "breaker.outage.trips"}, m.Name, "reported once settled")
	}
}

// The outage's instruments: a hard error outage whose probes answer with
// errors and pass (StrictProbes off) closes and trips again; its counts
// grow across the close, as one outage. A new process (a new group) on
// the same downstream starts from its own first trip.
func TestMetrics_OutageCountsGrowAcrossClosesAndStartAfreshInANewProcess(t *testing.T) {
	want := func(dur float64, trips, failed, passed, onError, refused int64) []metricdata.Metrics {
		return []metricdata.Metrics{
			gauge("breaker.open.duration", point(dur, pricing)),
			gauge("breaker.outage.trips", point(trips, pricing)),
			gauge("breaker.outage.probes.failed", point(failed, pricing)),
			gauge("breaker.outage.probes.passed", point(passed, pricing)),
			gauge("breaker.outage.probes.passed_on_error", point(onError, pricing)),
			gauge("breaker.outage.refused", point(refused, pricing)),
		}
	}
	f := newFixture(t)
	f.Calls(pricing, 4, errBoom) // trips at 0s
	f.Refused(pricing, 2)
	f.expect(want(0, 1, 0, 0, 0, 2), true)
	f.At(10 * time.Second)
	f.Calls(pricing, 1, errBoom) // the probe answers with an error and passes: closed
	f.Calls(pricing, 4, errBoom) // trips again
	f.expect(want(10, 2, 0, 1, 1, 2), true)
	f.At(40 * time.Second)
	f.Calls(pricing, 1, context.DeadlineExceeded) // a probe timeout fails it
	f.expect(want(40, 2, 1, 1, 1, 2), true)

	g := newFixture(t) // the process restarts
	g.Calls(pricing, 4, errBoom)
	g.expect(want(0, 1, 0, 0, 0, 0), true)
}

// A followed source that is gone is reported as down, and the refused
// document stands through it; a readable valid document ends both.
func TestMetrics_AGoneSourceIsDownAndKeepsTheRefusedDocument(t *testing.T) {
	f := newFixture(t)
	fl, deliver := f.Follow()
	m, err := Register(f.Group, f.mp, WithFollower(fl))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Unregister()) })
	require.NoError(t, f.m.Unregister()) // the fixture's, without the follower
	const origin = "file:/etc/app/breakers.json"
	good := live.Document{Origin: origin, Version: "v1", Data: []byte(`{"default": {"min_requests": 10}}`)}
	names := []string{"breaker.policy.source_down", "breaker.policy.rejected"}
	has := func() map[string]bool {
		out := map[string]bool{}
		for _, m := range f.collect().Metrics {
			if slices.Contains(names, m.Name) {
				out[m.Name] = true
			}
		}
		return out
	}
	require.Equal(t, live.Applied, deliver(good))
	assert.Empty(t, has())
	require.Equal(t, live.Rejected, deliver(live.Document{Origin: origin, Version: "v2", Data: []byte(`{"default": {"min_requests": -1}}`)}))
	require.Equal(t, live.Gone, deliver(live.Document{Origin: origin, Gone: true}))
	f.expect([]metricdata.Metrics{
		gauge("breaker.policy.source_down", groupPoint[int64](1, KeyPolicyOrigin.String(origin))),
		gauge("breaker.policy.rejected", groupPoint[int64](1, KeyPolicyOrigin.String(origin), KeyPolicyVersion.String("v2"))),
	}, true)
	require.Equal(t, live.Unchanged, deliver(good))
	assert.Empty(t, has())
}

// An operator confirms a change from the metrics: the version in force,
// when it was applied, and the reloads by result, a rejected one included.
func TestMetrics_ReportThePolicyInForceAndTheReloads(t *testing.T) {
	f := newFixture(t)
	fl, deliver := f.Follow()
	require.NoError(t, f.m.Unregister())
	var err error
	f.m, err = Register(f.Group, f.mp, WithFollower(fl))
	require.NoError(t, err)

	f.At(time.Minute)
	require.Equal(t, live.Applied, deliver(live.Document{Origin: "etcd:/services/shop/breakers",
		Version: "42", Data: []byte(`{"default": {"min_requests": 10}}`)}))
	f.At(2 * time.Minute)
	require.Equal(t, live.Gone, deliver(live.Document{Origin: "etcd:/services/shop/breakers", Gone: true}))

	f.expect([]metricdata.Metrics{
		gauge("breaker.policy.info", groupPoint[int64](1,
			KeyPolicyOrigin.String("etcd:/services/shop/breakers"), KeyPolicyVersion.String("42"))),
		gauge("breaker.policy.applied_at", groupPoint(float64(f.T0.Add(time.Minute).Unix()))),
		counter("breaker.policy.reloads",
			groupPoint[int64](1, KeyPolicyResult.String("applied")),
			groupPoint[int64](0, KeyPolicyResult.String("rejected")),
			groupPoint[int64](1, KeyPolicyResult.String("gone")),
			groupPoint[int64](0, KeyPolicyResult.String("unreadable")),
			groupPoint[int64](0, KeyPolicyResult.String("unchanged"))),
		gauge("breaker.policy.last_reload", groupPoint[int64](1, KeyPolicyResult.String("gone"), KeyPolicyVersion.String(""))),
	}, true)
}

// A breaker running a candidate policy reports what the candidate does,
// under instruments of its own.
func TestMetrics_ReportACandidatePolicy(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.Group.SetPolicies(testutil.CandidatePolicies(payment)))
	f.Calls(payment, 3, nil)
	f.Calls(payment, 1, errBoom)
	f.Calls(payment, 2, nil)
	f.Calls(inventory, 1, nil)

	f.expect([]metricdata.Metrics{
		upDown("breaker.candidate.state", stateOf(payment, breaker.Open)...),
		counter("breaker.candidate.transitions",
			moved(payment, breaker.Closed, breaker.Open, breaker.ReasonErrorRatio, 1)),
		counter("breaker.candidate.would_refuse", point[int64](2, payment)),
		counter("breaker.candidate.would_admit", point[int64](0, payment)),
		counter("breaker.candidate.differences", point[int64](1, payment)),
	}, true)
}

// Regression: when a key's breaker was removed and made again between two
// collections, breaker.calls went backwards: with delta temporality the
// collection reported a delta of -7 (3 calls on the new breaker, 10 on
// the old), and with cumulative temporality the count fell from 10 to 3
// under the same start time. The same came of a key dropped, missing
// from one collection and made again. Read by a reader of each
// temporality, no delta is negative, the deltas add up to every call
// made, and no cumulative series falls under one start time.
func TestMetrics_ARecreatedKeysCountsNeverGoBackwards(t *testing.T) {
	clk := clock.NewMock()
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(clk))
	require.NoError(t, err)
	cumulative := sdkmetric.NewManualReader()
	delta := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(
		func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(cumulative), sdkmetric.WithReader(delta))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	m, err := Register(g, mp)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Unregister()) })

	calls := func(n int) {
		for range n {
			require.NoError(t, g.Do(context.Background(), pricing, func(context.Context) error { return nil }))
		}
	}
	type seen struct {
		start time.Time
		v     int64
	}
	last := map[attribute.Distinct]seen{}
	var deltas int64
	collect := func(step string) {
		t.Helper()
		clk.Add(time.Second)
		for _, r := range []*sdkmetric.ManualReader{cumulative, delta} {
			var rm metricdata.ResourceMetrics
			require.NoError(t, r.Collect(context.Background(), &rm))
			for _, sm := range rm.ScopeMetrics {
				for _, mt := range sm.Metrics {
					if mt.Name != "breaker.calls" {
						continue
					}
					sum := mt.Data.(metricdata.Sum[int64])
					for _, p := range sum.DataPoints {
						if sum.Temporality == metricdata.DeltaTemporality {
							assert.GreaterOrEqual(t, p.Value, int64(0), "%s: a delta of %v", step, p.Attributes.ToSlice())
							deltas += p.Value
							continue
						}
						k := p.Attributes.Equivalent()
						if prev, ok := last[k]; ok && prev.start.Equal(p.StartTime) {
							assert.GreaterOrEqual(t, p.Value, prev.v, "%s: %v fell under the same start time", step, p.Attributes.ToSlice())
						}
						last[k] = seen{p.StartTime, p.Value}
					}
				}
			}
		}
	}
	calls(10)
	collect("first")
	require.True(t, g.Remove(pricing))
	calls(3)
	collect("made again between two collections")
	require.True(t, g.Remove(pricing))
	collect("gone")
	calls(2)
	collect("made again after a collection without it")
	assert.Equal(t, int64(15), deltas, "the deltas add up to every call")
}

// breaker.incarnation: each breaker gets a number the first time it is
// reported, in the order of the keys among the new ones, and keeps it; a
// breaker made again for a key gets the next, and the Metrics forgets a
// breaker the group has dropped.
func TestMetrics_EachBreakerOfAKeyIsAnIncarnationOfItsOwn(t *testing.T) {
	f := newFixture(t)
	f.Calls(pricing, 1, nil)
	f.Calls(inventory, 1, nil)
	incs := func() map[string]int64 {
		out := map[string]int64{}
		for _, mt := range f.collect().Metrics {
			if mt.Name != "breaker.rejected" {
				continue
			}
			for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				name, _ := p.Attributes.Value(KeyName)
				inc, ok := p.Attributes.Value(KeyIncarnation)
				require.True(t, ok, "every series of a breaker has breaker.incarnation")
				out[name.AsString()] = inc.AsInt64()
			}
		}
		return out
	}
	assert.Equal(t, map[string]int64{inventory: 1, pricing: 2}, incs())
	f.Calls(payment, 1, nil)
	assert.Equal(t, map[string]int64{inventory: 1, payment: 3, pricing: 2}, incs())

	require.True(t, f.Group.Remove(pricing))
	f.Calls(pricing, 1, nil)
	assert.Equal(t, map[string]int64{inventory: 1, payment: 3, pricing: 4}, incs())
	f.m.mu.Lock()
	assert.Len(t, f.m.inc, 3, "the removed breaker is forgotten")
	f.m.mu.Unlock()

	require.NoError(t, f.m.Unregister())
	f.m.mu.Lock()
	assert.Empty(t, f.m.inc, "Unregister keeps no breaker alive")
	f.m.mu.Unlock()
}

// The group's cap and its idle eviction are reported: the breakers it
// holds, the cap, the calls sent past it, and the breakers dropped as
// idle by the state they were in; a dropped breaker's series go.
func TestMetrics_ReportTheGroupsCapAndItsEvictions(t *testing.T) {
	f := newFixtureOf(t, breaker.GroupConfig{MaxBreakers: 2, IdleAfter: time.Minute})
	f.Trip(pricing)
	f.Calls(inventory, 1, nil)
	f.Calls(payment, 3, nil) // past the cap
	f.Group.EvictIdle()
	f.At(time.Minute)
	f.Calls(inventory, 1, nil)
	require.Equal(t, 1, f.Group.EvictIdle())
	f.expect([]metricdata.Metrics{
		upDown("breaker.state", stateOf(inventory, breaker.Closed)...),
		upDown("breaker.group.breakers", groupPoint[int64](1)),
		gauge("breaker.group.max_breakers", groupPoint[int64](2)),
		counter("breaker.group.overflow_calls", groupPoint[int64](3)),
		counter("breaker.group.evicted",
			groupPoint[int64](0, KeyState.String("closed")),
			groupPoint[int64](1, KeyState.String("open")),
			groupPoint[int64](0, KeyState.String("half_open"))),
	}, true)
}

// A closed breaker whose throttle refuses calls reports them in
// breaker.throttled, within breaker.rejected, with the probability of
// refusing the next one, under the attributes of its other series,
// breaker.incarnation included; a shadow breaker counts what it would
// have throttled within breaker.shadow_rejected. The probability is 0
// again once the failures leave the window, and the counts stay.
func TestMetrics_ThrottledCallsAndTheRefusalProbability(t *testing.T) {
	f := newFixture(t)
	throttle := testutil.MetricsPolicy()
	throttle.ErrorRatio = 0
	throttle.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 4}
	require.NoError(t, f.Group.SetPolicies(breaker.GroupPolicy{Default: testutil.MetricsPolicy(),
		Overrides: map[string]breaker.Policy{pricing: throttle, payment: throttle}}))
	require.NoError(t, f.Breaker(payment).SetMode(breaker.ModeShadow))
	// Failures until the throttle refuses (in shadow, would refuse) a
	// call: how many it takes is the core's rule of the throttle's
	// sample. The draws are 0.5, so from then on it refuses every call.
	for _, key := range []string{pricing, payment} {
		for i := 0; f.Breaker(key).Status().Counters.Throttled == 0; i++ {
			require.Less(t, i, 1000, "%s never throttled", key)
			_ = f.Call(key, errBoom)
		}
	}
	f.Refused(pricing, 1)      // a second
	f.Calls(payment, 1, nil)   // admitted, counted as a would-be refusal
	f.Calls(inventory, 1, nil) // does not throttle
	require.Equal(t, breaker.Closed, f.Breaker(pricing).State())

	// The probability is a fraction of 2^32, the one Status reports: read,
	// then compared.
	var p6, p7 float64
	for _, mt := range f.collect().Metrics {
		if mt.Name != "breaker.throttle.probability" {
			continue
		}
		for _, p := range mt.Data.(metricdata.Gauge[float64]).DataPoints {
			_, ok := p.Attributes.Value(KeyIncarnation)
			require.True(t, ok, "breaker.incarnation on every point")
			switch name, _ := p.Attributes.Value(KeyName); name.AsString() {
			case pricing:
				p6 = p.Value
			case payment:
				p7 = p.Value
			}
		}
	}
	assert.Equal(t, f.Breaker(pricing).Status().ThrottleProbability, p6)
	assert.Equal(t, f.Breaker(payment).Status().ThrottleProbability, p7)
	assert.Greater(t, p6, 0.5)
	assert.Greater(t, p7, 0.5)
	f.expect([]metricdata.Metrics{
		counter("breaker.rejected", point[int64](0, inventory), point[int64](0, payment), point[int64](2, pricing)),
		counter("breaker.shadow_rejected", point[int64](0, inventory), point[int64](2, payment), point[int64](0, pricing)),
		counter("breaker.throttled", point[int64](0, inventory), point[int64](2, payment), point[int64](2, pricing)),
		gauge("breaker.throttle.probability", point(0.0, inventory), point(p7, payment), point(p6, pricing)),
	}, true)

	f.At(20 * time.Second) // the window has emptied
	f.expect([]metricdata.Metrics{
		counter("breaker.throttled", point[int64](0, inventory), point[int64](2, payment), point[int64](2, pricing)),
		gauge("breaker.throttle.probability", point(0.0, inventory), point(0.0, payment), point(0.0, pricing)),
	}, true)
}
