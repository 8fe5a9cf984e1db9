// Package breaker is a circuit breaker for the calls a Go service makes to
// its downstreams.
//
// When a downstream method starts failing or hanging, its callers pile up
// goroutines and connections waiting on it, and the slowness spreads up the
// call chain. A breaker in front of each downstream method notices the
// failures, opens, and fails calls at once instead; it then lets a few real
// calls through to learn when the downstream has recovered.
//
// Create one [Breaker] per downstream method, or a [Group] that makes one
// per key, and wrap each call:
//
//	b, err := breaker.New("inventory.GetStock", breaker.DefaultPolicy())
//	...
//	err = b.Do(ctx, func(ctx context.Context) error {
//		return inventory.GetStock(ctx, sku)
//	})
//	if errors.Is(err, breaker.ErrOpen) {
//		// fail fast, serve a fallback
//	}
//
// [Call] does the same for a function that returns a value, [Fallback]
// adds a fallback, and [Breaker.Allow] splits a call into admission and
// report, for streams.
//
// A breaker is Closed, Open or HalfOpen ([State]). Closed, every call's
// [Outcome] goes into a sliding window; after a failure, once the window
// holds Policy.MinRequests counted calls, a trip rule (Policy.ErrorRatio
// and the optional ones) opens it. Open, it refuses calls with [ErrOpen]
// for a cooldown; then its next Policy.Probes calls are probes ([IsProbe]),
// which must all pass to close it; a failed one reopens it with a doubled,
// jittered cooldown. Timeouts count as failures, the caller's own
// cancellation and [Ignore]d errors do not, and a [Classifier] can change
// the mapping. Outcomes of a cold target are left out for Policy.Warmup
// ([Breaker.MarkCold], [WithInstanceStart]). Policy.AdaptiveTimeout makes
// the per-call deadline follow the measured latency ([Breaker.Latency]),
// and Policy.Throttle lets a closed breaker refuse a share of its calls
// while too few succeed ([Throttle], [ReasonThrottled]).
//
// Every transition is an [Event] for the [OnTransition] hooks and
// [Group.Subscribe]; [Breaker.Status] and [Breaker.Counters] report the
// rest. A breaker reads time only from its [Clock] and starts no goroutine
// or timer, so a test drives it through every state with a mock clock
// ([WithClock], [WithRand]). In the Closed state Do takes no lock and
// allocates nothing.
//
// A group's policies are a [GroupPolicy] document, set by code or followed
// from a file or etcd by package github.com/govkit/breaker/live; the
// document may carry a candidate policy that runs in shadow beside the
// active one. The metrics, status page and alerting live in the packages
// breakerprom, breakerotel and ops, the transports in breakerhttp and
// breakergrpc. docs/behaviour.md in the repository is the full contract.
package breaker
