// Package breakerotel reports the breakers of a [breaker.Group] through the
// OpenTelemetry metrics API.
//
// [Register] creates asynchronous instruments whose one callback reads the
// group at each collection, so nothing is added to the call path: the
// breakers already keep the counts, transitions included
// ([breaker.Breaker.Transitions]). Nothing is counted as it happens, so
// instruments registered late still report every transition the breakers
// have made.
//
//	m, err := breakerotel.Register(group, otel.GetMeterProvider())
//	if err != nil {
//		return err
//	}
//	defer m.Unregister()
//
// The instruments, each with the attributes breaker.name (the breaker's
// key) and breaker.incarnation (see below), and the attributes shown:
//
//	name                        kind           unit          attributes
//	breaker.state               UpDownCounter  {breaker}     breaker.state: 1 for the current state, 0 for the others
//	breaker.transitions         Counter        {transition}  breaker.transition.from, .to, .reason
//	breaker.calls               Counter        {call}        breaker.outcome: success, failure, timeout, ignored
//	breaker.slow_calls          Counter        {call}
//	breaker.rejected            Counter        {call}
//	breaker.shadow_rejected     Counter        {call}
//	breaker.throttled           Counter        {call}        (refused by the policy's throttle; within rejected, or shadow_rejected in shadow mode)
//	breaker.throttle.probability Gauge         1             (the throttle's refusal probability now; 0 while it refuses nothing)
//	breaker.fallbacks           Counter        {call}
//	breaker.probes              Counter        {probe}       breaker.probe.result: passed, failed
//	breaker.not_closed.time     Counter        s             (time open or half-open, current outage included)
//	breaker.open.duration       Gauge          s             (length of the outage in progress, its closes included; 0 when none)
//	breaker.window.calls        UpDownCounter  {call}        (counted calls in the sliding window)
//	breaker.window.error_ratio  Gauge          1             (failures/counted in the window)
//	breaker.window.slow_calls   UpDownCounter  {call}        (counted calls in the window slower than slow_call)
//	breaker.window.slow_ratio   Gauge          1             (slow/counted in the window)
//	breaker.policy.slow_ratio   Gauge          1             (the policy's SlowRatio, the trip threshold of the line above; 0: rule off)
//	breaker.policy.slow_call    Gauge          s             (the policy's SlowCall)
//
// and, while an outage is in progress (from a trip until the breaker has
// stayed closed for the policy's MaxOpenFor, its closes and re-trips
// included; see [breaker.Outage]), these, none while there is none:
//
//	breaker.outage.trips        Gauge          {trip}        (trips from closed in it, the first included)
//	breaker.outage.probes.failed Gauge         {probe}       (failed probes in it, timeouts included)
//	breaker.outage.probes.passed Gauge         {probe}       (passed probes in it)
//	breaker.outage.probes.passed_on_error Gauge {probe}      (passed probes that answered with an error: StrictProbes off)
//	breaker.outage.refused      Gauge          {call}        (calls refused with ErrOpen in it)
//	breaker.trip                UpDownCounter  {breaker}     breaker.trip.reason: 1, with the rule of the trip that began it
//	breaker.trip.window.calls   Gauge          {call}        (counted calls in the window that trip judged)
//	breaker.trip.window.failures Gauge         {call}        (failures, timeouts included, in that window)
//	breaker.trip.window.timeouts Gauge         {call}        (timeouts in that window)
//	breaker.trip.window.slow    Gauge          {call}        (calls slower than slow_call in that window)
//	breaker.trip.run            Gauge          {call}        (the run of consecutive failures at that trip)
//	breaker.trip.slow_call      Gauge          s             (the policy's SlowCall at that trip)
//
// Every transition a breaker can make ([breaker.PossibleTransitions]) is
// reported from its creation, at 0 until it is made, so that a backend
// computing rates sees the first. The trip's instruments say why an
// outage began for as long as it lasts: a failed probe reopens the
// breaker for another reason, and the trip's rule and window are what
// an alert should lead with.
//
// and these, of the group as a whole, without breaker.name, so that an
// operator can confirm that a policy change is live: the first two from
// the group's label ([breaker.Group.PolicyLabel]), the others from the
// follower given with [WithFollower] (reloads at 0 without one):
//
//	breaker.policy.info         Gauge          1             1, with breaker.policy.origin and .version of the document in force
//	breaker.policy.applied_at   Gauge          s             when it was applied, in Unix seconds
//	breaker.policy.reloads      Counter        {document}    breaker.policy.result: applied, rejected, gone, unreadable, unchanged
//	breaker.policy.last_reload  Gauge          1             1, with breaker.policy.result and .version of the last document delivered
//	breaker.policy.source_down  Gauge          1             1, with breaker.policy.origin, while the source is gone or unreadable
//	breaker.policy.rejected     Gauge          1             1, with breaker.policy.origin and .version, while a refused document stands
//
// and these, of the group as a whole too, for its cap on breakers and its
// idle eviction (see [breaker.GroupConfig.MaxBreakers] and
// [breaker.GroupConfig.IdleAfter]):
//
//	breaker.group.breakers        UpDownCounter  {breaker}  breakers the group holds
//	breaker.group.max_breakers    Gauge          {breaker}  the most it holds
//	breaker.group.overflow_calls  Counter        {call}     calls for keys with no breaker while it was full
//	breaker.group.evicted         Counter        {breaker}  breaker.state: the state each breaker dropped as idle was in
//
// A breaker that runs a candidate policy in shadow (see
// [breaker.GroupPolicy.Candidate]) adds these, with breaker.name:
//
//	breaker.candidate.state         UpDownCounter  {breaker}     breaker.state: 1 for the candidate's state, 0 for the others
//	breaker.candidate.transitions   Counter        {transition}  breaker.transition.from, .to, .reason
//	breaker.candidate.would_refuse  Counter        {call}        (admitted calls the candidate would have refused)
//	breaker.candidate.would_admit   Counter        {call}        (refused calls the candidate would have admitted)
//	breaker.candidate.differences   Counter        {difference}  (times the candidate and the policy in force parted)
//
// and, for a breaker that times its calls (a timeout, a slow-call rule or
// an adaptive timeout):
//
//	breaker.latency             Gauge          s             breaker.latency.quantile: 0.5, 0.9, 0.99, 0.999 over the window; none for an unknown one
//	breaker.latency.censored    Counter        {call}        (calls cut by a deadline, in the quantiles as lasting at least what they ran)
//	breaker.timeout             Gauge          s             (the deadline in force: the adaptive timeout's current value)
//
// The latency is reported as the breaker's own quantiles, gauges with a
// quantile attribute, rather than as a histogram: the OpenTelemetry API
// has no asynchronous histogram, and a synchronous one would put the SDK
// on every call, which this package exists not to do. The quantiles are
// the ones the adaptive timeout is computed from, over the breaker's
// window; for a fleet-wide latency distribution, record the client's
// calls in a histogram of its own instrumentation.
//
// All are observable. The state and the window's calls are UpDownCounters
// rather than gauges because they add up across breakers: the sum of
// breaker.state over breaker.name for breaker.state=open is the number of
// open breakers. Transitions are observed too, from the breakers' own
// counts, rather than added to a synchronous counter: a synchronous
// counter's series live as long as the meter provider, so per-target keys
// that come and go would fill the SDK's cardinality limit (2000 series an
// instrument by default) and outlive the breakers they describe.
//
// # Incarnations
//
// A group drops breakers (idle ones, see
// [breaker.GroupConfig.IdleAfter], and removed ones), and a key used
// again gets a new breaker whose counts start from zero. Reported under
// the same attributes, its counters would go backwards: a negative delta
// with delta temporality, and with cumulative temporality a count that
// falls under the same start time, which the OpenTelemetry data model
// does not allow, and the API gives an observable counter no way to start
// a series anew. So every series of a breaker carries
// breaker.incarnation, a number the [Metrics] gives each breaker the
// first time it reports it, never given twice: a new breaker for a key is
// a new series, which starts from zero, and the series of the dropped
// breaker ends. Numbers are given in the order of the keys to the
// breakers a collection finds new, from 1 at registration, and are
// forgotten with their breakers, so the Metrics holds nothing for a key
// the group no longer has. Aggregate over breaker.incarnation (sum by
// breaker.name) for a key's totals; a restart numbers its breakers anew,
// as it starts every count anew.
package breakerotel

import (
	"time"

	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/live"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the meter the instruments are
// created with: the import path, as OpenTelemetry recommends.
const ScopeName = "github.com/govkit/breaker/breakerotel"

// Attribute keys.
const (
	KeyName             = attribute.Key("breaker.name")
	KeyIncarnation      = attribute.Key("breaker.incarnation")
	KeyState            = attribute.Key("breaker.state")
	KeyOutcome          = attribute.Key("breaker.outcome")
	KeyProbeResult      = attribute.Key("breaker.probe.result")
	KeyTransitionFrom   = attribute.Key("breaker.transition.from")
	KeyTransitionTo     = attribute.Key("breaker.transition.to")
	KeyTransitionReason = attribute.Key("breaker.transition.reason")
	KeyPolicyOrigin     = attribute.Key("breaker.policy.origin")
	KeyPolicyVersion    = attribute.Key("breaker.policy.version")
	KeyPolicyResult     = attribute.Key("breaker.policy.result")
	KeyLatencyQuantile  = attribute.Key("breaker.latency.quantile")
	KeyTripReason       = attribute.Key("breaker.trip.reason")
)

// Option configures [Register].
type Option func(*config)

type config struct {
	attrs    []attribute.KeyValue
	follower *live.Follower
}

// WithAttributes adds attributes to every measurement, such as
// breaker.group=outbound when several groups report through one meter
// provider and may share keys.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, kv...) }
}

// WithFollower reports the reloads of f, the follower the group's policy
// comes from ([live.Follow]): breaker.policy.reloads and
// breaker.policy.last_reload. Without it the reloads stay at 0.
func WithFollower(f *live.Follower) Option {
	return func(c *config) { c.follower = f }
}

// Metrics is the registration of one group's instruments. Every
// measurement reflects the group as it is at the collection; a breaker the
// group has dropped (evicted as idle, or removed) stops being reported,
// and one created again under the same key is a new breaker whose counts,
// transitions included, start from zero, in series of their own (a new
// breaker.incarnation).
//
// Metrics is safe for concurrent use by multiple goroutines.
type Metrics struct {
	g     *breaker.Group
	f     *live.Follower // nil without WithFollower
	attrs []attribute.KeyValue
	reg   metric.Registration

	state, transitions, calls, slow, rejected, shadowRejected, throttled,
	fallbacks, probes, windowCalls, censored metric.Int64Observable
	notClosedTime, openDuration, windowRatio, latency, timeout, throttleProbability metric.Float64Observable

	trip, tripCalls, tripFailures, tripTimeouts, tripSlow, tripRun metric.Int64Observable
	tripSlowCall                                                   metric.Float64Observable

	outageTrips, outageProbesFailed, outageProbesPassed, outageOnError, outageRefused metric.Int64Observable

	windowSlow                                       metric.Int64Observable
	windowSlowRatio, policySlowRatio, policySlowCall metric.Float64Observable

	policySourceDown, policyRejected metric.Int64Observable

	policyInfo, policyReloads, policyLastReload metric.Int64Observable
	policyApplied                               metric.Float64Observable

	groupBreakers, groupMax, groupOverflow, groupEvicted metric.Int64Observable

	candState, candTransitions, candWouldRefuse, candWouldAdmit, candDiffs metric.Int64Observable

	// mu guards the incarnations: the number given to each breaker the
	// group holds, and the collection that last saw it. A collection may
	// run for each reader of the provider, concurrently.
	mu      sync.Mutex
	inc     map[*breaker.Breaker]incarnation
	lastInc int64
	round   uint64
}

type incarnation struct {
	n     int64
	round uint64
}

// Register creates the instruments on a meter of mp named [ScopeName],
// and registers a callback that reads g at each collection. Call
// [Metrics.Unregister] to stop it.
func Register(g *breaker.Group, mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if g == nil || mp == nil {
		return nil, errors.New("breakerotel: nil group or meter provider")
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{g: g, f: cfg.follower, attrs: cfg.attrs, inc: map[*breaker.Breaker]incarnation{}}

	// Errors are gathered rather than returned at the first, so that one
	// report names every instrument the provider refused. The curried
	// form lets each constructor's two results go straight in.
	var errs []error
	i64 := func(dst *metric.Int64Observable) func(metric.Int64Observable, error) {
		return func(inst metric.Int64Observable, err error) { *dst, errs = inst, append(errs, err) }
	}
	f64 := func(dst *metric.Float64Observable) func(metric.Float64Observable, error) {
		return func(inst metric.Float64Observable, err error) { *dst, errs = inst, append(errs, err) }
	}
	desc, unit := metric.WithDescription, metric.WithUnit
	i64(&m.state)(meter.Int64ObservableUpDownCounter("breaker.state",
		desc("Current state of the breaker: 1 for the state it is in, 0 for the others."), unit("{breaker}")))
	i64(&m.transitions)(meter.Int64ObservableCounter("breaker.transitions",
		desc("State transitions of the breaker, by the rule or event that caused them."), unit("{transition}")))
	i64(&m.calls)(meter.Int64ObservableCounter("breaker.calls",
		desc("Admitted calls that have returned, by outcome; probes included."), unit("{call}")))
	i64(&m.slow)(meter.Int64ObservableCounter("breaker.slow_calls",
		desc("Closed-state calls slower than the policy's slow_call."), unit("{call}")))
	i64(&m.rejected)(meter.Int64ObservableCounter("breaker.rejected",
		desc("Calls refused without calling the downstream."), unit("{call}")))
	i64(&m.shadowRejected)(meter.Int64ObservableCounter("breaker.shadow_rejected",
		desc("Calls a shadow breaker admitted but would have refused."), unit("{call}")))
	i64(&m.throttled)(meter.Int64ObservableCounter("breaker.throttled",
		desc("Calls the policy's throttle refused while the breaker was closed; a subset of breaker.rejected, or of breaker.shadow_rejected for a shadow breaker, which admits them."), unit("{call}")))
	f64(&m.throttleProbability)(meter.Float64ObservableGauge("breaker.throttle.probability",
		desc("Probability with which the policy's throttle refuses the breaker's next call; 0 while it throttles nothing, and for a breaker that does not throttle."), unit("1")))
	i64(&m.fallbacks)(meter.Int64ObservableCounter("breaker.fallbacks",
		desc("Results served by a fallback instead of the downstream."), unit("{call}")))
	i64(&m.probes)(meter.Int64ObservableCounter("breaker.probes",
		desc("Half-open probe verdicts."), unit("{probe}")))
	f64(&m.notClosedTime)(meter.Float64ObservableCounter("breaker.not_closed.time",
		desc("Time the breaker has spent open or half-open, the current outage included."), unit("s")))
	f64(&m.openDuration)(meter.Float64ObservableGauge("breaker.open.duration",
		desc("Length of the outage in progress: from the trip that began it, its closes and re-trips included, until the breaker has stayed closed for the policy's max_open_for; 0 while there is none."), unit("s")))
	i64(&m.windowCalls)(meter.Int64ObservableUpDownCounter("breaker.window.calls",
		desc("Counted calls (successes, failures and timeouts) in the sliding window."), unit("{call}")))
	f64(&m.windowRatio)(meter.Float64ObservableGauge("breaker.window.error_ratio",
		desc("Failures divided by counted calls in the sliding window; 0 when it is empty."), unit("1")))
	i64(&m.outageTrips)(meter.Int64ObservableGauge("breaker.outage.trips",
		desc("Trips from closed in the outage in progress, the first included; not reported while there is none."), unit("{trip}")))
	i64(&m.outageProbesFailed)(meter.Int64ObservableGauge("breaker.outage.probes.failed",
		desc("Half-open probes that failed, timeouts included, in the outage in progress; not reported while there is none."), unit("{probe}")))
	i64(&m.outageProbesPassed)(meter.Int64ObservableGauge("breaker.outage.probes.passed",
		desc("Half-open probes that passed in the outage in progress; not reported while there is none."), unit("{probe}")))
	i64(&m.outageOnError)(meter.Int64ObservableGauge("breaker.outage.probes.passed_on_error",
		desc("Half-open probes in the outage in progress that answered with an error and passed, as they do while the policy's strict_probes is off; not reported while there is none."), unit("{probe}")))
	i64(&m.outageRefused)(meter.Int64ObservableGauge("breaker.outage.refused",
		desc("Calls refused with ErrOpen in the outage in progress; not reported while there is none."), unit("{call}")))
	i64(&m.windowSlow)(meter.Int64ObservableUpDownCounter("breaker.window.slow_calls",
		desc("Counted calls in the sliding window slower than the policy's slow_call; 0 while that rule is off."), unit("{call}")))
	f64(&m.windowSlowRatio)(meter.Float64ObservableGauge("breaker.window.slow_ratio",
		desc("Slow calls divided by counted calls in the sliding window; 0 when it is empty."), unit("1")))
	f64(&m.policySlowRatio)(meter.Float64ObservableGauge("breaker.policy.slow_ratio",
		desc("The policy's slow ratio: the breaker trips when the window's slow ratio reaches it; 0 when that rule is off."), unit("1")))
	f64(&m.policySlowCall)(meter.Float64ObservableGauge("breaker.policy.slow_call",
		desc("The policy's slow_call: a call slower than it counts as slow; 0 when the slow rule is off."), unit("s")))
	i64(&m.trip)(meter.Int64ObservableUpDownCounter("breaker.trip",
		desc("1 while an outage is in progress, with the rule of the trip that began it, which failed probes and re-trips do not change."), unit("{breaker}")))
	i64(&m.tripCalls)(meter.Int64ObservableGauge("breaker.trip.window.calls",
		desc("Counted calls in the sliding window that the rule judged at the trip that began the outage in progress."), unit("{call}")))
	i64(&m.tripFailures)(meter.Int64ObservableGauge("breaker.trip.window.failures",
		desc("Failures, timeouts included, in the window of the trip that began the outage in progress."), unit("{call}")))
	i64(&m.tripTimeouts)(meter.Int64ObservableGauge("breaker.trip.window.timeouts",
		desc("Timeouts in the window of the trip that began the outage in progress."), unit("{call}")))
	i64(&m.tripSlow)(meter.Int64ObservableGauge("breaker.trip.window.slow",
		desc("Calls slower than the policy's slow_call in the window of the trip that began the outage in progress."), unit("{call}")))
	i64(&m.tripRun)(meter.Int64ObservableGauge("breaker.trip.run",
		desc("Consecutive failures at the trip that began the outage in progress, counted while the policy's consecutive_failures is set (0 otherwise)."), unit("{call}")))
	f64(&m.tripSlowCall)(meter.Float64ObservableGauge("breaker.trip.slow_call",
		desc("The policy's slow_call at the trip that began the outage in progress, what breaker.trip.window.slow counts calls slower than; 0 if the slow rule was off."), unit("s")))
	i64(&m.policyInfo)(meter.Int64ObservableGauge("breaker.policy.info",
		desc("The policy document in force: 1, with its origin and version (empty for a policy set by code)."), unit("1")))
	f64(&m.policyApplied)(meter.Float64ObservableGauge("breaker.policy.applied_at",
		desc("When the policy document in force was applied, in Unix seconds on the group's clock."), unit("s")))
	i64(&m.policyReloads)(meter.Int64ObservableCounter("breaker.policy.reloads",
		desc("Policy documents a followed source delivered, by what became of them."), unit("{document}")))
	i64(&m.groupBreakers)(meter.Int64ObservableUpDownCounter("breaker.group.breakers",
		desc("Breakers the group holds."), unit("{breaker}")))
	i64(&m.groupMax)(meter.Int64ObservableGauge("breaker.group.max_breakers",
		desc("The most breakers the group holds; calls for further keys run through its overflow breaker."), unit("{breaker}")))
	i64(&m.groupOverflow)(meter.Int64ObservableCounter("breaker.group.overflow_calls",
		desc("Calls for keys that had no breaker while the group was full, run through its overflow breaker."), unit("{call}")))
	i64(&m.groupEvicted)(meter.Int64ObservableCounter("breaker.group.evicted",
		desc("Breakers dropped as idle, by the state they were in."), unit("{breaker}")))
	i64(&m.policyLastReload)(meter.Int64ObservableGauge("breaker.policy.last_reload",
		desc("The last document a followed source delivered: 1, with what became of it and its version."), unit("1")))
	i64(&m.policySourceDown)(meter.Int64ObservableGauge("breaker.policy.source_down",
		desc("1 while the followed source is gone or unreadable and has delivered nothing readable since, with its origin; not reported while it delivers. The version in force keeps running."), unit("1")))
	i64(&m.policyRejected)(meter.Int64ObservableGauge("breaker.policy.rejected",
		desc("1 while the last document refused has not been followed by a valid one, with its origin and version; a gone or unreadable source does not end it."), unit("1")))
	i64(&m.candState)(meter.Int64ObservableUpDownCounter("breaker.candidate.state",
		desc("State of the breaker's candidate policy, run in shadow: 1 for the state it is in, 0 for the others."), unit("{breaker}")))
	i64(&m.candTransitions)(meter.Int64ObservableCounter("breaker.candidate.transitions",
		desc("State transitions of the breaker's candidate policy, by the rule or event that caused them."), unit("{transition}")))
	i64(&m.candWouldRefuse)(meter.Int64ObservableCounter("breaker.candidate.would_refuse",
		desc("Calls the breaker admitted that its candidate policy would have refused."), unit("{call}")))
	i64(&m.candWouldAdmit)(meter.Int64ObservableCounter("breaker.candidate.would_admit",
		desc("Calls the breaker refused that its candidate policy would have admitted."), unit("{call}")))
	i64(&m.candDiffs)(meter.Int64ObservableCounter("breaker.candidate.differences",
		desc("Times the breaker's candidate policy and its policy in force came to differ in state."), unit("{difference}")))
	f64(&m.latency)(meter.Float64ObservableGauge("breaker.latency",
		desc("Latency of the calls, by quantile over the sliding window, the calls cut by a deadline counted as lasting at least what they ran; a quantile is not reported while it is unknown."), unit("s")))
	i64(&m.censored)(meter.Int64ObservableCounter("breaker.latency.censored",
		desc("Calls cut by a deadline, which the quantiles count as lasting at least what they ran."), unit("{call}")))
	f64(&m.timeout)(meter.Float64ObservableGauge("breaker.timeout",
		desc("The deadline the breaker gives calls now: the policy's timeout, or the adaptive timeout in force; 0 for none."), unit("s")))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	reg, err := meter.RegisterCallback(m.observe,
		m.state, m.transitions, m.calls, m.slow, m.rejected, m.shadowRejected,
		m.throttled, m.throttleProbability,
		m.fallbacks, m.probes, m.notClosedTime, m.openDuration, m.windowCalls, m.windowRatio,
		m.trip, m.tripCalls, m.tripFailures, m.tripTimeouts, m.tripSlow, m.tripRun, m.tripSlowCall,
		m.outageTrips, m.outageProbesFailed, m.outageProbesPassed, m.outageOnError, m.outageRefused,
		m.windowSlow, m.windowSlowRatio, m.policySlowRatio, m.policySlowCall,
		m.policyInfo, m.policyApplied, m.policyReloads, m.policyLastReload, m.policySourceDown, m.policyRejected,
		m.groupBreakers, m.groupMax, m.groupOverflow, m.groupEvicted,
		m.candState, m.candTransitions, m.candWouldRefuse, m.candWouldAdmit, m.candDiffs,
		m.latency, m.censored, m.timeout)
	if err != nil {
		return nil, err
	}
	m.reg = reg
	return m, nil
}

// Unregister removes the callback: the instruments report nothing more
// for this group. It is safe to call more than once.
func (m *Metrics) Unregister() error {
	err := m.reg.Unregister()
	m.mu.Lock()
	clear(m.inc) // keeps no breaker alive
	m.mu.Unlock()
	return err
}

var states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen}

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	type breakerMetrics struct {
		b           *breaker.Breaker
		status      breaker.Status
		transitions []breaker.TransitionCount
		cand        *candidate.Status
		inc         int64
	}
	// Read under Range, observed after it, so the group is not held while
	// the SDK aggregates.
	var all []breakerMetrics
	m.g.Range(func(_ string, b *breaker.Breaker) bool {
		// Status first: it notices an ended cooldown, and the transition
		// it makes belongs in the counts read next.
		bm := breakerMetrics{b: b, status: b.Status(), transitions: b.Transitions()}
		if cs, ok := candidate.Of(b); ok {
			bm.cand = &cs
		}
		all = append(all, bm)
		return true
	})
	m.incarnations(len(all), func(i int) *breaker.Breaker { return all[i].b }, func(i int, n int64) { all[i].inc = n })
	m.observePolicy(o, m.g.PolicyLabel())
	m.observeGroup(o, m.g.Status())
	for _, bm := range all {
		if bm.inc == 0 {
			continue // dropped since it was read
		}
		id := breakerID{bm.status.Name, bm.inc}
		m.observeStatus(o, id, bm.status)
		if cs := bm.cand; cs != nil {
			m.observeCandidate(o, id, cs)
		}
		for _, t := range withUnmade(bm.transitions) {
			o.ObserveInt64(m.transitions, toInt64(t.Count), m.with(id,
				KeyTransitionFrom.String(t.From.String()),
				KeyTransitionTo.String(t.To.String()),
				KeyTransitionReason.String(string(t.Reason))))
		}
	}
	return nil
}

// possibleTransitions is every transition a breaker can make.
var possibleTransitions = breaker.PossibleTransitions()

// withUnmade returns a breaker's transition counts with every possible
// transition it has not made yet at 0, so that the first one made shows
// as an increase.
func withUnmade(made []breaker.TransitionCount) []breaker.TransitionCount {
	out := append(make([]breaker.TransitionCount, 0, len(possibleTransitions)+len(made)), possibleTransitions...)
	for _, t := range made {
		i := slices.IndexFunc(out, func(o breaker.TransitionCount) bool {
			return o.From == t.From && o.To == t.To && o.Reason == t.Reason
		})
		if i < 0 {
			out = append(out, t)
		} else {
			out[i].Count = t.Count
		}
	}
	return out
}

// incarnations sets the incarnation of each of the n breakers a
// collection read (b(i) is the i-th): the number it was given, or a new
// one, in the order of their names, for a breaker reported for the first
// time. A breaker dropped since it was read gets none (0), and is not
// reported: a collection running concurrently may already have forgotten
// it, and numbering it anew would report its counts twice. Breakers the
// group no longer holds are forgotten.
func (m *Metrics) incarnations(n int, b func(int) *breaker.Breaker, set func(int, int64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.round++
	var fresh []int
	for i := range n {
		br := b(i)
		if e, ok := m.inc[br]; ok {
			m.inc[br] = incarnation{e.n, m.round}
			set(i, e.n)
		} else {
			fresh = append(fresh, i)
		}
	}
	slices.SortFunc(fresh, func(i, j int) int { return strings.Compare(b(i).Name(), b(j).Name()) })
	for _, i := range fresh {
		br := b(i)
		if !m.holds(br) {
			continue
		}
		m.lastInc++
		m.inc[br] = incarnation{m.lastInc, m.round}
		set(i, m.lastInc)
	}
	for br, e := range m.inc {
		if e.round != m.round && !m.holds(br) {
			delete(m.inc, br)
		}
	}
}

// holds reports whether b is the group's breaker for its key.
func (m *Metrics) holds(b *breaker.Breaker) bool {
	cur, ok := m.g.Lookup(b.Name())
	return ok && cur == b
}

// breakerID is what tells a breaker's series apart: its key and its
// incarnation.
type breakerID struct {
	name string
	inc  int64
}

// with builds the measurement's attribute set: the breaker's name and
// incarnation, kv and the attributes of WithAttributes.
func (m *Metrics) with(id breakerID, kv ...attribute.KeyValue) metric.MeasurementOption {
	all := make([]attribute.KeyValue, 0, 2+len(kv)+len(m.attrs))
	all = append(all, KeyName.String(id.name), KeyIncarnation.Int64(id.inc))
	all = append(all, kv...)
	all = append(all, m.attrs...)
	return metric.WithAttributeSet(attribute.NewSet(all...))
}

func toInt64(v uint64) int64 {
	// A counter past 2^63 would take centuries of calls; saturate rather
	// than report a negative count.
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

func (m *Metrics) observeStatus(o metric.Observer, n breakerID, s breaker.Status) {
	for _, st := range states {
		var v int64
		if s.State == st {
			v = 1
		}
		o.ObserveInt64(m.state, v, m.with(n, KeyState.String(st.String())))
	}
	k := s.Counters
	o.ObserveInt64(m.calls, toInt64(k.Successes), m.with(n, KeyOutcome.String("success")))
	o.ObserveInt64(m.calls, toInt64(k.Failures), m.with(n, KeyOutcome.String("failure")))
	o.ObserveInt64(m.calls, toInt64(k.Timeouts), m.with(n, KeyOutcome.String("timeout")))
	o.ObserveInt64(m.calls, toInt64(k.Ignored), m.with(n, KeyOutcome.String("ignored")))
	o.ObserveInt64(m.slow, toInt64(k.Slow), m.with(n))
	o.ObserveInt64(m.rejected, toInt64(k.Rejected), m.with(n))
	o.ObserveInt64(m.shadowRejected, toInt64(k.ShadowRejected), m.with(n))
	o.ObserveInt64(m.throttled, toInt64(k.Throttled), m.with(n))
	o.ObserveInt64(m.fallbacks, toInt64(k.Fallbacks), m.with(n))
	o.ObserveInt64(m.probes, toInt64(k.ProbesPassed), m.with(n, KeyProbeResult.String("passed")))
	o.ObserveInt64(m.probes, toInt64(k.ProbesFailed), m.with(n, KeyProbeResult.String("failed")))
	o.ObserveFloat64(m.notClosedTime, k.OpenTime.Seconds(), m.with(n))

	// The outage's length is measured on the group's clock, the one its
	// start was read from; time.Now would disagree under a mock or a
	// skewed clock. It runs on through the outage's closes until it settles.
	var outageFor time.Duration
	if s.Outage != nil {
		outageFor = s.Outage.Duration
	}
	o.ObserveFloat64(m.openDuration, outageFor.Seconds(), m.with(n))
	o.ObserveInt64(m.windowCalls, toInt64(s.Window.Counted), m.with(n))
	o.ObserveFloat64(m.windowRatio, s.ErrorRatio, m.with(n))
	o.ObserveFloat64(m.throttleProbability, s.ThrottleProbability, m.with(n))
	o.ObserveInt64(m.windowSlow, toInt64(s.Window.Slow), m.with(n))
	o.ObserveFloat64(m.windowSlowRatio, s.Window.SlowRatio(), m.with(n))
	o.ObserveFloat64(m.policySlowRatio, s.Policy.SlowRatio, m.with(n))
	o.ObserveFloat64(m.policySlowCall, s.Policy.SlowCall.Seconds(), m.with(n))
	// The outage in progress and why it began, for as long as it lasts,
	// closes and re-trips included; nothing while there is none, so that
	// a count never stands for an earlier outage's, nor an earlier
	// process's.
	if out := s.Outage; out != nil {
		t := out.Trip
		if t.Reason != "" {
			o.ObserveInt64(m.trip, 1, m.with(n, KeyTripReason.String(string(t.Reason))))
		}
		o.ObserveInt64(m.tripCalls, toInt64(t.Window.Counted), m.with(n))
		o.ObserveInt64(m.tripFailures, toInt64(t.Window.Failures), m.with(n))
		o.ObserveInt64(m.tripTimeouts, toInt64(t.Window.Timeouts), m.with(n))
		o.ObserveInt64(m.tripSlow, toInt64(t.Window.Slow), m.with(n))
		o.ObserveInt64(m.tripRun, toInt64(t.Run), m.with(n))
		o.ObserveFloat64(m.tripSlowCall, t.SlowCall.Seconds(), m.with(n))
		o.ObserveInt64(m.outageTrips, int64(out.Trips), m.with(n))
		o.ObserveInt64(m.outageProbesFailed, int64(out.Reopens), m.with(n)) // probe timeouts included
		o.ObserveInt64(m.outageProbesPassed, int64(out.ProbesPassed), m.with(n))
		o.ObserveInt64(m.outageOnError, int64(out.ProbesPassedOnError), m.with(n))
		o.ObserveInt64(m.outageRefused, toInt64(out.Refused), m.with(n))
	}

	if l := s.Latency; l != nil {
		// A quantile that is unknown (Latency reports 0: in a timeout
		// outage every call is cut by the deadline) is not reported, so
		// that a panel shows a gap rather than a latency of 0.
		for _, q := range []struct {
			q float64
			v time.Duration
		}{{0.5, l.P50}, {0.9, l.P90}, {0.99, l.P99}, {0.999, l.P999}} {
			if q.v > 0 {
				o.ObserveFloat64(m.latency, q.v.Seconds(), m.with(n, KeyLatencyQuantile.Float64(q.q)))
			}
		}
		o.ObserveInt64(m.censored, toInt64(l.CensoredTotal), m.with(n))
		o.ObserveFloat64(m.timeout, l.Timeout.Seconds(), m.with(n))
	}
}

// group builds the attribute set of a group-wide measurement: kv and the
// attributes of WithAttributes.
func (m *Metrics) group(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue{}, kv...), m.attrs...)...))
}

func (m *Metrics) observePolicy(o metric.Observer, label breaker.PolicyLabel) {
	o.ObserveInt64(m.policyInfo, 1, m.group(KeyPolicyOrigin.String(label.Origin), KeyPolicyVersion.String(label.Version)))
	o.ObserveFloat64(m.policyApplied, float64(label.AppliedAt.UnixNano())/1e9, m.group())
	var ps live.Status
	if m.f != nil {
		ps = m.f.Status()
	}
	r := ps.Reloads
	o.ObserveInt64(m.policyReloads, toInt64(r.Applied), m.group(KeyPolicyResult.String("applied")))
	o.ObserveInt64(m.policyReloads, toInt64(r.Rejected), m.group(KeyPolicyResult.String("rejected")))
	o.ObserveInt64(m.policyReloads, toInt64(r.Gone), m.group(KeyPolicyResult.String("gone")))
	o.ObserveInt64(m.policyReloads, toInt64(r.Unreadable), m.group(KeyPolicyResult.String("unreadable")))
	o.ObserveInt64(m.policyReloads, toInt64(r.Unchanged), m.group(KeyPolicyResult.String("unchanged")))
	if l := ps.Last; l != nil {
		o.ObserveInt64(m.policyLastReload, 1, m.group(KeyPolicyResult.String(l.Result.String()), KeyPolicyVersion.String(l.Version)))
	}
	if d := ps.Down; d != nil {
		o.ObserveInt64(m.policySourceDown, 1, m.group(KeyPolicyOrigin.String(d.Origin)))
	}
	if r := ps.Rejected; r != nil {
		o.ObserveInt64(m.policyRejected, 1, m.group(KeyPolicyOrigin.String(r.Origin), KeyPolicyVersion.String(r.Version)))
	}
}

func (m *Metrics) observeGroup(o metric.Observer, gs breaker.GroupStatus) {
	o.ObserveInt64(m.groupBreakers, int64(gs.Breakers), m.group())
	o.ObserveInt64(m.groupMax, int64(gs.MaxBreakers), m.group())
	o.ObserveInt64(m.groupOverflow, toInt64(gs.OverflowCalls), m.group())
	e := gs.Evicted
	o.ObserveInt64(m.groupEvicted, toInt64(e.Closed), m.group(KeyState.String(breaker.Closed.String())))
	o.ObserveInt64(m.groupEvicted, toInt64(e.Open), m.group(KeyState.String(breaker.Open.String())))
	o.ObserveInt64(m.groupEvicted, toInt64(e.HalfOpen), m.group(KeyState.String(breaker.HalfOpen.String())))
}

func (m *Metrics) observeCandidate(o metric.Observer, n breakerID, cs *candidate.Status) {
	for _, st := range states {
		var v int64
		if cs.State == st {
			v = 1
		}
		o.ObserveInt64(m.candState, v, m.with(n, KeyState.String(st.String())))
	}
	for _, t := range cs.Transitions {
		o.ObserveInt64(m.candTransitions, toInt64(t.Count), m.with(n,
			KeyTransitionFrom.String(t.From.String()),
			KeyTransitionTo.String(t.To.String()),
			KeyTransitionReason.String(string(t.Reason))))
	}
	o.ObserveInt64(m.candWouldRefuse, toInt64(cs.WouldRefuse), m.with(n))
	o.ObserveInt64(m.candWouldAdmit, toInt64(cs.WouldAdmit), m.with(n))
	o.ObserveInt64(m.candDiffs, toInt64(cs.Differences), m.with(n))
}
