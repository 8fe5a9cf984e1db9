package breaker

import (
	"sync"

	"github.com/govkit/breaker/internal/latency"
)

// rules is a validated policy compiled for the hot path. Immutable once
// built, and shared by the breakers with the same policy.
type rules struct {
	p          Policy
	width      int64 // bucket width, ns
	buckets    int64
	minReq     uint64
	slowCall   int64
	consec     uint64 // at most maxRun
	timeout    int64
	openFor    int64
	maxOpenFor int64
	warmup     int64
	probes     uint64
	throttle   bool   // Policy.Throttle.Enabled
	thrMin     uint64 // Policy.Throttle.MinRequests
	// The window's gates are set for one *tripRules: never changed.
	trip tripRules
	// timed: a call's start time is needed (deadline, slow-call rule,
	// adaptive timeout), and a latency histogram kept.
	timed bool
	// adaptive: the deadline is the breaker's own, not timeout.
	adaptive bool
	// lat is the breaker's histogram, on its own copy (own); nil if shared.
	lat *timing
	// carry is what earlier histograms counted, for a later one to continue.
	carry latency.Totals
	// thr is the throttle of the breaker that applies these rules, on its
	// own copy of rules that throttle, or that follow rules that did
	// (see withThrottle); nil in the shared rules.
	thr *throttle
}

// compiled interns the rules of the policies breakers are created with,
// at most maxCompiled of them, so that it cannot grow without end.
var compiled struct {
	sync.Mutex
	m map[Policy]*rules
}

const maxCompiled = 64

// compileShared is compile through the intern table.
func compileShared(p Policy) (*rules, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if r, ok := compiled.m[p]; ok {
		return r, nil
	}
	r, err := compile(p)
	if err != nil {
		return nil, err
	}
	if compiled.m == nil {
		compiled.m = make(map[Policy]*rules)
	}
	if len(compiled.m) < maxCompiled { // an invalid policy never gets here
		compiled.m[p] = r
	}
	return r, nil
}

func compile(p Policy) (*rules, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &rules{
		p:          p,
		width:      int64(p.Window) / int64(p.Buckets),
		buckets:    int64(p.Buckets),
		minReq:     uint64(p.MinRequests),
		slowCall:   int64(p.SlowCall),
		consec:     min(uint64(p.ConsecutiveFailures), maxRun), // the run is counted to maxRun
		timeout:    staticTimeout(p),
		openFor:    int64(p.OpenFor),
		maxOpenFor: int64(p.MaxOpenFor),
		warmup:     int64(p.Warmup),
		probes:     uint64(p.Probes),
		throttle:   p.Throttle.Enabled,
		thrMin:     uint64(p.Throttle.MinRequests),
		trip: tripRules{
			MinRequests: uint64(p.MinRequests),
			ErrorRatio:  p.ErrorRatio,
			ErrorCount:  uint64(p.ErrorCount),
			SlowRule:    p.SlowCall > 0,
			SlowRatio:   p.SlowRatio,
		},
		timed:    p.CallTimeout > 0 || p.SlowCall > 0 || p.AdaptiveTimeout.Enabled,
		adaptive: p.AdaptiveTimeout.Enabled,
	}, nil
}

// staticTimeout is the deadline of every call under p, or 0 (none under
// an adaptive timeout).
func staticTimeout(p Policy) int64 {
	if p.AdaptiveTimeout.Enabled {
		return 0
	}
	return int64(p.CallTimeout)
}

// own returns a copy of the timed rules r carrying the breaker's latency
// histogram: prev's, or a new one (keeping prev's timeout) if prev has
// none or one for another window (docs/internals.md, "The latency
// histogram").
func (r *rules) own(prev *rules, now int64) *rules {
	c := *r
	var old *timing
	if prev != nil {
		old = prev.lat
	}
	if old != nil && old.Fits(r.width, r.buckets) {
		c.lat = old
		return &c
	}
	var cur int64
	var base latency.Totals
	if old != nil {
		cur = old.timeout.Load()
		base = old.Totals()
	} else if prev != nil {
		base = prev.carry
	}
	c.lat = newTiming(now, r, cur, base)
	return &c
}

// carried returns r, or, if r keeps no histogram and prev's counted
// calls, a copy of r that carries their totals.
func (r *rules) carried(prev *rules) *rules {
	if r.lat != nil || prev == nil {
		return r
	}
	t := prev.carry
	if prev.lat != nil {
		t = prev.lat.Totals()
	}
	if t == (latency.Totals{}) {
		return r
	}
	c := *r
	c.carry = t
	return &c
}
