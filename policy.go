package breaker

import (
	"fmt"
	"math"
	"time"
)

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

// defaultPolicy is made from policyFields once. A default of the wrong
// type, or a field of a type the encoder and decoder do not handle, is a
// mistake in the list; it panics here, when the package is initialised,
// so that no program or test runs with it.
var defaultPolicy = func() Policy {
	var p Policy
	for _, f := range policyFields {
		switch dst := f.at(&p).(type) {
		case *time.Duration:
			*dst = defaultOf[time.Duration](f)
		case *int:
			*dst = defaultOf[int](f)
		case *float64:
			*dst = defaultOf[float64](f)
		case *bool:
			*dst = defaultOf[bool](f)
		default:
			panic(fmt.Sprintf("breaker: policy field %s is of type %T, which policyField does not handle", f.name, dst))
		}
	}
	return p
}()

func defaultOf[T any](f policyField) T {
	d, ok := f.def.(T)
	if !ok {
		panic(fmt.Sprintf("breaker: the default of policy field %s is of type %T, want %T", f.name, f.def, d))
	}
	return d
}

// policyField describes one field of [Policy]. policyFields, the list of
// them, is what the encoder, the decoder, the validator and DefaultPolicy
// iterate over, so that a new field is written in two places (the struct,
// where it is documented, and the list) instead of six; a test checks by
// reflection that the two agree.
type policyField struct {
	// name is the field's JSON name, which problems use too; a field of
	// a nested object (AdaptiveTimeout) is named by its path,
	// "adaptive_timeout.max".
	name string
	// at returns a pointer to the field in p: a *time.Duration, *int,
	// *float64 or *bool, which decides how the field is encoded and
	// decoded (a duration as a string such as "5s").
	at func(p *Policy) any
	// def is the field's default, of the field's type.
	def any
	// check says what is wrong with the field's value in p, or returns "".
	// It may read other fields (max_open_for must be at least open_for),
	// but it reports only on its own. nil means every value is valid.
	check func(p *Policy) string
}

// policyFields lists the fields of Policy in the struct's order, which is
// the order of the encoded form and of the problems Validate reports.
var policyFields = []policyField{{
	name: "window", def: DefaultWindow,
	at:    func(p *Policy) any { return &p.Window },
	check: func(p *Policy) string { return positiveDuration(p.Window) },
}, {
	name: "buckets", def: DefaultBuckets,
	at: func(p *Policy) any { return &p.Buckets },
	check: func(p *Policy) string {
		switch {
		case p.Buckets < 1 || p.Buckets > MaxBuckets:
			return fmt.Sprintf("must be in [1, %d], got %d", MaxBuckets, p.Buckets)
		case p.Window > 0 && p.Window%(time.Duration(p.Buckets)*time.Millisecond) != 0:
			return fmt.Sprintf("must divide window (%v) into whole milliseconds, got %d", p.Window, p.Buckets)
		}
		return ""
	},
}, {
	name: "min_requests", def: DefaultMinRequests,
	at:    func(p *Policy) any { return &p.MinRequests },
	check: func(p *Policy) string { return notNegative(p.MinRequests, "") },
}, {
	name: "error_ratio", def: DefaultErrorRatio,
	at: func(p *Policy) any { return &p.ErrorRatio },
	check: func(p *Policy) string {
		switch {
		case p.ErrorRatio != 0 || math.IsNaN(p.ErrorRatio):
			return ratio(p.ErrorRatio)
		case p.ErrorCount <= 0 && p.SlowCall <= 0 && p.ConsecutiveFailures <= 0:
			return "is 0 (off) and no other trip rule is set; set error_ratio in (0, 1], or error_count, slow_call or consecutive_failures"
		}
		return ""
	},
}, {
	name: "error_count", def: 0,
	at:    func(p *Policy) any { return &p.ErrorCount },
	check: func(p *Policy) string { return notNegative(p.ErrorCount, "turns the rule off") },
}, {
	name: "slow_call", def: time.Duration(0),
	at:    func(p *Policy) any { return &p.SlowCall },
	check: func(p *Policy) string { return optionalDuration(p.SlowCall, "turns the rule off") },
}, {
	name: "slow_ratio", def: 0.0,
	at: func(p *Policy) any { return &p.SlowRatio },
	check: func(p *Policy) string {
		switch {
		case p.SlowCall < 0 || p.SlowCall > MaxDuration:
			return "" // slow_call's own problem says it all
		case p.SlowCall > 0:
			return ratio(p.SlowRatio)
		case p.SlowRatio != 0:
			return fmt.Sprintf("is set to %v but slow_call is 0; set slow_call to use the slow-call rule", p.SlowRatio)
		}
		return ""
	},
}, {
	name: "consecutive_failures", def: 0,
	at:    func(p *Policy) any { return &p.ConsecutiveFailures },
	check: func(p *Policy) string { return notNegative(p.ConsecutiveFailures, "turns the rule off") },
}, {
	name: "call_timeout", def: time.Duration(0),
	at: func(p *Policy) any { return &p.CallTimeout },
	check: func(p *Policy) string {
		a := &p.AdaptiveTimeout
		if problem := optionalDuration(p.CallTimeout, "adds no deadline"); problem != "" || !a.Enabled {
			return problem
		}
		if p.CallTimeout > 0 && a.Max > 0 && (p.CallTimeout < a.Min || p.CallTimeout > a.Max) {
			return fmt.Sprintf("is where the adaptive timeout starts and must be in [adaptive_timeout.min, adaptive_timeout.max] ([%v, %v]), got %v", a.Min, a.Max, p.CallTimeout)
		}
		return ""
	},
}, {
	name: "adaptive_timeout.enabled", def: false,
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Enabled },
}, {
	name: "adaptive_timeout.quantile", def: DefaultAdaptiveQuantile,
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Quantile },
	check: func(p *Policy) string {
		q := p.AdaptiveTimeout.Quantile
		if (q == 0 && !p.AdaptiveTimeout.Enabled) || (q > 0 && q < 1) {
			return "" // 0: a Policy built field by field, without the timeout
		}
		return fmt.Sprintf("must be in (0, 1), got %v", q)
	},
}, {
	name: "adaptive_timeout.factor", def: DefaultAdaptiveFactor,
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Factor },
	check: func(p *Policy) string {
		f := p.AdaptiveTimeout.Factor
		if (f == 0 && !p.AdaptiveTimeout.Enabled) || (f >= 1 && f <= MaxAdaptiveFactor) {
			return ""
		}
		return fmt.Sprintf("must be in [1, %d], got %v", MaxAdaptiveFactor, f)
	},
}, {
	name: "adaptive_timeout.base", def: time.Duration(0),
	at:    func(p *Policy) any { return &p.AdaptiveTimeout.Base },
	check: func(p *Policy) string { return optionalDuration(p.AdaptiveTimeout.Base, "adds nothing") },
}, {
	name: "adaptive_timeout.min", def: time.Duration(0),
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Min },
	check: func(p *Policy) string {
		a := &p.AdaptiveTimeout
		if problem := optionalDuration(a.Min, "sets no floor"); problem != "" {
			return problem
		}
		if a.Enabled && a.Max > 0 && a.Min > a.Max {
			return fmt.Sprintf("must be at most adaptive_timeout.max (%v), got %v", a.Max, a.Min)
		}
		return ""
	},
}, {
	name: "adaptive_timeout.max", def: time.Duration(0),
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Max },
	check: func(p *Policy) string {
		a := &p.AdaptiveTimeout
		if a.Enabled && a.Max == 0 {
			return "must be positive when adaptive_timeout.enabled is true, got 0s"
		}
		return optionalDuration(a.Max, "is allowed only with adaptive_timeout.enabled false")
	},
}, {
	name: "open_for", def: DefaultOpenFor,
	at:    func(p *Policy) any { return &p.OpenFor },
	check: func(p *Policy) string { return positiveDuration(p.OpenFor) },
}, {
	name: "max_open_for", def: DefaultMaxOpenFor,
	at: func(p *Policy) any { return &p.MaxOpenFor },
	check: func(p *Policy) string {
		switch {
		case p.MaxOpenFor < p.OpenFor || p.MaxOpenFor <= 0:
			return fmt.Sprintf("must be at least open_for (%v), got %v", p.OpenFor, p.MaxOpenFor)
		case p.MaxOpenFor > MaxDuration:
			return atMostMaxDuration(p.MaxOpenFor)
		}
		return ""
	},
}, {
	name: "jitter", def: DefaultJitter,
	at: func(p *Policy) any { return &p.Jitter },
	check: func(p *Policy) string {
		if math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter >= 1 {
			return fmt.Sprintf("must be in [0, 1), got %v", p.Jitter)
		}
		return ""
	},
}, {
	name: "probes", def: DefaultProbes,
	at: func(p *Policy) any { return &p.Probes },
	check: func(p *Policy) string {
		if p.Probes < 1 || p.Probes > MaxProbes {
			return fmt.Sprintf("must be in [1, %d], got %d", MaxProbes, p.Probes)
		}
		return ""
	},
}, {
	name: "warmup", def: DefaultWarmup,
	at:    func(p *Policy) any { return &p.Warmup },
	check: func(p *Policy) string { return optionalDuration(p.Warmup, "turns warmup off") },
}, {
	name: "strict_probes", def: false,
	at: func(p *Policy) any { return &p.StrictProbes },
}}

// positiveDuration is the problem of a duration that must be in
// (0, MaxDuration].
func positiveDuration(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be positive, got %v", d)
	}
	return atMostMaxDuration(d)
}

// optionalDuration is the problem of a duration that must be in
// [0, MaxDuration], where zero says what 0 does.
func optionalDuration(d time.Duration, zero string) string {
	if d < 0 {
		return fmt.Sprintf("must not be negative (0 %s), got %v", zero, d)
	}
	return atMostMaxDuration(d)
}

func atMostMaxDuration(d time.Duration) string {
	if d > MaxDuration {
		return fmt.Sprintf("must be at most %v, got %v", MaxDuration, d)
	}
	return ""
}

// notNegative is the problem of a count that must not be negative, where
// zero, if not empty, says what 0 does.
func notNegative(n int, zero string) string {
	switch {
	case n >= 0:
		return ""
	case zero == "":
		return fmt.Sprintf("must not be negative, got %d", n)
	}
	return fmt.Sprintf("must not be negative (0 %s), got %d", zero, n)
}

// ratio is the problem of a ratio that must be in (0, 1].
func ratio(r float64) string {
	if math.IsNaN(r) || r <= 0 || r > 1 {
		return fmt.Sprintf("must be in (0, 1], got %v", r)
	}
	return ""
}
