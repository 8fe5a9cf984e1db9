package breaker

import "time"

// Defaults of [Policy]. They are the values a production team arrived at by
// replaying a fault (40% errors plus 20% slow calls in front of one service)
// against a three-tier call chain; the README explains each one.
const (
	// DefaultWindow is the statistics window. Five seconds reacts within
	// one client timeout while holding enough calls to judge a ratio.
	DefaultWindow = 5 * time.Second
	// DefaultBuckets splits the window into 500 ms slots, so a call leaves
	// the window at most 500 ms later than its exact age says.
	DefaultBuckets = 10
	// DefaultMinRequests is the sample size below which the window's
	// rules do not trip (a run of ConsecutiveFailures still does): a
	// 5 QPS reconciliation job never fills a 5 s window, and the breaker
	// should rather miss a fault there than open on three errors.
	DefaultMinRequests = 20
	// DefaultErrorRatio sits between the load test's 40% (the downstream
	// coped) and 60% (worker pools full within 10 s).
	DefaultErrorRatio = 0.5
	// DefaultOpenFor is the first cooldown.
	DefaultOpenFor = 30 * time.Second
	// DefaultMaxOpenFor caps the doubling cooldown (30 s, 60 s, 120 s).
	DefaultMaxOpenFor = 120 * time.Second
	// DefaultJitter spreads cooldowns by ±20% so the instances of a fleet
	// do not probe a recovering downstream in the same instant.
	DefaultJitter = 0.2
	// DefaultProbes is the fixed number of half-open probes; all must pass.
	DefaultProbes = 3
	// DefaultWarmup is how long a cold target's outcomes are not counted.
	DefaultWarmup = 60 * time.Second
	// DefaultAdaptiveQuantile and DefaultAdaptiveFactor set the adaptive
	// timeout at twice the 99th percentile of the latencies, within the
	// 1.5 to 3 times P99 that keeps a timeout from cutting healthy calls
	// while still ending hung ones.
	DefaultAdaptiveQuantile = 0.99
	DefaultAdaptiveFactor   = 2.0
	// AdaptiveInterval is how often, on the breaker's clock, the adaptive
	// timeout is recomputed: often enough to follow a drift within a
	// minute, seldom enough that one bad window does not swing it.
	AdaptiveInterval = 30 * time.Second
)

// Limits that keep a policy's cost bounded. They are far beyond any value
// the defaults suggest; a policy outside them is refused, not clamped.
const (
	// MaxBuckets bounds the window's memory (24 bytes a bucket) and the
	// cost of summing it on every failure.
	MaxBuckets = 1000
	// MaxProbes bounds the half-open admission count. A half-open state
	// that admits more real calls than this is no longer probing.
	MaxProbes = 100
	// MaxDuration bounds every duration of a policy (window, cooldowns,
	// timeouts, warmup): a breaker open for more than a day is an outage
	// to be handled by people, and the bound keeps every sum of times far
	// from overflowing.
	MaxDuration = 24 * time.Hour
	// MaxAdaptiveFactor bounds AdaptiveTimeout.Factor: a deadline ten
	// times a high quantile no longer ends anything.
	MaxAdaptiveFactor = 10
)

// Policy is the set of numbers that decides when a breaker opens and how it
// recovers. It is a plain value: copy it, compare it, store it as JSON.
// [DefaultPolicy] returns the recommended values; start from it and change
// what you need. A Policy is checked by [Policy.Validate] wherever it is
// accepted, and an invalid one is refused as a whole, never corrected.
//
// The JSON form uses snake_case names and duration strings ("5s", "1m30s").
// Decoding is strict: an unknown field, a field named twice, a value of
// the wrong type and an invalid result are errors that name the field, and
// an error quotes at most a short prefix of a bad value. Decoding onto a
// Policy that already holds values (such as DefaultPolicy()) changes only
// the fields the document names, so a document may be partial.
type Policy struct {
	// Window is the length of the sliding statistics window. Default 5s.
	Window time.Duration `json:"window"`
	// Buckets is the number of slots the window is divided into; Window
	// divided by Buckets must be a whole number of milliseconds.
	// Default 10 (500 ms each).
	Buckets int `json:"buckets"`
	// MinRequests is the number of counted calls the window must hold
	// before the window's trip rules (ErrorRatio, ErrorCount, SlowRatio)
	// are evaluated; ConsecutiveFailures does not wait for it. Default 20.
	MinRequests int `json:"min_requests"`
	// ErrorRatio trips the breaker when failures (timeouts included)
	// divided by counted calls reaches it. In (0, 1], or 0 to turn the
	// ratio rule off, which is allowed only when another trip rule
	// (ErrorCount, SlowCall or ConsecutiveFailures) is set. Default 0.5.
	ErrorRatio float64 `json:"error_ratio"`
	// ErrorCount, when positive, also trips the breaker when the window
	// holds at least this many failures. Default 0 (off).
	ErrorCount int `json:"error_count"`
	// SlowCall, when positive, marks a counted call that took longer than
	// this as slow. Default 0 (off).
	SlowCall time.Duration `json:"slow_call"`
	// SlowRatio trips the breaker when slow calls divided by counted calls
	// reaches it. Required, in (0, 1], when SlowCall is set; must be 0
	// otherwise. Default 0.
	SlowRatio float64 `json:"slow_ratio"`
	// ConsecutiveFailures, when positive, also trips the breaker after this
	// many failures in a row with no success between them, however few
	// calls the window holds (MinRequests does not apply to it): it is the
	// rule for methods with too little traffic to fill the window.
	// Default 0 (off).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// CallTimeout, when positive, is a deadline added to each call's
	// context; a call that takes longer is a timeout even if it returned
	// nil. Under AdaptiveTimeout it is only where the adaptive deadline
	// starts, within [AdaptiveTimeout.Min, AdaptiveTimeout.Max]. It is not
	// how long the breaker stays open (that is OpenFor). Default 0 (no
	// deadline is added).
	CallTimeout time.Duration `json:"call_timeout"`
	// AdaptiveTimeout makes the per-call deadline follow the calls'
	// latency when it is Enabled. Default off.
	AdaptiveTimeout AdaptiveTimeout `json:"adaptive_timeout"`
	// OpenFor is the first cooldown: how long the breaker stays open before
	// it lets probes through. Default 30s.
	OpenFor time.Duration `json:"open_for"`
	// MaxOpenFor caps the cooldown, which doubles on every reopen before the
	// breaker has been stable, and is also how long the breaker must stay
	// closed to count as stable again. At least OpenFor. Default 2m.
	MaxOpenFor time.Duration `json:"max_open_for"`
	// Jitter scales each cooldown by a factor drawn uniformly from
	// [1-Jitter, 1+Jitter]. In [0, 1). Default 0.2.
	Jitter float64 `json:"jitter"`
	// Probes is the number of real calls admitted in the half-open state.
	// All of them must pass for the breaker to close. In [1, 100].
	// Default 3.
	Probes int `json:"probes"`
	// Warmup is how long the outcomes of calls to a cold target are left
	// out of the window (see [Breaker.MarkCold] and [WithInstanceStart]).
	// Default 1m.
	Warmup time.Duration `json:"warmup"`
	// StrictProbes makes a probe that ends in a failure (an error that is
	// not a timeout) fail the half-open episode. By default such a probe
	// passes: the downstream answered, so the path to it works; only a
	// timeout proves it has not recovered. A probe whose function panics
	// counts as a failure: by default it frees its slot without a verdict
	// (it says nothing of the downstream's answers); with StrictProbes it
	// fails the episode, like any other failure.
	StrictProbes bool `json:"strict_probes"`
}

// AdaptiveTimeout is the adaptive per-call deadline of a [Policy]: every
// [AdaptiveInterval] of the breaker's clock it becomes Quantile of the
// window's latency times Factor plus Base, kept within [Min, Max], if the
// window holds at least MinRequests completed calls (see the README's
// "Latency and timeouts"). Until then the deadline is Policy.CallTimeout,
// or Max when CallTimeout is 0. A call cut by a deadline counts as lasting
// at least what it ran; when more than 1-Quantile of the calls are cut,
// the quantile is unknown and the deadline stays, so hung calls never
// raise it. The fields apply only when Enabled is set; otherwise they need
// only be in range (0 is). It is a plain, comparable value, as Policy is.
type AdaptiveTimeout struct {
	// Enabled turns the adaptive timeout on. Default false.
	Enabled bool `json:"enabled"`
	// Quantile is the quantile of the window's latencies the adaptive
	// timeout follows. In (0, 1) when Enabled. Default 0.99.
	Quantile float64 `json:"quantile"`
	// Factor multiplies that quantile. In [1, 10] when Enabled: below 1
	// the deadline would cut more than 1-Quantile of the calls, which
	// leaves the quantile unknown, and it would never move again. At 1
	// nothing is measured above the deadline, so it follows the latency
	// down but never up; a factor of 1.5 to 3 leaves it room to follow a
	// rise. Default 2.
	Factor float64 `json:"factor"`
	// Base is added to the adaptive timeout, such as the network round
	// trip the latencies do not show. Default 0.
	Base time.Duration `json:"base"`
	// Min is the least the adaptive timeout may be (2 × the network round
	// trip is a good floor). Default 0.
	Min time.Duration `json:"min"`
	// Max is the most the adaptive timeout may be, and its value until it
	// has adapted when Policy.CallTimeout is 0. Required, at least Min,
	// when Enabled. Default 0.
	Max time.Duration `json:"max"`
}

// DefaultPolicy returns the policy with every field at its default.
func DefaultPolicy() Policy { return defaultPolicy }
