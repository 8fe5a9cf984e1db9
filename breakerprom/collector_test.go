package breakerprom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
// run testutil.MetricsPolicy) with a collector on it.
type fixture struct {
	*testutil.MockGroup
	t *testing.T
	c *Collector
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	return newFixtureOf(t, breaker.GroupConfig{}, opts...)
}

// newFixtureOf is newFixture with a group of cfg.
func newFixtureOf(t *testing.T, cfg breaker.GroupConfig, opts ...Option) *fixture {
	t.Helper()
	m := testutil.NewMockGroup(t, cfg)
	return &fixture{MockGroup: m, t: t, c: NewCollector(m.Group, opts...)}
}

// expect compares the collector's exposition, limited to names when given,
// with want, exactly.
func (f *fixture) expect(want string, names ...string) {
	f.t.Helper()
	if err := promtest.CollectAndCompare(f.c, strings.NewReader(want), names...); err != nil {
		f.t.Fatal(err)
	}
}

// Every family, from one group that has seen a full outage and recovery
// (pricing), a shadow breaker that would be open (payment), and a healthy
// breaker with slow and ignored calls (inventory): the story of
// testutil.PlayEveryCount, which the OpenTelemetry adapter's test tells
// too.
func TestCollector_ExposesEveryFamily(t *testing.T) {
	f := newFixture(t)
	f.PlayEveryCount()

	f.expect(`
# HELP breaker_calls_total Admitted calls that have returned, by outcome; probes included.
# TYPE breaker_calls_total counter
breaker_calls_total{name="inventory.GetStock",outcome="failure"} 0
breaker_calls_total{name="inventory.GetStock",outcome="ignored"} 1
breaker_calls_total{name="inventory.GetStock",outcome="success"} 4
breaker_calls_total{name="inventory.GetStock",outcome="timeout"} 0
breaker_calls_total{name="payment.Charge",outcome="failure"} 2
breaker_calls_total{name="payment.Charge",outcome="ignored"} 0
breaker_calls_total{name="payment.Charge",outcome="success"} 3
breaker_calls_total{name="payment.Charge",outcome="timeout"} 0
breaker_calls_total{name="pricing.GetPrice",outcome="failure"} 2
breaker_calls_total{name="pricing.GetPrice",outcome="ignored"} 0
breaker_calls_total{name="pricing.GetPrice",outcome="success"} 3
breaker_calls_total{name="pricing.GetPrice",outcome="timeout"} 1
# HELP breaker_fallbacks_total Results served by a fallback instead of the downstream.
# TYPE breaker_fallbacks_total counter
breaker_fallbacks_total{name="inventory.GetStock"} 0
breaker_fallbacks_total{name="payment.Charge"} 0
breaker_fallbacks_total{name="pricing.GetPrice"} 1
# HELP breaker_group_breakers Breakers the group holds.
# TYPE breaker_group_breakers gauge
breaker_group_breakers 3
# HELP breaker_group_evicted_total Breakers dropped as idle, by the state they were in.
# TYPE breaker_group_evicted_total counter
breaker_group_evicted_total{state="closed"} 0
breaker_group_evicted_total{state="half_open"} 0
breaker_group_evicted_total{state="open"} 0
# HELP breaker_group_max_breakers The most breakers the group holds; calls for further keys run through its overflow breaker.
# TYPE breaker_group_max_breakers gauge
breaker_group_max_breakers 10000
# HELP breaker_group_overflow_calls_total Calls for keys that had no breaker while the group was full, run through its overflow breaker.
# TYPE breaker_group_overflow_calls_total counter
breaker_group_overflow_calls_total 0
# HELP breaker_latency_censored_total Calls cut by a deadline, which the quantiles count as lasting at least what they ran.
# TYPE breaker_latency_censored_total counter
breaker_latency_censored_total{name="inventory.GetStock"} 0
breaker_latency_censored_total{name="payment.Charge"} 0
breaker_latency_censored_total{name="pricing.GetPrice"} 0
# HELP breaker_latency_seconds Latency of the calls: quantiles over the sliding window, the calls cut by a deadline counted as lasting at least what they ran, and a quantile absent while it is unknown; count and sum of the calls that returned, since the breaker began timing calls.
# TYPE breaker_latency_seconds summary
breaker_latency_seconds{name="inventory.GetStock",quantile="0.5"} 5.12e-07
breaker_latency_seconds{name="inventory.GetStock",quantile="0.9"} 3.018407571
breaker_latency_seconds{name="inventory.GetStock",quantile="0.99"} 3.018407571
breaker_latency_seconds{name="inventory.GetStock",quantile="0.999"} 3.018407571
breaker_latency_seconds_sum{name="inventory.GetStock"} 3.018409107
breaker_latency_seconds_count{name="inventory.GetStock"} 4
breaker_latency_seconds{name="payment.Charge",quantile="0.5"} 5.12e-07
breaker_latency_seconds{name="payment.Charge",quantile="0.9"} 5.12e-07
breaker_latency_seconds{name="payment.Charge",quantile="0.99"} 5.12e-07
breaker_latency_seconds{name="payment.Charge",quantile="0.999"} 5.12e-07
breaker_latency_seconds_sum{name="payment.Charge"} 2.048e-06
breaker_latency_seconds_count{name="payment.Charge"} 4
breaker_latency_seconds_sum{name="pricing.GetPrice"} 2.048e-06
breaker_latency_seconds_count{name="pricing.GetPrice"} 4
# HELP breaker_mode Current mode of the breaker: 1 for the mode it is in, 0 for the others.
# TYPE breaker_mode gauge
breaker_mode{mode="auto",name="inventory.GetStock"} 1
breaker_mode{mode="auto",name="payment.Charge"} 0
breaker_mode{mode="auto",name="pricing.GetPrice"} 1
breaker_mode{mode="forced_closed",name="inventory.GetStock"} 0
breaker_mode{mode="forced_closed",name="payment.Charge"} 0
breaker_mode{mode="forced_closed",name="pricing.GetPrice"} 0
breaker_mode{mode="forced_open",name="inventory.GetStock"} 0
breaker_mode{mode="forced_open",name="payment.Charge"} 0
breaker_mode{mode="forced_open",name="pricing.GetPrice"} 0
breaker_mode{mode="shadow",name="inventory.GetStock"} 0
breaker_mode{mode="shadow",name="payment.Charge"} 1
breaker_mode{mode="shadow",name="pricing.GetPrice"} 0
# HELP breaker_not_closed_seconds_total Time the breaker has spent open or half-open, the current outage included.
# TYPE breaker_not_closed_seconds_total counter
breaker_not_closed_seconds_total{name="inventory.GetStock"} 0
breaker_not_closed_seconds_total{name="payment.Charge"} 8
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 30
# HELP breaker_open_duration_seconds Length of the outage in progress: from the trip that began it, its closes and re-trips included, until the breaker has stayed closed for the policy's max_open_for; 0 while there is none.
# TYPE breaker_open_duration_seconds gauge
breaker_open_duration_seconds{name="inventory.GetStock"} 0
breaker_open_duration_seconds{name="payment.Charge"} 8
breaker_open_duration_seconds{name="pricing.GetPrice"} 38
# HELP breaker_open_reason 1 while the breaker is open or half-open, labelled with the reason; absent while it is closed.
# TYPE breaker_open_reason gauge
breaker_open_reason{name="payment.Charge",reason="error_ratio"} 1
# HELP breaker_outage_probes_failed Half-open probes that failed, timeouts included, in the outage in progress; absent while there is none.
# TYPE breaker_outage_probes_failed gauge
breaker_outage_probes_failed{name="payment.Charge"} 0
breaker_outage_probes_failed{name="pricing.GetPrice"} 1
# HELP breaker_outage_probes_passed Half-open probes that passed in the outage in progress; absent while there is none.
# TYPE breaker_outage_probes_passed gauge
breaker_outage_probes_passed{name="payment.Charge"} 0
breaker_outage_probes_passed{name="pricing.GetPrice"} 1
# HELP breaker_outage_probes_passed_on_error Half-open probes in the outage in progress that answered with an error and passed, as they do while the policy's strict_probes is off; absent while there is none.
# TYPE breaker_outage_probes_passed_on_error gauge
breaker_outage_probes_passed_on_error{name="payment.Charge"} 0
breaker_outage_probes_passed_on_error{name="pricing.GetPrice"} 0
# HELP breaker_outage_refused Calls refused with ErrOpen in the outage in progress; absent while there is none.
# TYPE breaker_outage_refused gauge
breaker_outage_refused{name="payment.Charge"} 0
breaker_outage_refused{name="pricing.GetPrice"} 3
# HELP breaker_outage_trips Trips from closed in the outage in progress, the first included; absent while there is none.
# TYPE breaker_outage_trips gauge
breaker_outage_trips{name="payment.Charge"} 1
breaker_outage_trips{name="pricing.GetPrice"} 1
# HELP breaker_policy_applied_timestamp_seconds When the policy document in force was applied, in Unix seconds on the group's clock.
# TYPE breaker_policy_applied_timestamp_seconds gauge
breaker_policy_applied_timestamp_seconds 1.767323045e+09
# HELP breaker_policy_error_ratio The policy's error ratio: the breaker trips when the window's error ratio reaches it; 0 when that rule is off.
# TYPE breaker_policy_error_ratio gauge
breaker_policy_error_ratio{name="inventory.GetStock"} 0.5
breaker_policy_error_ratio{name="payment.Charge"} 0.5
breaker_policy_error_ratio{name="pricing.GetPrice"} 0.5
# HELP breaker_policy_info The policy document in force: 1, with its origin and version (empty for a policy set by code).
# TYPE breaker_policy_info gauge
breaker_policy_info{origin="code",version=""} 1
# HELP breaker_policy_reloads_total Policy documents a followed source delivered, by what became of them.
# TYPE breaker_policy_reloads_total counter
breaker_policy_reloads_total{result="applied"} 0
breaker_policy_reloads_total{result="gone"} 0
breaker_policy_reloads_total{result="rejected"} 0
breaker_policy_reloads_total{result="unchanged"} 0
breaker_policy_reloads_total{result="unreadable"} 0
# HELP breaker_policy_slow_call_seconds The policy's slow_call: a call slower than it counts as slow; 0 when the slow rule is off.
# TYPE breaker_policy_slow_call_seconds gauge
breaker_policy_slow_call_seconds{name="inventory.GetStock"} 2
breaker_policy_slow_call_seconds{name="payment.Charge"} 2
breaker_policy_slow_call_seconds{name="pricing.GetPrice"} 2
# HELP breaker_policy_slow_ratio The policy's slow ratio: the breaker trips when the window's slow ratio reaches it; 0 when that rule is off.
# TYPE breaker_policy_slow_ratio gauge
breaker_policy_slow_ratio{name="inventory.GetStock"} 1
breaker_policy_slow_ratio{name="payment.Charge"} 1
breaker_policy_slow_ratio{name="pricing.GetPrice"} 1
# HELP breaker_probes_total Half-open probe verdicts.
# TYPE breaker_probes_total counter
breaker_probes_total{name="inventory.GetStock",result="failed"} 0
breaker_probes_total{name="inventory.GetStock",result="passed"} 0
breaker_probes_total{name="payment.Charge",result="failed"} 0
breaker_probes_total{name="payment.Charge",result="passed"} 0
breaker_probes_total{name="pricing.GetPrice",result="failed"} 1
breaker_probes_total{name="pricing.GetPrice",result="passed"} 1
# HELP breaker_rejected_total Calls refused without calling the downstream.
# TYPE breaker_rejected_total counter
breaker_rejected_total{name="inventory.GetStock"} 0
breaker_rejected_total{name="payment.Charge"} 0
breaker_rejected_total{name="pricing.GetPrice"} 3
# HELP breaker_shadow_rejected_total Calls a shadow breaker admitted but would have refused.
# TYPE breaker_shadow_rejected_total counter
breaker_shadow_rejected_total{name="inventory.GetStock"} 0
breaker_shadow_rejected_total{name="payment.Charge"} 1
breaker_shadow_rejected_total{name="pricing.GetPrice"} 0
# HELP breaker_slow_calls_total Closed-state calls slower than the policy's slow_call.
# TYPE breaker_slow_calls_total counter
breaker_slow_calls_total{name="inventory.GetStock"} 1
breaker_slow_calls_total{name="payment.Charge"} 0
breaker_slow_calls_total{name="pricing.GetPrice"} 0
# HELP breaker_state Current state of the breaker: 1 for the state it is in, 0 for the others.
# TYPE breaker_state gauge
breaker_state{name="inventory.GetStock",state="closed"} 1
breaker_state{name="inventory.GetStock",state="half_open"} 0
breaker_state{name="inventory.GetStock",state="open"} 0
breaker_state{name="payment.Charge",state="closed"} 0
breaker_state{name="payment.Charge",state="half_open"} 0
breaker_state{name="payment.Charge",state="open"} 1
breaker_state{name="pricing.GetPrice",state="closed"} 1
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 0
# HELP breaker_throttle_probability Probability with which the policy's throttle refuses the breaker's next call; 0 while it throttles nothing, and for a breaker that does not throttle.
# TYPE breaker_throttle_probability gauge
breaker_throttle_probability{name="inventory.GetStock"} 0
breaker_throttle_probability{name="payment.Charge"} 0
breaker_throttle_probability{name="pricing.GetPrice"} 0
# HELP breaker_throttled_total Calls the policy's throttle refused while the breaker was closed; a subset of rejected_total, or of shadow_rejected_total for a shadow breaker, which admits them.
# TYPE breaker_throttled_total counter
breaker_throttled_total{name="inventory.GetStock"} 0
breaker_throttled_total{name="payment.Charge"} 0
breaker_throttled_total{name="pricing.GetPrice"} 0
# HELP breaker_timeout_seconds The deadline the breaker gives calls now: the policy's timeout, or the adaptive timeout in force; 0 for none.
# TYPE breaker_timeout_seconds gauge
breaker_timeout_seconds{name="inventory.GetStock"} 0
breaker_timeout_seconds{name="payment.Charge"} 0
breaker_timeout_seconds{name="pricing.GetPrice"} 0
# HELP breaker_transitions_total State transitions of the breaker, by the rule or event that caused them.
# TYPE breaker_transitions_total counter
` + transitionLines([]string{inventory, payment, pricing},
		"payment.Charge closed open error_ratio 1",
		"pricing.GetPrice closed open error_ratio 1",
		"pricing.GetPrice half_open open probe_failed 1",
		"pricing.GetPrice half_open closed probes_passed 1",
		"pricing.GetPrice open half_open cooldown_elapsed 2") + `# HELP breaker_trip_reason 1 while an outage is in progress, labelled with the rule of the trip that began it, which failed probes and re-trips do not change; absent while there is none.
# TYPE breaker_trip_reason gauge
breaker_trip_reason{name="payment.Charge",reason="error_ratio"} 1
breaker_trip_reason{name="pricing.GetPrice",reason="error_ratio"} 1
# HELP breaker_trip_run Consecutive failures at the trip that began the outage in progress, counted while the policy's consecutive_failures is set (0 otherwise); absent while there is none.
# TYPE breaker_trip_run gauge
breaker_trip_run{name="payment.Charge"} 0
breaker_trip_run{name="pricing.GetPrice"} 0
# HELP breaker_trip_slow_call_seconds The policy's slow_call at the trip that began the outage in progress, what trip_window_slow counts calls slower than; 0 if the slow rule was off; absent while there is none.
# TYPE breaker_trip_slow_call_seconds gauge
breaker_trip_slow_call_seconds{name="payment.Charge"} 2
breaker_trip_slow_call_seconds{name="pricing.GetPrice"} 2
# HELP breaker_trip_window_calls Counted calls in the sliding window that the rule judged at the trip that began the outage in progress; absent while there is none.
# TYPE breaker_trip_window_calls gauge
breaker_trip_window_calls{name="payment.Charge"} 4
breaker_trip_window_calls{name="pricing.GetPrice"} 4
# HELP breaker_trip_window_failures Failures, timeouts included, in the window of the trip that began the outage in progress; absent while there is none.
# TYPE breaker_trip_window_failures gauge
breaker_trip_window_failures{name="payment.Charge"} 2
breaker_trip_window_failures{name="pricing.GetPrice"} 2
# HELP breaker_trip_window_slow Calls slower than the policy's slow_call in the window of the trip that began the outage in progress; absent while there is none.
# TYPE breaker_trip_window_slow gauge
breaker_trip_window_slow{name="payment.Charge"} 0
breaker_trip_window_slow{name="pricing.GetPrice"} 0
# HELP breaker_trip_window_timeouts Timeouts in the window of the trip that began the outage in progress; absent while there is none.
# TYPE breaker_trip_window_timeouts gauge
breaker_trip_window_timeouts{name="payment.Charge"} 0
breaker_trip_window_timeouts{name="pricing.GetPrice"} 0
# HELP breaker_window_calls Counted calls (successes, failures and timeouts) in the sliding window.
# TYPE breaker_window_calls gauge
breaker_window_calls{name="inventory.GetStock"} 4
breaker_window_calls{name="payment.Charge"} 4
breaker_window_calls{name="pricing.GetPrice"} 0
# HELP breaker_window_error_ratio Failures divided by counted calls in the sliding window; 0 when it is empty.
# TYPE breaker_window_error_ratio gauge
breaker_window_error_ratio{name="inventory.GetStock"} 0
breaker_window_error_ratio{name="payment.Charge"} 0.5
breaker_window_error_ratio{name="pricing.GetPrice"} 0
# HELP breaker_window_slow_calls Counted calls in the sliding window slower than the policy's slow_call; 0 while that rule is off.
# TYPE breaker_window_slow_calls gauge
breaker_window_slow_calls{name="inventory.GetStock"} 1
breaker_window_slow_calls{name="payment.Charge"} 0
breaker_window_slow_calls{name="pricing.GetPrice"} 0
# HELP breaker_window_slow_ratio Slow calls divided by counted calls in the sliding window; 0 when it is empty.
# TYPE breaker_window_slow_ratio gauge
breaker_window_slow_ratio{name="inventory.GetStock"} 0.25
breaker_window_slow_ratio{name="payment.Charge"} 0
breaker_window_slow_ratio{name="pricing.GetPrice"} 0
`)

	problems, err := promtest.CollectAndLint(f.c)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// The state gauge and the open-time metrics follow one outage step by
// step. A scrape itself notices an ended cooldown, as any look at the
// breaker does, so the breaker shows half-open at t2 before a call comes.
func TestCollector_StateAndOpenTimeFollowAnOutage(t *testing.T) {
	f := newFixture(t)
	const (
		t0 = 0
		t1 = 4 * time.Second
		t2 = 10 * time.Second // the first cooldown ends
		t3 = 30 * time.Second // the second (doubled) cooldown ends
		t4 = 45 * time.Second
		t5 = 70 * time.Second // closed for MaxOpenFor (40s): the outage has settled
	)
	steps := []struct {
		at   time.Duration
		do   func()
		want string
	}{
		{t0, func() { f.Trip(pricing) }, `
breaker_state{name="pricing.GetPrice",state="closed"} 0
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 1
breaker_open_duration_seconds{name="pricing.GetPrice"} 0
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 0
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1")},
		{t1, nil, `
breaker_state{name="pricing.GetPrice",state="closed"} 0
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 1
breaker_open_duration_seconds{name="pricing.GetPrice"} 4
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 4
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1")},
		{t2, nil, `
breaker_state{name="pricing.GetPrice",state="closed"} 0
breaker_state{name="pricing.GetPrice",state="half_open"} 1
breaker_state{name="pricing.GetPrice",state="open"} 0
breaker_open_duration_seconds{name="pricing.GetPrice"} 10
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 10
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1", "pricing.GetPrice open half_open cooldown_elapsed 1")},
		{t2, func() { f.Calls(pricing, 1, context.DeadlineExceeded) }, `
breaker_state{name="pricing.GetPrice",state="closed"} 0
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 1
breaker_open_duration_seconds{name="pricing.GetPrice"} 10
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 10
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1", "pricing.GetPrice half_open open probe_failed 1", "pricing.GetPrice open half_open cooldown_elapsed 1")},
		{t3, func() { f.Calls(pricing, 1, nil) }, `
breaker_state{name="pricing.GetPrice",state="closed"} 1
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 0
breaker_open_duration_seconds{name="pricing.GetPrice"} 30
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 30
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1", "pricing.GetPrice half_open open probe_failed 1", "pricing.GetPrice half_open closed probes_passed 1", "pricing.GetPrice open half_open cooldown_elapsed 2")},
		{t4, nil, `
breaker_state{name="pricing.GetPrice",state="closed"} 1
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 0
breaker_open_duration_seconds{name="pricing.GetPrice"} 45
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 30
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1", "pricing.GetPrice half_open open probe_failed 1", "pricing.GetPrice half_open closed probes_passed 1", "pricing.GetPrice open half_open cooldown_elapsed 2")},
		{t5, nil, `
breaker_state{name="pricing.GetPrice",state="closed"} 1
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 0
breaker_open_duration_seconds{name="pricing.GetPrice"} 0
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 30
` + transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1", "pricing.GetPrice half_open open probe_failed 1", "pricing.GetPrice half_open closed probes_passed 1", "pricing.GetPrice open half_open cooldown_elapsed 2")},
	}
	for i, s := range steps {
		f.At(s.at)
		if s.do != nil {
			s.do()
		}
		t.Logf("step %d at t0+%v", i, s.at)
		f.expect(withHeaders(s.want),
			"breaker_state", "breaker_open_duration_seconds", "breaker_not_closed_seconds_total", "breaker_transitions_total")
	}
}

// withHeaders prefixes the HELP and TYPE lines of the families a step
// table uses, so that each step lists only samples.
func withHeaders(samples string) string {
	var sb strings.Builder
	for _, h := range []struct{ name, typ, help string }{
		{"breaker_state", "gauge", "Current state of the breaker: 1 for the state it is in, 0 for the others."},
		{"breaker_open_duration_seconds", "gauge", famOpenDuration.help},
		{"breaker_not_closed_seconds_total", "counter", "Time the breaker has spent open or half-open, the current outage included."},
		{"breaker_transitions_total", "counter", "State transitions of the breaker, by the rule or event that caused them."},
		{"breaker_mode", "gauge", "Current mode of the breaker: 1 for the mode it is in, 0 for the others."},
		{"breaker_open_reason", "gauge", "1 while the breaker is open or half-open, labelled with the reason; absent while it is closed."},
		{"breaker_trip_reason", "gauge", famTripReason.help},
		{"breaker_trip_window_calls", "gauge", famTripCalls.help},
		{"breaker_trip_window_failures", "gauge", famTripFailures.help},
		{"breaker_trip_window_timeouts", "gauge", famTripTimeouts.help},
		{"breaker_trip_window_slow", "gauge", famTripSlow.help},
		{"breaker_trip_run", "gauge", famTripRun.help},
		{"breaker_trip_slow_call_seconds", "gauge", famTripSlowCall.help},
		{"breaker_outage_trips", "gauge", famOutageTrips.help},
		{"breaker_outage_probes_failed", "gauge", famOutageProbesFailed.help},
		{"breaker_outage_probes_passed", "gauge", famOutageProbesPassed.help},
		{"breaker_outage_probes_passed_on_error", "gauge", famOutageProbesPassedOnError.help},
		{"breaker_outage_refused", "gauge", famOutageRefused.help},
	} {
		header := "# HELP " + h.name + " " + h.help + "\n# TYPE " + h.name + " " + h.typ + "\n"
		for _, line := range strings.Split(samples, "\n") {
			if strings.HasPrefix(line, h.name+"{") {
				// A family without samples has no header either.
				sb.WriteString(header + line + "\n")
				header = ""
			}
		}
	}
	return sb.String()
}

// transitionLines writes breaker_transitions_total as the collector
// exposes it for the named breakers: every possible transition of each,
// at the count that made gives it ("pricing.GetPrice closed open
// error_ratio 1": name, from, to, reason, count) or at 0, in the order the
// registry sorts them (from, name, reason, to).
func transitionLines(names []string, made ...string) string {
	counts := map[string]string{}
	for _, m := range made {
		f := strings.Fields(m)
		counts[strings.Join(f[:4], " ")] = f[4]
	}
	type line struct{ from, name, reason, to string }
	var lines []line
	for _, n := range names {
		for _, p := range breaker.PossibleTransitions() {
			lines = append(lines, line{p.From.String(), n, string(p.Reason), p.To.String()})
		}
	}
	slices.SortFunc(lines, func(a, b line) int {
		return cmp.Or(strings.Compare(a.from, b.from), strings.Compare(a.name, b.name),
			strings.Compare(a.reason, b.reason), strings.Compare(a.to, b.to))
	})
	var sb strings.Builder
	for _, l := range lines {
		n, ok := counts[l.name+" "+l.from+" "+l.to+" "+l.reason]
		if !ok {
			n = "0"
		}
		delete(counts, l.name+" "+l.from+" "+l.to+" "+l.reason)
		fmt.Fprintf(&sb, "breaker_transitions_total{from=%q,name=%q,reason=%q,to=%q} %s\n", l.from, l.name, l.reason, l.to, n)
	}
	if len(counts) > 0 {
		panic(fmt.Sprint("transitionLines: not possible: ", counts))
	}
	return sb.String()
}

// A breaker the group drops takes its series, transitions included, out of
// the exposition; one created again under the same key counts afresh.
func TestCollector_ForgetsBreakersTheGroupDrops(t *testing.T) {
	f := newFixture(t)
	f.Trip(pricing)
	f.Calls(inventory, 1, nil)
	f.expect(withHeaders(transitionLines([]string{inventory, pricing}, "pricing.GetPrice closed open error_ratio 1")),
		"breaker_transitions_total")

	require.True(t, f.Group.Remove(pricing))
	f.expect(withHeaders(`
breaker_state{name="inventory.GetStock",state="closed"} 1
breaker_state{name="inventory.GetStock",state="half_open"} 0
breaker_state{name="inventory.GetStock",state="open"} 0
`+transitionLines([]string{inventory})), "breaker_state", "breaker_transitions_total")

	f.Trip(pricing)
	f.expect(withHeaders(transitionLines([]string{inventory, pricing}, "pricing.GetPrice closed open error_ratio 1")),
		"breaker_transitions_total")
}

// Regression: idle eviction dropped only closed breakers. The breakers
// of pods that died (opened by their last calls, and never called again)
// stayed in the exposition for ever, open or half-open. After IdleAfter
// without a call they leave the collector's exposition and the
// handler's alike, and breaker_group_evicted_total counts them by the
// state they were in.
func TestCollector_DeadTargetsLeaveTheExposition(t *testing.T) {
	f := newFixtureOf(t, breaker.GroupConfig{IdleAfter: 10 * time.Minute, ColdTargets: true})
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	var pods []string
	for i := range 20 {
		pods = append(pods, fmt.Sprintf("payment.Charge@10.0.7.%d", i))
		f.Calls(pods[i], 1, nil)
	}
	f.At(time.Minute) // past their cold start
	for _, p := range pods {
		f.Trip(p) // the pod dies
	}
	require.Contains(t, handlerText(t, h), `breaker_state{name="payment.Charge@10.0.7.19",state="open"} 1`)
	for m := 2; m <= 15; m++ { // a watcher's rounds, a scrape each
		f.At(time.Duration(m) * time.Minute)
		f.Calls(inventory, 1, nil)
		f.Group.EvictIdle()
		_ = handlerText(t, h)
	}
	got := handlerText(t, h)
	assert.Equal(t, registryText(t, f.c), got)
	assert.NotContains(t, got, "payment.Charge")
	assert.Contains(t, got, `breaker_state{name="inventory.GetStock",state="closed"} 1`)
	assert.Contains(t, got, "breaker_group_breakers 1\n")
	assert.Contains(t, got, `breaker_group_evicted_total{state="half_open"} 20`)
}

// Past the group's cap, calls for keys without a breaker are counted in
// breaker_group_overflow_calls_total, by the collector and the handler.
func TestCollector_CountsTheCallsPastTheCap(t *testing.T) {
	f := newFixtureOf(t, breaker.GroupConfig{MaxBreakers: 1})
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	f.Calls(inventory, 1, nil)
	f.Calls(pricing, 2, errBoom)
	f.Calls(payment, 1, nil)
	f.expect(`
# HELP breaker_group_breakers Breakers the group holds.
# TYPE breaker_group_breakers gauge
breaker_group_breakers 1
# HELP breaker_group_max_breakers The most breakers the group holds; calls for further keys run through its overflow breaker.
# TYPE breaker_group_max_breakers gauge
breaker_group_max_breakers 1
# HELP breaker_group_overflow_calls_total Calls for keys that had no breaker while the group was full, run through its overflow breaker.
# TYPE breaker_group_overflow_calls_total counter
breaker_group_overflow_calls_total 3
`, "breaker_group_breakers", "breaker_group_max_breakers", "breaker_group_overflow_calls_total")
	assert.Equal(t, registryText(t, f.c), handlerText(t, h))
}

// A breaker created after a scrape took its snapshot, whose first
// transition lands while the scrape is still sending, is absent from that
// snapshot but alive: the scrape must not take it for a dropped breaker
// and forget the transition.
func TestCollector_KeepsATransitionThatLandsDuringAScrape(t *testing.T) {
	f := newFixture(t)
	f.Calls(inventory, 1, nil) // so the scrape has samples to send
	ch := make(chan prometheus.Metric)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		for range ch {
			if first {
				// Collect is blocked on its next send until this returns,
				// so the transition lands before its sweep.
				f.Trip(pricing)
				first = false
			}
		}
	}()
	f.c.Collect(ch)
	close(ch)
	<-done
	f.expect(withHeaders(transitionLines([]string{inventory, pricing}, "pricing.GetPrice closed open error_ratio 1")),
		"breaker_transitions_total")
}

// A collector created after the group has served traffic (a service whose
// metrics endpoint came up late) counts the transitions made before it:
// pricing tripped, failed a probe and recovered in between, and
// breaker_transitions_total shows all of it.
// Regression (82bc9f9): transitions were counted through Group.Subscribe
// from the collector's creation on, so none of these showed, while the
// breaker's own probes_total showed both verdicts.
func TestCollector_CreatedLateCountsEarlierTransitions(t *testing.T) {
	f := newFixture(t)
	f.Trip(pricing)
	f.Recover(pricing) // a probe fails, open for 20s; the next passes

	late := NewCollector(f.Group)
	err := promtest.CollectAndCompare(late, strings.NewReader(withHeaders(transitionLines([]string{pricing},
		"pricing.GetPrice closed open error_ratio 1",
		"pricing.GetPrice half_open open probe_failed 1",
		"pricing.GetPrice half_open closed probes_passed 1",
		"pricing.GetPrice open half_open cooldown_elapsed 2")+`
breaker_not_closed_seconds_total{name="pricing.GetPrice"} 30
`)), "breaker_transitions_total", "breaker_not_closed_seconds_total")
	require.NoError(t, err)
}

// Two groups can share a registry when their collectors carry distinct
// constant labels, and the namespace renames every family.
func TestCollector_NamespaceAndConstLabels(t *testing.T) {
	a, b := newFixture(t, WithNamespace("shop_breaker"), WithConstLabels(prometheus.Labels{"group": "outbound"})),
		newFixture(t, WithNamespace("shop_breaker"), WithConstLabels(prometheus.Labels{"group": "inbound"}))
	a.Trip(pricing)
	b.Calls(inventory, 1, nil)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(a.c))
	require.NoError(t, reg.Register(b.c))
	err := promtest.GatherAndCompare(reg, strings.NewReader(`
# HELP shop_breaker_state Current state of the breaker: 1 for the state it is in, 0 for the others.
# TYPE shop_breaker_state gauge
shop_breaker_state{group="inbound",name="inventory.GetStock",state="closed"} 1
shop_breaker_state{group="inbound",name="inventory.GetStock",state="half_open"} 0
shop_breaker_state{group="inbound",name="inventory.GetStock",state="open"} 0
shop_breaker_state{group="outbound",name="pricing.GetPrice",state="closed"} 0
shop_breaker_state{group="outbound",name="pricing.GetPrice",state="half_open"} 0
shop_breaker_state{group="outbound",name="pricing.GetPrice",state="open"} 1
`), "shop_breaker_state")
	require.NoError(t, err)

	// Without distinct labels the registry must refuse the second group
	// rather than merge two breakers that share a key.
	dup := newFixture(t, WithNamespace("shop_breaker"), WithConstLabels(prometheus.Labels{"group": "outbound"}))
	assert.Error(t, reg.Register(dup.c))

	// An empty namespace keeps the default.
	c := newFixture(t, WithNamespace(""))
	c.Calls(inventory, 1, nil)
	assert.Equal(t, 3, promtest.CollectAndCount(c.c, "breaker_state"))
}

// Scrapes run while breakers trip and recover on other goroutines; every
// transition is counted exactly once.
func TestCollector_RaceHammer(t *testing.T) {
	f := newFixture(t)
	seen := f.Hammer(func() { promtest.CollectAndCount(f.c) }, inventory, pricing, payment)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(f.c))
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0
	for _, mf := range families {
		if mf.GetName() == "breaker_transitions_total" {
			for _, m := range mf.GetMetric() {
				total += int(m.GetCounter().GetValue())
			}
		}
	}
	assert.Equal(t, seen, total)
	assert.Equal(t, 3*50*2, total, "each round trips once and resets once")
}

// A breaker removed and created again under its key starts its
// transition counts from zero, as its calls_total, probes_total and own
// Opens do: pricing tripped, was removed, and tripped again before the
// next scrape, and shows one trip.
// Regression (31429fa): counts were kept by name and forgotten only when a
// scrape found the name gone, so the new breaker showed the old one's trip
// as well as its own (2).
func TestCollector_TransitionCountsStartAfreshWithARecreatedBreaker(t *testing.T) {
	f := newFixture(t)
	f.Trip(pricing)
	require.True(t, f.Group.Remove(pricing))
	f.Trip(pricing)
	require.Equal(t, uint64(1), f.Breaker(pricing).Counters().Opens)
	f.expect(withHeaders(transitionLines([]string{pricing}, "pricing.GetPrice closed open error_ratio 1")),
		"breaker_transitions_total")
}

// The reason series follows an outage: the trip rule, what reopened the
// breaker, nothing once it closes; the mode gauge says when an operator
// forced it open, which alerting rules leave out.
func TestCollector_OpenReasonAndModeFollowAnOutage(t *testing.T) {
	f := newFixture(t)
	auto := `
breaker_mode{mode="auto",name="pricing.GetPrice"} 1
breaker_mode{mode="forced_closed",name="pricing.GetPrice"} 0
breaker_mode{mode="forced_open",name="pricing.GetPrice"} 0
breaker_mode{mode="shadow",name="pricing.GetPrice"} 0
`
	steps := []struct {
		at   time.Duration
		do   func()
		want string
	}{
		{0, func() { f.Trip(pricing) }, auto + `
breaker_open_reason{name="pricing.GetPrice",reason="error_ratio"} 1
`},
		// The cooldown is over: half-open, still the outage of error_ratio.
		{10 * time.Second, nil, auto + `
breaker_open_reason{name="pricing.GetPrice",reason="error_ratio"} 1
`},
		{10 * time.Second, func() { f.Calls(pricing, 1, context.DeadlineExceeded) }, auto + `
breaker_open_reason{name="pricing.GetPrice",reason="probe_failed"} 1
`},
		{30 * time.Second, func() { f.Calls(pricing, 1, nil) }, auto},
		{31 * time.Second, func() { require.NoError(t, f.Breaker(pricing).SetMode(breaker.ModeForcedOpen)) }, `
breaker_mode{mode="auto",name="pricing.GetPrice"} 0
breaker_mode{mode="forced_closed",name="pricing.GetPrice"} 0
breaker_mode{mode="forced_open",name="pricing.GetPrice"} 1
breaker_mode{mode="shadow",name="pricing.GetPrice"} 0
breaker_open_reason{name="pricing.GetPrice",reason="forced_open"} 1
`},
	}
	for _, s := range steps {
		f.At(s.at)
		if s.do != nil {
			s.do()
		}
		t.Logf("at %v", s.at)
		f.expect(withHeaders(s.want), "breaker_mode", "breaker_open_reason")
	}
}

// Every transition a breaker can make is a series at 0 from its
// creation, so that increase() and changes() see its first trip, and see
// it again after a restart. Each used to appear only when first made, at
// 1, and the dashboard's trip annotation and the Transitions panel
// showed nothing for a breaker's first trip.
func TestCollector_TransitionsAreAtZeroFromTheBreakersCreation(t *testing.T) {
	f := newFixture(t)
	f.Calls(inventory, 1, nil)
	f.expect(withHeaders(transitionLines([]string{inventory})), "breaker_transitions_total")
	assert.Equal(t, len(breaker.PossibleTransitions()), promtest.CollectAndCount(f.c, "breaker_transitions_total"))
	f.Calls(inventory, 3, errBoom) // 3 of 4 failed: it trips
	f.expect(withHeaders(transitionLines([]string{inventory}, "inventory.GetStock closed open error_ratio 1")),
		"breaker_transitions_total")
}

// The trip's reason and window stay for the whole outage while
// open_reason follows what reopened the breaker, and all go once it
// closes. A failed probe used to turn the only reason a rule could read
// into probe_failed, and the window the alert needs was nowhere.
func TestCollector_TripReasonAndWindowStayForTheWholeOutage(t *testing.T) {
	// The trip series follow Status.Outage: they stay through a failed
	// probe and through the close that begins the recovery, and leave
	// only once the breaker has stayed closed for MaxOpenFor (40s).
	f := newFixture(t)
	f.Calls(pricing, 2, nil)
	f.Calls(pricing, 1, errBoom)
	f.Calls(pricing, 1, context.DeadlineExceeded) // 2 of 4 failed, 1 a timeout
	trip := `
breaker_trip_reason{name="pricing.GetPrice",reason="error_ratio"} 1
breaker_trip_window_calls{name="pricing.GetPrice"} 4
breaker_trip_window_failures{name="pricing.GetPrice"} 2
breaker_trip_window_timeouts{name="pricing.GetPrice"} 1
breaker_trip_window_slow{name="pricing.GetPrice"} 0
breaker_trip_run{name="pricing.GetPrice"} 0
breaker_trip_slow_call_seconds{name="pricing.GetPrice"} 2
`
	names := []string{"breaker_open_reason", "breaker_trip_reason", "breaker_trip_window_calls",
		"breaker_trip_window_failures", "breaker_trip_window_timeouts", "breaker_trip_window_slow",
		"breaker_trip_run", "breaker_trip_slow_call_seconds"}
	f.expect(withHeaders(trip+`breaker_open_reason{name="pricing.GetPrice",reason="error_ratio"} 1`), names...)
	f.At(10 * time.Second)
	f.Calls(pricing, 1, context.DeadlineExceeded) // the probe times out
	f.expect(withHeaders(trip+`breaker_open_reason{name="pricing.GetPrice",reason="probe_failed"} 1`), names...)
	f.At(30 * time.Second)
	f.Calls(pricing, 1, nil) // closed: recovering, the outage goes on
	f.expect(withHeaders(trip), names...)
	f.At(69 * time.Second)
	f.expect(withHeaders(trip), names...)
	f.At(70 * time.Second) // closed for MaxOpenFor: settled
	f.expect("", names...)
}

// The outage's counts: a hard error outage whose probes answer with
// errors and pass (StrictProbes off) closes at each cooldown's end and
// trips again; the counts grow across the closes, as one outage, and
// leave once it settles. A new process (a new group) on the same
// downstream starts from its own first trip: nothing of the earlier
// process's outage.
func TestCollector_OutageCountsGrowAcrossClosesAndStartAfreshInANewProcess(t *testing.T) {
	names := []string{"breaker_open_duration_seconds", "breaker_outage_trips", "breaker_outage_probes_failed",
		"breaker_outage_probes_passed", "breaker_outage_probes_passed_on_error", "breaker_outage_refused"}
	want := func(dur, trips, failed, passed, onError, refused int) string {
		return withHeaders(fmt.Sprintf(`
breaker_open_duration_seconds{name="pricing.GetPrice"} %d
breaker_outage_trips{name="pricing.GetPrice"} %d
breaker_outage_probes_failed{name="pricing.GetPrice"} %d
breaker_outage_probes_passed{name="pricing.GetPrice"} %d
breaker_outage_probes_passed_on_error{name="pricing.GetPrice"} %d
breaker_outage_refused{name="pricing.GetPrice"} %d
`, dur, trips, failed, passed, onError, refused))
	}
	f := newFixture(t)
	f.Calls(pricing, 4, errBoom) // trips at 0s
	f.Refused(pricing, 2)
	f.expect(want(0, 1, 0, 0, 0, 2), names...)
	f.At(10 * time.Second)
	f.Calls(pricing, 1, errBoom) // the probe answers with an error and passes: closed
	f.Calls(pricing, 4, errBoom) // trips again
	f.expect(want(10, 2, 0, 1, 1, 2), names...)
	f.At(40 * time.Second)                        // the doubled cooldown (20s) is over
	f.Calls(pricing, 1, context.DeadlineExceeded) // a probe timeout fails it
	f.expect(want(40, 2, 1, 1, 1, 2), names...)

	// The process restarts: a new group, the same downstream, failing.
	g := newFixture(t)
	g.Calls(pricing, 4, errBoom)
	g.expect(want(0, 1, 0, 0, 0, 0), names...)
}

// An operator confirms a change from the metrics: the version in force,
// when it was applied, and the reloads by result, a rejected one included.
func TestCollector_ExposesThePolicyInForceAndTheReloads(t *testing.T) {
	f := newFixture(t)
	fl, deliver := f.Follow()
	f.c = NewCollector(f.Group, WithFollower(fl))

	f.At(time.Minute)
	require.Equal(t, live.Applied, deliver(live.Document{Origin: "file:/etc/app/breakers.json",
		Version: "sha256:5d41402abc4b2a76", Data: []byte(`{"default": {"min_requests": 10}}`)}))
	f.At(2 * time.Minute)
	require.Equal(t, live.Rejected, deliver(live.Document{Origin: "file:/etc/app/breakers.json",
		Version: "sha256:7f83b1657ff1fc53", Data: []byte(`{"default": {"min_requests": -1}}`)}))

	f.expect(`
# HELP breaker_policy_applied_timestamp_seconds When the policy document in force was applied, in Unix seconds on the group's clock.
# TYPE breaker_policy_applied_timestamp_seconds gauge
breaker_policy_applied_timestamp_seconds 1.767323105e+09
# HELP breaker_policy_info The policy document in force: 1, with its origin and version (empty for a policy set by code).
# TYPE breaker_policy_info gauge
breaker_policy_info{origin="file:/etc/app/breakers.json",version="sha256:5d41402abc4b2a76"} 1
# HELP breaker_policy_reloads_total Policy documents a followed source delivered, by what became of them.
# TYPE breaker_policy_reloads_total counter
breaker_policy_reloads_total{result="applied"} 1
breaker_policy_reloads_total{result="gone"} 0
breaker_policy_reloads_total{result="rejected"} 1
breaker_policy_reloads_total{result="unchanged"} 0
breaker_policy_reloads_total{result="unreadable"} 0
# HELP breaker_policy_last_reload_info The last document a followed source delivered: 1, with what became of it and its version; absent until one is delivered.
# TYPE breaker_policy_last_reload_info gauge
breaker_policy_last_reload_info{result="rejected",version="sha256:7f83b1657ff1fc53"} 1
`, "breaker_policy_applied_timestamp_seconds", "breaker_policy_info", "breaker_policy_reloads_total", "breaker_policy_last_reload_info")
	h, err := NewHandler(f.Group, nil, WithFollower(fl))
	require.NoError(t, err)
	assert.Equal(t, registryText(t, f.c), handlerText(t, h), "the handler writes the same")

	// Without the follower, the label alone: the reloads at 0.
	f.c = NewCollector(f.Group)
	f.expect(`
# HELP breaker_policy_info The policy document in force: 1, with its origin and version (empty for a policy set by code).
# TYPE breaker_policy_info gauge
breaker_policy_info{origin="file:/etc/app/breakers.json",version="sha256:5d41402abc4b2a76"} 1
# HELP breaker_policy_reloads_total Policy documents a followed source delivered, by what became of them.
# TYPE breaker_policy_reloads_total counter
breaker_policy_reloads_total{result="applied"} 0
breaker_policy_reloads_total{result="gone"} 0
breaker_policy_reloads_total{result="rejected"} 0
breaker_policy_reloads_total{result="unchanged"} 0
breaker_policy_reloads_total{result="unreadable"} 0
`, "breaker_policy_info", "breaker_policy_reloads_total", "breaker_policy_last_reload_info")
}

// A breaker running a candidate policy exposes what the candidate does,
// under names of its own.
func TestCollector_ExposesACandidatePolicy(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.Group.SetPolicies(testutil.CandidatePolicies(payment)))
	f.Calls(payment, 3, nil)
	f.Calls(payment, 1, errBoom) // 1 of 4: the candidate opens, the policy in force does not
	f.Calls(payment, 2, nil)     // the candidate would have refused these
	f.Calls(inventory, 1, nil)

	f.expect(`
# HELP breaker_candidate_differences_total Times the breaker's candidate policy and its policy in force came to differ in state.
# TYPE breaker_candidate_differences_total counter
breaker_candidate_differences_total{name="payment.Charge"} 1
# HELP breaker_candidate_state State of the breaker's candidate policy, run in shadow: 1 for the state it is in, 0 for the others.
# TYPE breaker_candidate_state gauge
breaker_candidate_state{name="payment.Charge",state="closed"} 0
breaker_candidate_state{name="payment.Charge",state="half_open"} 0
breaker_candidate_state{name="payment.Charge",state="open"} 1
# HELP breaker_candidate_transitions_total State transitions of the breaker's candidate policy, by the rule or event that caused them.
# TYPE breaker_candidate_transitions_total counter
breaker_candidate_transitions_total{from="closed",name="payment.Charge",reason="error_ratio",to="open"} 1
# HELP breaker_candidate_would_admit_total Calls the breaker refused that its candidate policy would have admitted.
# TYPE breaker_candidate_would_admit_total counter
breaker_candidate_would_admit_total{name="payment.Charge"} 0
# HELP breaker_candidate_would_refuse_total Calls the breaker admitted that its candidate policy would have refused.
# TYPE breaker_candidate_would_refuse_total counter
breaker_candidate_would_refuse_total{name="payment.Charge"} 2
`, "breaker_candidate_differences_total", "breaker_candidate_state", "breaker_candidate_transitions_total",
		"breaker_candidate_would_admit_total", "breaker_candidate_would_refuse_total")
	assert.Equal(t, breaker.Closed, f.Breaker(payment).State())
	problems, err := promtest.CollectAndLint(f.c)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// A breaker with a deadline reports the deadline in force and counts its
// timed-out calls apart from the latency summary; one that does not time
// its calls has neither family.
func TestCollector_LatencyAndTimeoutOfTimedBreakersOnly(t *testing.T) {
	clk := clock.NewMock()
	timed := breaker.DefaultPolicy()
	timed.CallTimeout = 100 * time.Millisecond
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{
		Default:   breaker.DefaultPolicy(),
		Overrides: map[string]breaker.Policy{inventory: timed},
	}}, breaker.WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()
	for _, d := range []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond} {
		_ = g.Do(ctx, inventory, func(ctx context.Context) error {
			clk.Add(d)
			return ctx.Err()
		})
	}
	require.NoError(t, g.Do(ctx, pricing, func(context.Context) error { return nil }))
	c := NewCollector(g)
	want := `
# HELP breaker_latency_censored_total Calls cut by a deadline, which the quantiles count as lasting at least what they ran.
# TYPE breaker_latency_censored_total counter
breaker_latency_censored_total{name="inventory.GetStock"} 1
# HELP breaker_timeout_seconds The deadline the breaker gives calls now: the policy's timeout, or the adaptive timeout in force; 0 for none.
# TYPE breaker_timeout_seconds gauge
breaker_timeout_seconds{name="inventory.GetStock"} 0.1
`
	require.NoError(t, promtest.CollectAndCompare(c, strings.NewReader(want), "breaker_latency_censored_total", "breaker_timeout_seconds"))
	n, err := promtest.GatherAndCount(registryOf(t, c), "breaker_latency_seconds")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one summary, for inventory")
}

func registryOf(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	return reg
}

// A key that is not UTF-8 (a service keyed its breakers by a request
// header, and a client sent such bytes) is exposed with its bad bytes in
// hex (\xff), and the scrape goes on.
// Regression (08d8770): the key went to the registry as it was, the
// registry refused it, and the whole scrape failed: every breaker of the
// group and every other metric of the registry vanished from Prometheus.
func TestCollector_AKeyThatIsNotUTF8KeepsTheScrape(t *testing.T) {
	f := newFixture(t)
	f.Calls("inventory.GetStock@\xff\xfe", 1, nil)
	f.Calls(pricing, 1, nil)
	reg := registryOf(t, f.c)
	_, err := reg.Gather()
	require.NoError(t, err)
	f.expect(withHeaders(`
breaker_state{name="inventory.GetStock@\\xff\\xfe",state="closed"} 1
breaker_state{name="inventory.GetStock@\\xff\\xfe",state="half_open"} 0
breaker_state{name="inventory.GetStock@\\xff\\xfe",state="open"} 0
breaker_state{name="pricing.GetPrice",state="closed"} 1
breaker_state{name="pricing.GetPrice",state="half_open"} 0
breaker_state{name="pricing.GetPrice",state="open"} 0
`), "breaker_state")
}

// Two keys that differ only in bytes that are not UTF-8 ("GetStock@\xff"
// and "GetStock@\xfe") stay apart, written in hex; a key that spells out
// another's escape in plain ASCII ("GetStock@\\xff") is one label value
// with it, and is exposed once, for the first of the two in the order of
// their keys, rather than failing the scrape.
// Regression (e72cb64): both keys became "GetStock@\uFFFD", one series
// twice, which the registry refuses, failing the whole scrape.
func TestCollector_KeysThatAreOneLabelValueKeepTheScrape(t *testing.T) {
	f := newFixture(t)
	f.Calls("GetStock@\xff", 1, nil)
	f.Calls("GetStock@\xfe", 2, nil)
	f.Calls(`GetStock@\xff`, 3, nil)
	reg := registryOf(t, f.c)
	_, err := reg.Gather()
	require.NoError(t, err)
	text := registryText(t, NewCollector(f.Group))
	for _, line := range []string{
		`breaker_calls_total{name="GetStock@\\xfe",outcome="success"} 2`,
		`breaker_calls_total{name="GetStock@\\xff",outcome="success"} 3`,
	} {
		assert.Contains(t, text, line)
	}
	assert.Equal(t, 4, strings.Count(text, `breaker_calls_total{name="GetStock@\\xff",outcome=`), "the four outcomes of one breaker")
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	require.Equal(t, registryText(t, NewCollector(f.Group)), handlerText(t, h))
}

// throttlePolicy is MetricsPolicy with throttling alone: no ratio rule,
// K 2 and both floors at 4 calls, so four failures in a row give a
// refusal probability of 4/5, above MockGroup's draw of 0.5.
func throttlePolicy() breaker.Policy {
	p := testutil.MetricsPolicy()
	p.ErrorRatio = 0
	p.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 4}
	return p
}

// failUntilThrottled makes failing calls through key's breaker until its
// throttle has refused one (for a shadow breaker, would have refused one:
// the call is made).
func failUntilThrottled(t *testing.T, m *testutil.MockGroup, key string) {
	t.Helper()
	for i := 0; m.Breaker(key).Status().Counters.Throttled == 0; i++ {
		require.Less(t, i, 1000, "%s never throttled", key)
		_ = m.Call(key, errBoom)
	}
}

// gathered returns the value of every series of the family name that c
// exposes, by its breaker's name.
func gathered(t *testing.T, c prometheus.Collector, name string) map[string]float64 {
	t.Helper()
	mfs, err := registryOf(t, c).Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key string
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					key = l.GetValue()
				}
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A closed breaker whose throttle refuses calls shows them in
// throttled_total, within rejected_total, and the probability of refusing
// the next one; a shadow breaker counts what it would have throttled
// within shadow_rejected_total. Once the failures leave the window the
// probability is 0 again, and the counts stay.
func TestCollector_ThrottledCallsAndTheRefusalProbability(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.Group.SetPolicies(breaker.GroupPolicy{Default: testutil.MetricsPolicy(),
		Overrides: map[string]breaker.Policy{pricing: throttlePolicy(), payment: throttlePolicy()}}))
	require.NoError(t, f.Breaker(payment).SetMode(breaker.ModeShadow))
	// Failures until the throttle refuses (or, in shadow, would refuse) a
	// call: how many it takes is the core's rule of the throttle's
	// sample. The draws are 0.5, so from then on it refuses every call.
	for _, key := range []string{pricing, payment} {
		failUntilThrottled(t, f.MockGroup, key)
	}
	f.Refused(pricing, 1)      // a second
	f.Calls(payment, 1, nil)   // admitted, counted as a would-be refusal
	f.Calls(inventory, 1, nil) // does not throttle
	require.Equal(t, breaker.Closed, f.Breaker(pricing).State())

	assert.Equal(t, map[string]float64{inventory: 0, payment: 2, pricing: 2}, gathered(t, f.c, "breaker_throttled_total"))
	assert.Equal(t, map[string]float64{inventory: 0, payment: 0, pricing: 2}, gathered(t, f.c, "breaker_rejected_total"))
	assert.Equal(t, map[string]float64{inventory: 0, payment: 2, pricing: 0}, gathered(t, f.c, "breaker_shadow_rejected_total"))
	p := gathered(t, f.c, "breaker_throttle_probability")
	assert.Equal(t, f.Breaker(pricing).Status().ThrottleProbability, p[pricing])
	assert.Equal(t, f.Breaker(payment).Status().ThrottleProbability, p[payment])
	assert.Greater(t, p[pricing], 0.5)
	assert.Greater(t, p[payment], 0.5)
	assert.Equal(t, 0.0, p[inventory])

	f.At(20 * time.Second) // the window has emptied
	assert.Equal(t, map[string]float64{inventory: 0, payment: 0, pricing: 0}, gathered(t, f.c, "breaker_throttle_probability"))
	assert.Equal(t, map[string]float64{inventory: 0, payment: 2, pricing: 2}, gathered(t, f.c, "breaker_throttled_total"))

	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	assert.Equal(t, registryText(t, NewCollector(f.Group)), handlerText(t, h))
}

// A timeout outage: every call is cut by the deadline, so no quantile is
// known (Status.Latency reports 0). The summary leaves the quantiles out,
// and a panel shows a gap, where it used to show a p99 of 0 for the whole
// outage; count and sum stay. The handler writes the same.
func TestCollector_AnUnknownQuantileIsLeftOutNotZero(t *testing.T) {
	clk := clock.NewMock()
	timed := breaker.DefaultPolicy()
	timed.CallTimeout = 100 * time.Millisecond
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: timed}}, breaker.WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		_ = g.Do(ctx, inventory, func(ctx context.Context) error {
			clk.Add(200 * time.Millisecond)
			return ctx.Err()
		})
	}
	b, err := g.Get(inventory)
	require.NoError(t, err)
	lat := b.Status()
	require.NotNil(t, lat.Latency)
	require.Zero(t, lat.Latency.P99, "the fixture: p99 unknown")
	c := NewCollector(g)
	got := registryText(t, c)
	assert.NotContains(t, got, `quantile="0.99"`)
	assert.Contains(t, got, `breaker_latency_seconds_count{name="inventory.GetStock"}`)
	h, err := NewHandler(g, nil)
	require.NoError(t, err)
	assert.Equal(t, got, handlerText(t, h))
}

// A followed source that is gone: policy_source_down says so until a
// readable document is delivered, and policy_rejected_info keeps the
// refused version through the gone source (it used to read "resolved" the
// moment last_reload_info became gone); the version in force put back
// ends both.
func TestCollector_AGoneSourceIsDownAndKeepsTheRefusedDocument(t *testing.T) {
	f := newFixture(t)
	fl, deliver := f.Follow()
	f.c = NewCollector(f.Group, WithFollower(fl))
	h, err := NewHandler(f.Group, nil, WithFollower(fl))
	require.NoError(t, err)
	const origin = "file:/etc/app/breakers.json"
	good := live.Document{Origin: origin, Version: "sha256:5d41402abc4b2a76", Data: []byte(`{"default": {"min_requests": 10}}`)}
	names := []string{"breaker_policy_source_down", "breaker_policy_rejected_info"}
	down := "# HELP breaker_policy_source_down " + famPolicySourceDown.help + "\n# TYPE breaker_policy_source_down gauge\n" +
		`breaker_policy_source_down{origin="file:/etc/app/breakers.json"} 1` + "\n"
	rejected := "# HELP breaker_policy_rejected_info " + famPolicyRejected.help + "\n# TYPE breaker_policy_rejected_info gauge\n" +
		`breaker_policy_rejected_info{origin="file:/etc/app/breakers.json",version="sha256:7f83b1657ff1fc53"} 1` + "\n"

	require.Equal(t, live.Applied, deliver(good))
	f.expect("", names...)
	require.Equal(t, live.Rejected, deliver(live.Document{Origin: origin,
		Version: "sha256:7f83b1657ff1fc53", Data: []byte(`{"default": {"min_requests": -1}}`)}))
	f.expect(rejected, names...)
	require.Equal(t, live.Gone, deliver(live.Document{Origin: origin, Gone: true}))
	f.expect(rejected+down, names...)
	assert.Equal(t, registryText(t, f.c), handlerText(t, h), "the handler writes the same")
	require.Equal(t, live.Unchanged, deliver(good))
	f.expect("", names...)
}
