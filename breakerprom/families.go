package breakerprom

// family is one metric family the package exposes, as both the
// [Collector] and the [Handler] write it: its name after the namespace
// and an underscore, its help, its type and its variable labels, "name"
// (the breaker's key) first for the families of a breaker.
//
// One table for both, so that the two cannot come to disagree on a name
// or a help text; TestHandler_WritesWhatTheCollectorGathers holds them to
// the same exposition, values and order included.
type family struct {
	name, help, typ string
	labels          []string
}

var (
	famState = family{"state",
		"Current state of the breaker: 1 for the state it is in, 0 for the others.",
		"gauge", []string{"name", "state"}}
	famTransitions = family{"transitions_total",
		"State transitions of the breaker, by the rule or event that caused them.",
		"counter", []string{"name", "from", "to", "reason"}}
	famCalls = family{"calls_total",
		"Admitted calls that have returned, by outcome; probes included.",
		"counter", []string{"name", "outcome"}}
	famSlow = family{"slow_calls_total",
		"Closed-state calls slower than the policy's slow_call.",
		"counter", []string{"name"}}
	famRejected = family{"rejected_total",
		"Calls refused without calling the downstream.",
		"counter", []string{"name"}}
	famShadowRejected = family{"shadow_rejected_total",
		"Calls a shadow breaker admitted but would have refused.",
		"counter", []string{"name"}}
	famThrottled = family{"throttled_total",
		"Calls the policy's throttle refused while the breaker was closed; a subset of rejected_total, or of shadow_rejected_total for a shadow breaker, which admits them.",
		"counter", []string{"name"}}
	famThrottleProbability = family{"throttle_probability",
		"Probability with which the policy's throttle refuses the breaker's next call; 0 while it throttles nothing, and for a breaker that does not throttle.",
		"gauge", []string{"name"}}
	famFallbacks = family{"fallbacks_total",
		"Results served by a fallback instead of the downstream.",
		"counter", []string{"name"}}
	famProbes = family{"probes_total",
		"Half-open probe verdicts.",
		"counter", []string{"name", "result"}}
	famNotClosedTime = family{"not_closed_seconds_total",
		"Time the breaker has spent open or half-open, the current outage included.",
		"counter", []string{"name"}}
	famOpenDuration = family{"open_duration_seconds",
		"Length of the outage in progress: from the trip that began it, its closes and re-trips included, until the breaker has stayed closed for the policy's max_open_for; 0 while there is none.",
		"gauge", []string{"name"}}
	famOutageTrips = family{"outage_trips",
		"Trips from closed in the outage in progress, the first included; absent while there is none.",
		"gauge", []string{"name"}}
	famOutageProbesFailed = family{"outage_probes_failed",
		"Half-open probes that failed, timeouts included, in the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famOutageProbesPassed = family{"outage_probes_passed",
		"Half-open probes that passed in the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famOutageProbesPassedOnError = family{"outage_probes_passed_on_error",
		"Half-open probes in the outage in progress that answered with an error and passed, as they do while the policy's strict_probes is off; absent while there is none.",
		"gauge", []string{"name"}}
	famOutageRefused = family{"outage_refused",
		"Calls refused with ErrOpen in the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famWindowCalls = family{"window_calls",
		"Counted calls (successes, failures and timeouts) in the sliding window.",
		"gauge", []string{"name"}}
	famWindowRatio = family{"window_error_ratio",
		"Failures divided by counted calls in the sliding window; 0 when it is empty.",
		"gauge", []string{"name"}}
	famWindowSlow = family{"window_slow_calls",
		"Counted calls in the sliding window slower than the policy's slow_call; 0 while that rule is off.",
		"gauge", []string{"name"}}
	famWindowSlowRatio = family{"window_slow_ratio",
		"Slow calls divided by counted calls in the sliding window; 0 when it is empty.",
		"gauge", []string{"name"}}
	famPolicySlowRatio = family{"policy_slow_ratio",
		"The policy's slow ratio: the breaker trips when the window's slow ratio reaches it; 0 when that rule is off.",
		"gauge", []string{"name"}}
	famPolicySlowCall = family{"policy_slow_call_seconds",
		"The policy's slow_call: a call slower than it counts as slow; 0 when the slow rule is off.",
		"gauge", []string{"name"}}
	famPolicyRatio = family{"policy_error_ratio",
		"The policy's error ratio: the breaker trips when the window's error ratio reaches it; 0 when that rule is off.",
		"gauge", []string{"name"}}
	famMode = family{"mode",
		"Current mode of the breaker: 1 for the mode it is in, 0 for the others.",
		"gauge", []string{"name", "mode"}}
	famOpenReason = family{"open_reason",
		"1 while the breaker is open or half-open, labelled with the reason; absent while it is closed.",
		"gauge", []string{"name", "reason"}}
	famTripReason = family{"trip_reason",
		"1 while an outage is in progress, labelled with the rule of the trip that began it, which failed probes and re-trips do not change; absent while there is none.",
		"gauge", []string{"name", "reason"}}
	famTripCalls = family{"trip_window_calls",
		"Counted calls in the sliding window that the rule judged at the trip that began the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famTripFailures = family{"trip_window_failures",
		"Failures, timeouts included, in the window of the trip that began the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famTripTimeouts = family{"trip_window_timeouts",
		"Timeouts in the window of the trip that began the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famTripSlow = family{"trip_window_slow",
		"Calls slower than the policy's slow_call in the window of the trip that began the outage in progress; absent while there is none.",
		"gauge", []string{"name"}}
	famTripRun = family{"trip_run",
		"Consecutive failures at the trip that began the outage in progress, counted while the policy's consecutive_failures is set (0 otherwise); absent while there is none.",
		"gauge", []string{"name"}}
	famTripSlowCall = family{"trip_slow_call_seconds",
		"The policy's slow_call at the trip that began the outage in progress, what trip_window_slow counts calls slower than; 0 if the slow rule was off; absent while there is none.",
		"gauge", []string{"name"}}

	famPolicyInfo = family{"policy_info",
		"The policy document in force: 1, with its origin and version (empty for a policy set by code).",
		"gauge", []string{"origin", "version"}}
	famPolicyApplied = family{"policy_applied_timestamp_seconds",
		"When the policy document in force was applied, in Unix seconds on the group's clock.",
		"gauge", nil}
	famPolicyReloads = family{"policy_reloads_total",
		"Policy documents a followed source delivered, by what became of them.",
		"counter", []string{"result"}}
	famPolicyLastReload = family{"policy_last_reload_info",
		"The last document a followed source delivered: 1, with what became of it and its version; absent until one is delivered.",
		"gauge", []string{"result", "version"}}

	famPolicySourceDown = family{"policy_source_down",
		"1 while the followed source is gone or unreadable and has delivered nothing readable since, with its origin; absent while it delivers. The version in force keeps running.",
		"gauge", []string{"origin"}}
	famPolicyRejected = family{"policy_rejected_info",
		"1 while the last document refused has not been followed by a valid one, with its origin and version; a gone or unreadable source does not end it; absent otherwise.",
		"gauge", []string{"origin", "version"}}

	famGroupBreakers = family{"group_breakers",
		"Breakers the group holds.",
		"gauge", nil}
	famGroupMax = family{"group_max_breakers",
		"The most breakers the group holds; calls for further keys run through its overflow breaker.",
		"gauge", nil}
	famGroupOverflow = family{"group_overflow_calls_total",
		"Calls for keys that had no breaker while the group was full, run through its overflow breaker.",
		"counter", nil}
	famGroupEvicted = family{"group_evicted_total",
		"Breakers dropped as idle, by the state they were in.",
		"counter", []string{"state"}}

	famCandState = family{"candidate_state",
		"State of the breaker's candidate policy, run in shadow: 1 for the state it is in, 0 for the others.",
		"gauge", []string{"name", "state"}}
	famCandTransitions = family{"candidate_transitions_total",
		"State transitions of the breaker's candidate policy, by the rule or event that caused them.",
		"counter", []string{"name", "from", "to", "reason"}}
	famCandWouldRefuse = family{"candidate_would_refuse_total",
		"Calls the breaker admitted that its candidate policy would have refused.",
		"counter", []string{"name"}}
	famCandWouldAdmit = family{"candidate_would_admit_total",
		"Calls the breaker refused that its candidate policy would have admitted.",
		"counter", []string{"name"}}
	famCandDiffs = family{"candidate_differences_total",
		"Times the breaker's candidate policy and its policy in force came to differ in state.",
		"counter", []string{"name"}}

	famLatency = family{"latency_seconds",
		"Latency of the calls: quantiles over the sliding window, the calls cut by a deadline counted as lasting at least what they ran, and a quantile absent while it is unknown; count and sum of the calls that returned, since the breaker began timing calls.",
		"summary", []string{"name"}}
	famCensored = family{"latency_censored_total",
		"Calls cut by a deadline, which the quantiles count as lasting at least what they ran.",
		"counter", []string{"name"}}
	famTimeout = family{"timeout_seconds",
		"The deadline the breaker gives calls now: the policy's timeout, or the adaptive timeout in force; 0 for none.",
		"gauge", []string{"name"}}
)
