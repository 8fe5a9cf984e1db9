// Package breaker is a circuit breaker for the calls a Go service makes to
// its downstreams.
//
// When a downstream method starts failing or hanging, the callers waiting on
// it hold goroutines, connections and worker slots, and the slowness spreads
// up the call chain until the caller's own callers time out too. A breaker
// in front of each downstream method notices the failures, opens, and fails
// calls at once instead, so the caller stays healthy; it then lets a few
// real calls through to learn when the downstream has recovered.
//
// # Using it
//
// Create one [Breaker] per downstream method and wrap each call:
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
// [Call] does the same for a function that returns a value, and
// [Breaker.Allow] splits a call into admission and report for streams.
//
// # The state machine
//
// A breaker is Closed, Open or HalfOpen (see [State]). Closed, the outcome
// of every call goes into a sliding window (Policy.Window, in
// Policy.Buckets slots). After a failure, if the window holds at least
// Policy.MinRequests counted calls and a trip rule holds, it opens: the
// failure ratio reaches Policy.ErrorRatio, or one of the optional rules
// (Policy.ErrorCount, Policy.SlowCall with Policy.SlowRatio,
// Policy.ConsecutiveFailures). Open, it refuses calls with [ErrOpen] for a
// cooldown. Then it admits the next Policy.Probes calls as probes
// ([IsProbe] is true in their context): all must pass to close it, on an
// empty window; one failure reopens it with a doubled cooldown, up to
// Policy.MaxOpenFor, with jitter. A result from an earlier episode never
// changes the current one.
//
// # Outcomes
//
// Each admitted call ends as one [Outcome]. A nil error is a success, a
// timeout (context.DeadlineExceeded, a net.Error timeout, a refused or
// reset connection, or a call longer than Policy.CallTimeout) is a failure of
// its own kind, any other error a failure. The caller's own cancellation,
// errors wrapped with [Ignore], and another breaker's refusal that the
// function passes on (nested breakers) say nothing about the downstream
// and are not counted. A [Classifier] can replace or extend the mapping. A
// probe passes on any answer, even an error (the downstream answered), and
// fails on a timeout, unless Policy.StrictProbes is set.
//
// # Warmup
//
// A target that has just started often fails while its caches fill. Its
// outcomes can be left out of the window for Policy.Warmup: per breaker
// with [Breaker.MarkCold] (right after [New] for a new instance), for a
// group's new per-target breakers with [GroupConfig.ColdTargets], per call
// with [WithInstanceStart].
//
// # Latency and timeouts
//
// A breaker that times its calls (Policy.CallTimeout, Policy.SlowCall or
// Policy.AdaptiveTimeout) keeps a histogram of their latency over its
// window; [Breaker.Latency] reads its quantiles. Calls that time out are
// censored: counted apart, and in the quantiles only as lasting at least
// what they ran. With
// Policy.AdaptiveTimeout the deadline added to each call follows the
// latency, recomputed every [AdaptiveInterval] as a quantile times a
// factor, within bounds; [Breaker.Timeout] is the deadline in force, and
// every change is an [Event] with Reason [ReasonTimeoutAdapted].
//
// # Operating it
//
// Every transition calls the [OnTransition] hooks with an [Event] that says
// what happened and why, with the window that caused it. [Breaker.Counters]
// returns monotonic counts. [Breaker.SetMode] forces a breaker open or
// closed, or runs it in [ModeShadow], where it reports what it would do
// without refusing anything; [Breaker.Reset] starts it over;
// [Breaker.SetPolicy] changes its numbers, refusing an invalid policy as a
// whole.
//
// # Policy documents
//
// A group's policy document ([GroupPolicy]) is set by code
// ([Group.SetPolicies], [Group.LoadPolicies]) or by one holder at a time
// ([Group.HoldPolicies]), each version applied whole or refused whole;
// [Group.PolicyLabel] says which version is in force, from where and
// since when. Package github.com/govkit/breaker/live holds a group's
// policies to follow a document in a file or a store while the service
// runs, with a record of every version. A document may carry a candidate
// ([GroupPolicy.Candidate]) that the breakers run in shadow on real
// traffic, reporting where it decides differently to
// [Group.SubscribeCandidate].
//
// # Time and testing
//
// A breaker reads time only from its [Clock] and has no goroutines or
// timers: every time-dependent change is made lazily when a call arrives.
// Give it *clock.Mock from github.com/benbjohnson/clock with [WithClock] and
// a fixed jitter with [WithRand], and a test can walk it through every state
// without sleeping.
//
// # Cost
//
// In the Closed state Do takes no lock and allocates nothing: one clock
// read, a few atomic loads and one atomic add. The counters spread over
// per-goroutine stripes when goroutines on different cores collide, so a
// breaker shared by every request does not bounce one cache line between
// cores. See BENCHMARKS.md.
package breaker
