// Package check judges a group's breaker policies against the traffic
// they will see, before they ship.
//
// [Group] takes a policy document ([breaker.GroupPolicy]) and a traffic
// description per key ([Workload]: calls per second, p50/p99 latency,
// baseline error ratio, the client's deadline, the network round trip)
// and returns findings, each with a severity, the key, a message and the
// numbers behind it:
//
//   - the window can never hold MinRequests calls at the key's rate, so
//     the breaker can never trip (for per-target keys, at the rate per
//     target), judged from the distribution of the window's count; or it
//     trips only when a burst of calls fills the window, and how long
//     that takes;
//   - the expected false trips a day at the baseline error ratio,
//     through the breaker's cooldowns and the refill of its window after
//     a close;
//   - how long the breaker takes to open when every call fails, and
//     during a given fault (by default 40% errors and 20% timeouts), as
//     a median and a 90th percentile;
//   - a timeout below 1.5 × p99, not below the client's deadline, or
//     below 2 × RTT; no timeout at all;
//   - half-open probes that are more than a tenth of a cooldown's calls,
//     and the chance that every probe passes on a half-recovered or a
//     healthy downstream;
//   - a cooldown that never grows or has no practical cap, and no jitter
//     where many instances share the policy.
//
// The models follow the breaker's own rules (the bucketed window, the
// MinRequests gate, evaluation after each failure, the cooldowns, the
// all-must-pass probes); docs/checking-policies.md states each formula.
// Where a formula cannot be trusted (a window of few calls, a window
// refilled after a close, traffic with a daily profile, error bursts or
// batched arrivals) the checker runs the real breaker on a virtual clock
// and reports the estimate with its interval; each finding says which
// ([Finding].Source). [Trace] runs the real breaker over a recorded
// trace instead, with no model at all. The agreement suite holds every
// verdict and number against the real breaker.
//
// A workload can be written by hand ([ParseWorkload]) or measured from a
// running service's snapshot ([FromSnapshot]). The command
// cmd/breaker-check wraps all of this for CI: it prints the findings as
// text or JSON, exits non-zero on an Error finding, and with -suggest
// replays candidate policies around the current one.
package check
