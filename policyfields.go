package breaker

import (
	"fmt"
	"math"
	"time"
)

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
	// pair, if set, is a rule between this field and another one that
	// check enforces too (max_open_for at least open_for); see pairRule.
	pair *pairRule
}

// A pairRule is a rule between two fields of a policy, checked at the
// field whose policyField holds it. When a document sets the other field
// and not this one (an edit of open_for that passes the max_open_for it
// inherits), the problem is the other field's, and is reported there in
// place of check's.
type pairRule struct {
	other string // the other field's name
	// problem says what is wrong with the other field's value in p, or
	// returns "" if the rule holds (or the problem is this field's own).
	problem func(p *Policy) string
}

// policyFields lists the fields of Policy in the struct's order, which is
// the order of the encoded form and of the problems Validate reports.
var policyFields = []policyField{{
	name: "window", def: defaultWindow,
	at:    func(p *Policy) any { return &p.Window },
	check: func(p *Policy) string { return positiveDuration(p.Window) },
}, {
	name: "buckets", def: defaultBuckets,
	at: func(p *Policy) any { return &p.Buckets },
	check: func(p *Policy) string {
		switch {
		case p.Buckets < 1 || p.Buckets > maxBuckets:
			return fmt.Sprintf("must be in [1, %d], got %d", maxBuckets, p.Buckets)
		case p.Window > 0 && p.Window%(time.Duration(p.Buckets)*time.Millisecond) != 0:
			return fmt.Sprintf("must divide window (%v) into whole milliseconds, got %d", p.Window, p.Buckets)
		}
		return ""
	},
}, {
	name: "min_requests", def: defaultMinRequests,
	at:    func(p *Policy) any { return &p.MinRequests },
	check: func(p *Policy) string { return notNegative(p.MinRequests, "") },
}, {
	name: "error_ratio", def: defaultErrorRatio,
	at: func(p *Policy) any { return &p.ErrorRatio },
	check: func(p *Policy) string {
		switch {
		case p.ErrorRatio != 0 || math.IsNaN(p.ErrorRatio):
			return ratio(p.ErrorRatio)
		case p.ErrorCount <= 0 && p.SlowCall <= 0 && p.ConsecutiveFailures <= 0 && !p.Throttle.Enabled:
			return "is 0 (off) and no other trip rule is set, nor throttling; set error_ratio in (0, 1], or error_count, slow_call or consecutive_failures, or enable throttle"
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
		case p.SlowCall < 0 || p.SlowCall > maxDuration:
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
	name: "adaptive_timeout.quantile", def: defaultAdaptiveQuantile,
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Quantile },
	check: func(p *Policy) string {
		q := p.AdaptiveTimeout.Quantile
		if (q == 0 && !p.AdaptiveTimeout.Enabled) || (q > 0 && q < 1) {
			return "" // 0: a Policy built field by field, without the timeout
		}
		return fmt.Sprintf("must be in (0, 1), got %v", q)
	},
}, {
	name: "adaptive_timeout.factor", def: defaultAdaptiveFactor,
	at: func(p *Policy) any { return &p.AdaptiveTimeout.Factor },
	check: func(p *Policy) string {
		f := p.AdaptiveTimeout.Factor
		if (f == 0 && !p.AdaptiveTimeout.Enabled) || (f >= 1 && f <= maxAdaptiveFactor) {
			return ""
		}
		return fmt.Sprintf("must be in [1, %d], got %v", maxAdaptiveFactor, f)
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
	name: "open_for", def: defaultOpenFor,
	at:    func(p *Policy) any { return &p.OpenFor },
	check: func(p *Policy) string { return positiveDuration(p.OpenFor) },
}, {
	name: "max_open_for", def: defaultMaxOpenFor,
	at: func(p *Policy) any { return &p.MaxOpenFor },
	check: func(p *Policy) string {
		switch {
		case p.MaxOpenFor < p.OpenFor || p.MaxOpenFor <= 0:
			return fmt.Sprintf("must be at least open_for (%v), got %v", p.OpenFor, p.MaxOpenFor)
		case p.MaxOpenFor > maxDuration:
			return atMostMaxDuration(p.MaxOpenFor)
		}
		return ""
	},
	pair: &pairRule{other: "open_for", problem: func(p *Policy) string {
		if p.MaxOpenFor <= 0 || p.MaxOpenFor >= p.OpenFor || positiveDuration(p.OpenFor) != "" {
			return "" // max_open_for's own problem, or open_for's
		}
		return fmt.Sprintf("%v is above max_open_for (%v); lower it, or set max_open_for to at least %v", p.OpenFor, p.MaxOpenFor, p.OpenFor)
	}},
}, {
	name: "jitter", def: defaultJitter,
	at: func(p *Policy) any { return &p.Jitter },
	check: func(p *Policy) string {
		if math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter >= 1 {
			return fmt.Sprintf("must be in [0, 1), got %v", p.Jitter)
		}
		return ""
	},
}, {
	name: "probes", def: defaultProbes,
	at: func(p *Policy) any { return &p.Probes },
	check: func(p *Policy) string {
		if p.Probes < 1 || p.Probes > maxProbes {
			return fmt.Sprintf("must be in [1, %d], got %d", maxProbes, p.Probes)
		}
		return ""
	},
}, {
	name: "warmup", def: defaultWarmup,
	at:    func(p *Policy) any { return &p.Warmup },
	check: func(p *Policy) string { return optionalDuration(p.Warmup, "turns warmup off") },
}, {
	name: "strict_probes", def: false,
	at: func(p *Policy) any { return &p.StrictProbes },
}, {
	name: "throttle.enabled", def: false,
	at: func(p *Policy) any { return &p.Throttle.Enabled },
}, {
	name: "throttle.k", def: defaultThrottleK,
	at: func(p *Policy) any { return &p.Throttle.K },
	check: func(p *Policy) string {
		k := p.Throttle.K
		if (k == 0 && !p.Throttle.Enabled) || (k >= 1 && k <= maxThrottleK) {
			return "" // below 1 it throttles a downstream that answers every call
		}
		return fmt.Sprintf("must be in [1, %d], got %v", maxThrottleK, k)
	},
}, {
	name: "throttle.min_requests", def: defaultThrottleMinRequests,
	at: func(p *Policy) any { return &p.Throttle.MinRequests },
	check: func(p *Policy) string {
		n := p.Throttle.MinRequests
		if (n == 0 && !p.Throttle.Enabled) || (n >= 1 && n <= maxThrottleMinRequests) {
			return ""
		}
		return fmt.Sprintf("must be in [1, %d], got %d", maxThrottleMinRequests, n)
	},
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
	if d > maxDuration {
		return fmt.Sprintf("must be at most %v, got %v", maxDuration, d)
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
