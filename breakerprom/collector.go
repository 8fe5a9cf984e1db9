// Package breakerprom exposes the breakers of a [breaker.Group] as
// Prometheus metrics.
//
// A [Collector] reads the group when it is scraped, so it adds nothing to
// the call path: the breakers already keep the counts, transitions
// included ([breaker.Breaker.Transitions]). Nothing is counted as it
// happens, so a collector created late still reports every transition the
// breakers have made. Register one collector per group:
//
//	reg.MustRegister(breakerprom.NewCollector(group))
//
// A group of thousands of breakers (one per target, say) is cheaper to
// serve through a [Handler]: it writes the very same exposition in the
// text format itself, without a message per series, and can add the
// families of the application's registry to the same response:
//
//	h, err := breakerprom.NewHandler(group, prometheus.DefaultGatherer)
//	mux.Handle("/metrics", h)
//
// A scrape of 10,000 breakers costs about 15 ms and 10 allocations
// through the handler, against a second and 6.6 million allocations
// through a registry, and the handler's cost grows in proportion to the
// group.
//
// With the default namespace the collector exposes these families, each
// with the label name (the breaker's key) and the labels shown:
//
//	breaker_state{state}                       gauge    1 for the current state, 0 for the others
//	breaker_transitions_total{from,to,reason}  counter
//	breaker_calls_total{outcome}               counter  success, failure, timeout, ignored
//	breaker_slow_calls_total                   counter
//	breaker_rejected_total                     counter
//	breaker_shadow_rejected_total              counter
//	breaker_throttled_total                    counter  refused by the policy's throttle; within rejected (shadow_rejected for a shadow breaker)
//	breaker_throttle_probability               gauge    the throttle's refusal probability now; 0 while it refuses nothing
//	breaker_fallbacks_total                    counter
//	breaker_probes_total{result}               counter  passed, failed
//	breaker_not_closed_seconds_total           counter  time open or half-open, current outage included
//	breaker_open_duration_seconds              gauge    length of the outage in progress, closes included; 0 when none
//	breaker_window_calls                       gauge    counted calls in the sliding window
//	breaker_window_error_ratio                 gauge    failures/counted in the window
//	breaker_policy_error_ratio                 gauge    the policy's ErrorRatio, the trip threshold of the line above (0: rule off)
//	breaker_window_slow_calls                  gauge    counted calls in the window slower than slow_call
//	breaker_window_slow_ratio                  gauge    slow/counted in the window
//	breaker_policy_slow_ratio                  gauge    the policy's SlowRatio, the trip threshold of the line above (0: rule off)
//	breaker_policy_slow_call_seconds           gauge    the policy's SlowCall
//	breaker_mode{mode}                         gauge    1 for the current mode, 0 for the others
//	breaker_open_reason{reason}                gauge    1 while open or half-open, with the reason; absent while closed
//
// and, while an outage is in progress ([breaker.Status.Outage]: from a
// trip until the breaker has stayed closed for the policy's MaxOpenFor,
// its closes and re-trips included), these, absent while there is none,
// so that no count stands for an earlier outage or an earlier process:
//
//	breaker_outage_trips                       gauge    trips from closed in it, the first included
//	breaker_outage_probes_failed               gauge    failed probes in it, timeouts included
//	breaker_outage_probes_passed               gauge    passed probes in it
//	breaker_outage_probes_passed_on_error      gauge    passed probes that answered with an error (StrictProbes off)
//	breaker_outage_refused                     gauge    calls refused with ErrOpen in it
//	breaker_trip_reason{reason}                gauge    1, with the rule of the trip that began it
//	breaker_trip_window_calls                  gauge    counted calls in the window that trip judged
//	breaker_trip_window_failures               gauge    failures, timeouts included, in that window
//	breaker_trip_window_timeouts               gauge    timeouts in that window
//	breaker_trip_window_slow                   gauge    calls slower than slow_call in that window
//	breaker_trip_run                           gauge    consecutive failures at that trip
//	breaker_trip_slow_call_seconds             gauge    the policy's SlowCall at that trip
//
// Every transition a breaker can make ([breaker.PossibleTransitions]) is
// a series from its creation, at 0 until it is made: a series that first
// appeared at 1 would show no increase, and rate, increase and changes
// would miss a breaker's first trip, and the first after each restart.
//
// The mode and the reasons let an alerting rule leave out breakers an
// operator forced open or runs in shadow, as
// [github.com/govkit/breaker/ops.Alerts] does, and say why a breaker
// opened: open_reason becomes probe_failed at the first failed probe,
// while trip_reason and the trip's window stay what they were at the trip
// for the whole outage, its closes and re-trips included. [AlertRules] writes such rules, and the module
// ships them, with a Grafana dashboard for these families, in its rules/
// and dashboards/ directories.
//
// These are of the group as a whole, without the label name, so that an
// operator can confirm that a policy change is live: the first two from
// the group's label ([breaker.Group.PolicyLabel]), the others from the
// follower given with [WithFollower] (reloads at 0 without one):
//
//	breaker_policy_info{origin,version}        gauge    1 for the policy document in force
//	breaker_policy_applied_timestamp_seconds   gauge    when it was applied, in Unix seconds
//	breaker_policy_reloads_total{result}       counter  documents delivered: applied, rejected, gone, unreadable, unchanged
//	breaker_policy_last_reload_info{result,version} gauge 1 for the last document delivered; absent until one is
//	breaker_policy_source_down{origin}         gauge    1 while the source is gone or unreadable; absent while it delivers
//	breaker_policy_rejected_info{origin,version} gauge  1 while a refused document stands (no valid one since); absent otherwise
//
// and these, of the group as a whole too, for its cap on breakers and its
// idle eviction (see [breaker.GroupConfig.MaxBreakers] and
// [breaker.GroupConfig.IdleAfter]):
//
//	breaker_group_breakers                     gauge    breakers the group holds
//	breaker_group_max_breakers                 gauge    the most it holds
//	breaker_group_overflow_calls_total         counter  calls for keys with no breaker while it was full
//	breaker_group_evicted_total{state}         counter  breakers dropped as idle, by the state they were in
//
// A breaker that runs a candidate policy in shadow (see
// [breaker.GroupPolicy.Candidate]) adds these, with the label name:
//
//	breaker_candidate_state{state}                       gauge    1 for the candidate's state, 0 for the others
//	breaker_candidate_transitions_total{from,to,reason}  counter
//	breaker_candidate_would_refuse_total                 counter  calls admitted that the candidate would have refused
//	breaker_candidate_would_admit_total                  counter  calls refused that the candidate would have admitted
//	breaker_candidate_differences_total                  counter  times the candidate and the policy in force parted
//
// A breaker that times its calls (a timeout, a slow-call rule or an
// adaptive timeout) adds these, with the label name:
//
//	breaker_latency_seconds{quantile}          summary  0.5, 0.9, 0.99, 0.999 over the window, each absent while unknown; _count and _sum since creation
//	breaker_latency_censored_total             counter  calls cut by a deadline, in the quantiles as lasting at least what they ran
//	breaker_timeout_seconds                    gauge    the deadline in force (the adaptive timeout's current value)
//
// The latency is a summary rather than a histogram because its quantiles
// are the breaker's own: the ones over its window that the adaptive
// timeout is computed from, which a dashboard should show as they are.
// A Prometheus histogram would need bucket bounds chosen in advance (a
// dozen series a breaker, per-target keys included) and would only
// estimate what the breaker already knows. Summaries do not aggregate
// across instances; a fleet-wide latency histogram belongs to the
// client's own instrumentation. _count and _sum are monotonic, so
// rate(_sum)/rate(_count) is the mean latency; _sum is estimated from the
// histogram's bins, within 3.1%.
package breakerprom

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/live"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultNamespace is the prefix of every metric name unless
// [WithNamespace] says otherwise.
const DefaultNamespace = "breaker"

// Option configures a [Collector].
type Option func(*config)

type config struct {
	namespace   string
	constLabels prometheus.Labels
	follower    *live.Follower
}

// WithNamespace replaces [DefaultNamespace] as the prefix of the metric
// names: WithNamespace("shop_breaker") gives shop_breaker_state and so on.
// An empty ns keeps the default, since names such as calls_total alone
// would say nothing about where they come from.
func WithNamespace(ns string) Option {
	return func(c *config) {
		if ns != "" {
			c.namespace = ns
		}
	}
}

// WithConstLabels adds labels with fixed values to every metric. Two
// collectors registered with one registry need them (group="outbound",
// say), or the registry refuses the second as a duplicate.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

// WithFollower reports the reloads of f, the follower the group's policy
// comes from ([live.Follow]): breaker_policy_reloads_total and
// breaker_policy_last_reload_info. Without it the reloads stay at 0.
func WithFollower(f *live.Follower) Option {
	return func(c *config) { c.follower = f }
}

// A Collector is a [prometheus.Collector] for the breakers of one group.
// Every metric reflects the group as it is at the scrape; a breaker the
// group has dropped (evicted as idle, or removed) disappears from the
// exposition, and a breaker created again under the same key is a new
// breaker whose counters, transitions included, start from zero, which
// Prometheus's rate functions read as a counter reset: the new breaker's
// counts are counted from zero. As after a process restart, what the
// dropped breaker counted after the last scrape is not seen (an idle
// breaker counted nothing), and a new breaker that has counted at least
// as much as the old one by the next scrape reads as growth, so increase
// undercounts by the old count.
//
// A Collector is safe for concurrent use by multiple goroutines.
type Collector struct {
	g *breaker.Group
	f *live.Follower // nil without WithFollower

	state, transitions, calls, slow, rejected, shadowRejected,
	throttled, throttleProbability,
	fallbacks, probes, notClosedTime, openDuration, windowCalls, windowRatio,
	policyRatio, mode, openReason *prometheus.Desc

	outageTrips, outageProbesFailed, outageProbesPassed, outageProbesPassedOnError, outageRefused *prometheus.Desc

	windowSlow, windowSlowRatio, policySlowRatio, policySlowCall *prometheus.Desc

	tripReason, tripCalls, tripFailures, tripTimeouts, tripSlow, tripRun, tripSlowCall *prometheus.Desc

	policyInfo, policyApplied, policyReloads, policyLastReload, policySourceDown, policyRejected *prometheus.Desc

	groupBreakers, groupMax, groupOverflow, groupEvicted *prometheus.Desc

	candState, candTransitions, candWouldRefuse, candWouldAdmit, candDiffs *prometheus.Desc

	latency, censored, timeout *prometheus.Desc
}

// NewCollector returns a collector for g. It holds no resources beyond
// its reference to g: unregister it from the registry to stop it.
func NewCollector(g *breaker.Group, opts ...Option) *Collector {
	cfg := config{namespace: DefaultNamespace}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	desc := func(f family) *prometheus.Desc {
		return prometheus.NewDesc(cfg.namespace+"_"+f.name, f.help, f.labels, cfg.constLabels)
	}
	c := &Collector{
		g:                   g,
		f:                   cfg.follower,
		state:               desc(famState),
		transitions:         desc(famTransitions),
		calls:               desc(famCalls),
		slow:                desc(famSlow),
		rejected:            desc(famRejected),
		shadowRejected:      desc(famShadowRejected),
		throttled:           desc(famThrottled),
		throttleProbability: desc(famThrottleProbability),
		fallbacks:           desc(famFallbacks),
		probes:              desc(famProbes),
		notClosedTime:       desc(famNotClosedTime),
		openDuration:        desc(famOpenDuration),
		windowCalls:         desc(famWindowCalls),
		windowRatio:         desc(famWindowRatio),
		policyRatio:         desc(famPolicyRatio),
		mode:                desc(famMode),
		openReason:          desc(famOpenReason),
		tripReason:          desc(famTripReason),
		tripCalls:           desc(famTripCalls),
		tripFailures:        desc(famTripFailures),
		tripTimeouts:        desc(famTripTimeouts),
		tripSlow:            desc(famTripSlow),
		tripRun:             desc(famTripRun),
		tripSlowCall:        desc(famTripSlowCall),

		outageTrips:               desc(famOutageTrips),
		outageProbesFailed:        desc(famOutageProbesFailed),
		outageProbesPassed:        desc(famOutageProbesPassed),
		outageProbesPassedOnError: desc(famOutageProbesPassedOnError),
		outageRefused:             desc(famOutageRefused),

		windowSlow:      desc(famWindowSlow),
		windowSlowRatio: desc(famWindowSlowRatio),
		policySlowRatio: desc(famPolicySlowRatio),
		policySlowCall:  desc(famPolicySlowCall),

		policySourceDown: desc(famPolicySourceDown),
		policyRejected:   desc(famPolicyRejected),
		policyInfo:       desc(famPolicyInfo),
		policyApplied:    desc(famPolicyApplied),
		policyReloads:    desc(famPolicyReloads),
		policyLastReload: desc(famPolicyLastReload),
		groupBreakers:    desc(famGroupBreakers),
		groupMax:         desc(famGroupMax),
		groupOverflow:    desc(famGroupOverflow),
		groupEvicted:     desc(famGroupEvicted),
		candState:        desc(famCandState),
		candTransitions:  desc(famCandTransitions),
		candWouldRefuse:  desc(famCandWouldRefuse),
		candWouldAdmit:   desc(famCandWouldAdmit),
		candDiffs:        desc(famCandDiffs),
		latency:          desc(famLatency),
		censored:         desc(famCensored),
		timeout:          desc(famTimeout),
	}
	return c
}

// Describe sends the descriptors of every metric the collector can
// produce. The set is fixed, so a registry can check it for conflicts at
// registration.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.state, c.transitions, c.calls, c.slow, c.rejected, c.shadowRejected,
		c.throttled, c.throttleProbability,
		c.fallbacks, c.probes, c.notClosedTime, c.openDuration, c.windowCalls, c.windowRatio,
		c.policyRatio, c.mode, c.openReason,
		c.outageTrips, c.outageProbesFailed, c.outageProbesPassed, c.outageProbesPassedOnError, c.outageRefused,
		c.windowSlow, c.windowSlowRatio, c.policySlowRatio, c.policySlowCall,
		c.tripReason, c.tripCalls, c.tripFailures, c.tripTimeouts, c.tripSlow, c.tripRun, c.tripSlowCall,
		c.policyInfo, c.policyApplied, c.policyReloads, c.policyLastReload, c.policySourceDown, c.policyRejected,
		c.groupBreakers, c.groupMax, c.groupOverflow, c.groupEvicted,
		c.candState, c.candTransitions, c.candWouldRefuse, c.candWouldAdmit, c.candDiffs,
		c.latency, c.censored, c.timeout,
	} {
		ch <- d
	}
}

var (
	states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen}
	modes  = [...]breaker.Mode{breaker.ModeAuto, breaker.ModeShadow, breaker.ModeForcedOpen, breaker.ModeForcedClosed}
)

// Collect sends the current metrics of every breaker in the group.
//
// The metrics go out in the order the registry sorts them into (by label
// values, in the order of the label names): breakers by name, and each
// breaker's metrics of one family by their other label. A registry sorts
// every family at every scrape, and sorting what is already in order is
// linear, where sorting the order of a sync.Map's Range was most of the
// time of a scrape of 10,000 breakers, and grew faster than their number.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type breakerMetrics struct {
		key         string // the group's key; status.Name is its label value
		status      breaker.Status
		transitions []breaker.TransitionCount
		cand        *candidate.Status
	}
	// Read under Range, sent after it: the registry reads ch while other
	// collectors run, and the group must not wait for a scrape.
	var all []breakerMetrics
	c.g.Range(func(_ string, b *breaker.Breaker) bool {
		// Status first: it notices an ended cooldown, and the transition
		// it makes belongs in the counts read next.
		m := breakerMetrics{status: b.Status(), transitions: b.Transitions()}
		if cs, ok := candidate.Of(b); ok {
			m.cand = &cs
		}
		all = append(all, m)
		return true
	})
	c.collectPolicy(ch, c.g.PolicyLabel(), followerStatus(c.f))
	c.collectGroup(ch, c.g.Status())
	for i := range all {
		all[i].key = all[i].status.Name
		all[i].status.Name = validLabelValue(all[i].status.Name)
	}
	slices.SortFunc(all, func(a, b breakerMetrics) int {
		return compareNames(a.status.Name, a.key, b.status.Name, b.key)
	})
	// Two breakers whose names write one label value would be one series
	// twice, and the registry would fail the whole scrape: the first
	// stands for both.
	all = slices.CompactFunc(all, func(a, b breakerMetrics) bool { return a.status.Name == b.status.Name })
	type transition struct {
		name string
		breaker.TransitionCount
	}
	var transitions []transition
	for _, m := range all {
		c.collectStatus(ch, m.status)
		if cs := m.cand; cs != nil {
			c.collectCandidate(ch, m.status.Name, cs)
		}
		for _, t := range withUnmade(m.transitions) {
			transitions = append(transitions, transition{m.status.Name, t})
		}
	}
	// The labels of this family sort as from, name, reason, to.
	key := func(t transition) [4]string {
		return [4]string{t.From.String(), t.name, string(t.Reason), t.To.String()}
	}
	slices.SortFunc(transitions, func(a, b transition) int {
		ka, kb := key(a), key(b)
		for i := range ka {
			if c := strings.Compare(ka[i], kb[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, t := range transitions {
		ch <- prometheus.MustNewConstMetric(c.transitions, prometheus.CounterValue, float64(t.Count),
			t.name, t.From.String(), t.To.String(), string(t.Reason))
	}
}

// withUnmade returns a breaker's transition counts with every possible
// transition it has not made yet at 0: a series that first appears at 1
// shows no increase to rate, increase or changes, so a breaker's first
// trip would be missed, and again after each restart.
func withUnmade(made []breaker.TransitionCount) []breaker.TransitionCount {
	out := make([]breaker.TransitionCount, 0, len(possibleTransitions)+len(made))
	out = append(out, possibleTransitions...)
	for _, t := range made {
		found := false
		for i := range out {
			if o := &out[i]; o.From == t.From && o.To == t.To && o.Reason == t.Reason {
				o.Count, found = t.Count, true
				break
			}
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

// validLabelValue returns s with each byte that is not part of valid
// UTF-8 written as \x and two hex digits. A registry refuses a label value
// that is not UTF-8, and fails the whole scrape for it; a key is any
// string the application chose, a request header's, say, and one bad key
// must not take every breaker off the dashboards. Hex keeps keys that
// differ only in such bytes apart, where U+FFFD for each made them one
// series, which a registry refuses too (a key that spells out another's escape is left: Collect exposes the first).
// The handler writes the same.
func validLabelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&15])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// compareNames orders breakers by the label value of their name and then,
// for names that write the same value (a key that is not UTF-8 beside
// one that spells out its escape), by the key itself: the first of them
// is the one exposed, by the collector and the handler alike.
func compareNames(name, key, name2, key2 string) int {
	if c := strings.Compare(name, name2); c != 0 {
		return c
	}
	return strings.Compare(key, key2)
}

// statesByName is every state, in the order of their names, as the
// registry sorts the state label.
var statesByName = func() []breaker.State {
	s := slices.Clone(states[:])
	slices.SortFunc(s, func(a, b breaker.State) int { return strings.Compare(a.String(), b.String()) })
	return s
}()

func (c *Collector) collectStatus(ch chan<- prometheus.Metric, s breaker.Status) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Name}, labels...)...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{s.Name}, labels...)...)
	}
	for _, st := range statesByName {
		v := 0.0
		if s.State == st {
			v = 1
		}
		gauge(c.state, v, st.String())
	}
	k := s.Counters
	// In the order of the outcome label's values.
	counter(c.calls, k.Failures, "failure")
	counter(c.calls, k.Ignored, "ignored")
	counter(c.calls, k.Successes, "success")
	counter(c.calls, k.Timeouts, "timeout")
	counter(c.slow, k.Slow)
	counter(c.rejected, k.Rejected)
	counter(c.shadowRejected, k.ShadowRejected)
	counter(c.throttled, k.Throttled)
	counter(c.fallbacks, k.Fallbacks)
	counter(c.probes, k.ProbesFailed, "failed")
	counter(c.probes, k.ProbesPassed, "passed")
	ch <- prometheus.MustNewConstMetric(c.notClosedTime, prometheus.CounterValue, k.OpenTime.Seconds(), s.Name)

	// The outage's length is measured on the group's clock, the one its
	// start was read from; time.Now would disagree under a mock or a
	// skewed clock.
	gauge(c.openDuration, outageSeconds(s))
	gauge(c.windowCalls, float64(s.Window.Counted))
	gauge(c.windowRatio, s.ErrorRatio)
	gauge(c.policyRatio, s.Policy.ErrorRatio)
	gauge(c.windowSlow, float64(s.Window.Slow))
	gauge(c.windowSlowRatio, s.Window.SlowRatio())
	gauge(c.policySlowRatio, s.Policy.SlowRatio)
	gauge(c.policySlowCall, s.Policy.SlowCall.Seconds())
	gauge(c.throttleProbability, s.ThrottleProbability)
	for _, m := range modes {
		v := 0.0
		if s.Mode == m {
			v = 1
		}
		gauge(c.mode, v, m.String())
	}
	// One series while the breaker is not closed, none while it is: a
	// series per possible reason, mostly zeros, would cost every scrape
	// a dozen lines per breaker to say nothing.
	if s.State != breaker.Closed && s.Reason != "" {
		gauge(c.openReason, 1, string(s.Reason))
	}
	// The outage in progress and why it began, for as long as it lasts,
	// closes and re-trips included: the reason above becomes
	// probe_failed at the first failed probe. None while there is no
	// outage, so that a count never stands for an earlier outage's, nor
	// an earlier process's.
	if o := s.Outage; o != nil {
		gauge(c.outageTrips, float64(o.Trips))
		gauge(c.outageProbesFailed, float64(o.Reopens)) // failed probes and probe timeouts
		gauge(c.outageProbesPassed, float64(o.ProbesPassed))
		gauge(c.outageProbesPassedOnError, float64(o.ProbesPassedOnError))
		gauge(c.outageRefused, float64(o.Refused))
		t := o.Trip
		if t.Reason != "" {
			gauge(c.tripReason, 1, string(t.Reason))
		}
		gauge(c.tripCalls, float64(t.Window.Counted))
		gauge(c.tripFailures, float64(t.Window.Failures))
		gauge(c.tripTimeouts, float64(t.Window.Timeouts))
		gauge(c.tripSlow, float64(t.Window.Slow))
		gauge(c.tripRun, float64(t.Run))
		gauge(c.tripSlowCall, t.SlowCall.Seconds())
	}

	if l := s.Latency; l != nil {
		// A quantile that is unknown (Latency reports 0) is left out,
		// so that a panel shows a gap where it used to show 0: in a
		// timeout outage every call is cut by the deadline.
		qs := make(map[float64]float64, 4)
		for i, q := range latencyQuantileValues(*l) {
			if q > 0 {
				qs[latencyQuantileFloats[i]] = q.Seconds()
			}
		}
		ch <- prometheus.MustNewConstSummary(c.latency, l.SamplesTotal, l.SumTotal.Seconds(), qs, s.Name)
		counter(c.censored, l.CensoredTotal)
		gauge(c.timeout, l.Timeout.Seconds())
	}
}

// followerStatus is what f has done, or the zero status without one.
func followerStatus(f *live.Follower) live.Status {
	if f == nil {
		return live.Status{}
	}
	return f.Status()
}

func (c *Collector) collectPolicy(ch chan<- prometheus.Metric, label breaker.PolicyLabel, ps live.Status) {
	ch <- prometheus.MustNewConstMetric(c.policyInfo, prometheus.GaugeValue, 1, validLabelValue(label.Origin), validLabelValue(label.Version))
	ch <- prometheus.MustNewConstMetric(c.policyApplied, prometheus.GaugeValue,
		float64(label.AppliedAt.UnixNano())/1e9)
	r := ps.Reloads
	for _, x := range []struct {
		result string
		n      uint64
	}{{"applied", r.Applied}, {"rejected", r.Rejected}, {"gone", r.Gone}, {"unreadable", r.Unreadable}, {"unchanged", r.Unchanged}} {
		ch <- prometheus.MustNewConstMetric(c.policyReloads, prometheus.CounterValue, float64(x.n), x.result)
	}
	if l := ps.Last; l != nil {
		ch <- prometheus.MustNewConstMetric(c.policyLastReload, prometheus.GaugeValue, 1, l.Result.String(), validLabelValue(l.Version))
	}
	if d := ps.Down; d != nil {
		ch <- prometheus.MustNewConstMetric(c.policySourceDown, prometheus.GaugeValue, 1, validLabelValue(d.Origin))
	}
	if r := ps.Rejected; r != nil {
		ch <- prometheus.MustNewConstMetric(c.policyRejected, prometheus.GaugeValue, 1, validLabelValue(r.Origin), validLabelValue(r.Version))
	}
}

// latencyQuantileFloats are the quantiles of the latency summary, in the
// order of latencyQuantileValues.
var latencyQuantileFloats = [4]float64{0.5, 0.9, 0.99, 0.999}

// latencyQuantileValues is l's quantiles, in the order of
// latencyQuantileFloats; 0 for one that is unknown.
func latencyQuantileValues(l breaker.Latency) [4]time.Duration {
	return [4]time.Duration{l.P50, l.P90, l.P99, l.P999}
}

func (c *Collector) collectGroup(ch chan<- prometheus.Metric, gs breaker.GroupStatus) {
	ch <- prometheus.MustNewConstMetric(c.groupBreakers, prometheus.GaugeValue, float64(gs.Breakers))
	ch <- prometheus.MustNewConstMetric(c.groupMax, prometheus.GaugeValue, float64(gs.MaxBreakers))
	ch <- prometheus.MustNewConstMetric(c.groupOverflow, prometheus.CounterValue, float64(gs.OverflowCalls))
	for _, st := range statesByName {
		ch <- prometheus.MustNewConstMetric(c.groupEvicted, prometheus.CounterValue, float64(evictedIn(gs.Evicted, st)), st.String())
	}
}

// evictedIn is the count of e for breakers dropped in state st.
func evictedIn(e breaker.Evictions, st breaker.State) uint64 {
	switch st {
	case breaker.Open:
		return e.Open
	case breaker.HalfOpen:
		return e.HalfOpen
	}
	return e.Closed
}

func (c *Collector) collectCandidate(ch chan<- prometheus.Metric, name string, cs *candidate.Status) {
	for _, st := range states {
		v := 0.0
		if cs.State == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.candState, prometheus.GaugeValue, v, name, st.String())
	}
	for _, t := range cs.Transitions {
		ch <- prometheus.MustNewConstMetric(c.candTransitions, prometheus.CounterValue, float64(t.Count),
			name, t.From.String(), t.To.String(), string(t.Reason))
	}
	ch <- prometheus.MustNewConstMetric(c.candWouldRefuse, prometheus.CounterValue, float64(cs.WouldRefuse), name)
	ch <- prometheus.MustNewConstMetric(c.candWouldAdmit, prometheus.CounterValue, float64(cs.WouldAdmit), name)
	ch <- prometheus.MustNewConstMetric(c.candDiffs, prometheus.CounterValue, float64(cs.Differences), name)
}

// outageSeconds is the length of s's outage in progress, 0 if none.
func outageSeconds(s breaker.Status) float64 {
	if s.Outage == nil {
		return 0
	}
	return s.Outage.Duration.Seconds()
}
