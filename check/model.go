package check

import (
	"math"
	"time"

	"github.com/govkit/breaker"
)

// The models behind the findings. Each one follows what the breaker does
// (docs/behaviour.md), not an idealised breaker: the window is the
// bucketed one, whose sum covers the buckets that overlap the last Window
// (between Window-Window/Buckets and Window of calls), the trip rules are
// evaluated after each failure or slow call, MinRequests gates the window's
// rules but not ConsecutiveFailures, and a half-open probe fails only on a
// timeout unless StrictProbes is set. docs/checking-policies.md states every
// formula.

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// latency is a lognormal fit of a key's latency from its median and 99th
// percentile: ln(latency) is normal with mean ln(p50) and standard
// deviation ln(p99/p50)/z99. A key with no latency given has ok false, and
// every share of slow calls is taken as 0.
type latency struct {
	ok        bool
	mu, sigma float64
}

func fitLatency(t Traffic) latency {
	if t.P50 <= 0 || t.P99 <= 0 {
		return latency{}
	}
	l := latency{ok: true, mu: math.Log(t.P50.Seconds())}
	if t.P99 > t.P50 {
		l.sigma = math.Log(float64(t.P99)/float64(t.P50)) / z99
	}
	return l
}

// quantile is the latency below which a share q of calls fall; 0 when
// the key has no latency given.
func (l latency) quantile(q float64) time.Duration {
	if !l.ok {
		return 0
	}
	// The normal quantile of q, by bisection on the complementary error
	// function: q is in (0, 1), so 60 halvings are far below a nanosecond.
	lo, hi := -10.0, 10.0
	for range 60 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Duration(math.Exp(l.mu+l.sigma*lo) * float64(time.Second))
}

// policyTimeout is the deadline the policy gives a call at the key's
// latency: its CallTimeout, or for an adaptive timeout the value it
// settles at, clamp(quantile × factor + base, min, max), where the
// quantile is read from the key's latency (it starts from CallTimeout, or
// AdaptiveTimeout.Max, and keeps that until the window has samples).
func policyTimeout(p breaker.Policy, t Traffic) time.Duration {
	if !p.AdaptiveTimeout.Enabled {
		return p.CallTimeout
	}
	q := fitLatency(t).quantile(p.AdaptiveTimeout.Quantile).Round(time.Microsecond)
	if q <= 0 {
		if p.CallTimeout > 0 {
			return p.CallTimeout
		}
		return p.AdaptiveTimeout.Max
	}
	d := time.Duration(float64(q)*p.AdaptiveTimeout.Factor) + p.AdaptiveTimeout.Base
	return min(max(d, p.AdaptiveTimeout.Min), p.AdaptiveTimeout.Max)
}

// over is the share of calls slower than d.
func (l latency) over(d time.Duration) float64 {
	if !l.ok || d <= 0 {
		return 0
	}
	x := math.Log(d.Seconds())
	if l.sigma == 0 {
		if x < l.mu {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc((x-l.mu)/(l.sigma*math.Sqrt2))
}

// effectiveTimeout is how long a call that never answers is waited for:
// the policy's CallTimeout, or the client's deadline when it comes first or
// the policy sets none. 0 means such a call never ends, so it is never
// counted.
func effectiveTimeout(p breaker.Policy, t Traffic) time.Duration {
	pt := policyTimeout(p, t)
	switch {
	case pt > 0 && (t.Deadline <= 0 || pt <= t.Deadline):
		return pt
	case t.Deadline > 0:
		return t.Deadline
	}
	return 0
}

// baseline is what a key's calls look like to its breaker in normal
// operation.
type baseline struct {
	// fail is the share of counted calls that fail: the errors, plus the
	// healthy calls slower than the effective timeout.
	fail float64
	// timeouts is the share of calls that time out.
	timeouts float64
	// slow is the share of calls slower than SlowCall (0 without the rule).
	slow float64
}

func baselineOf(p breaker.Policy, t Traffic) baseline {
	lat := fitLatency(t)
	te := effectiveTimeout(p, t)
	to := (1 - t.ErrorRatio) * lat.over(te)
	b := baseline{fail: t.ErrorRatio + to, timeouts: to}
	if p.SlowCall > 0 {
		b.slow = lat.over(p.SlowCall)
	}
	return b
}

// bucketWidth is the width of one bucket of p's window.
func bucketWidth(p breaker.Policy) time.Duration {
	if p.Buckets <= 0 {
		return p.Window
	}
	return p.Window / time.Duration(p.Buckets)
}

// phases is how many lengths of the window the false-trip model averages
// over: the window holds the buckets that overlap the last Window, so its
// length is uniform in [Window-width, Window] as the head bucket fills.
const phases = 5

// FalseTripsPerDay is the expected number of times per day that a breaker
// under policy p trips on steady traffic t while the downstream is
// healthy, at the traffic's baseline error ratio (plus the share of calls
// slower than the timeout, from the latency's lognormal fit). It follows
// the breaker through its cycle: closed until a trip, open for the
// cooldown (doubled on a trip within MaxOpenFor of the last close), the
// probes, and closed again with an empty window, which at a high rate
// reaches MinRequests within milliseconds and judges the ratio on a
// small sample. See docs/checking-policies.md for the formula; it is the
// analytic figure, which the checker holds against a simulation of the
// real breaker where the two can differ (see [Group]).
func FalseTripsPerDay(p breaker.Policy, t Traffic) float64 {
	return falseTrips(p, t).perDay
}

// falseTripModel is the false-trip model's figures for one policy and
// steady traffic.
type falseTripModel struct {
	// perDay is the expected trips a day.
	perDay float64
	// full is the trip rate (per second) of a closed breaker whose window
	// is full: the rate of failures that take it over the line.
	full float64
	// retrip is the chance that a breaker trips again before its window,
	// emptied by a close, is full: the small-sample trips.
	retrip float64
}

func falseTrips(p breaker.Policy, t Traffic) falseTripModel {
	if t.Rate <= 0 || p.Window <= 0 {
		return falseTripModel{}
	}
	b := baselineOf(p, t)
	// hazard is the trip rate of a closed breaker whose window has held
	// calls for s seconds (s ≥ Window: a full window).
	width := bucketWidth(p)
	// slowPart is the slow-call rule's part of it.
	hazard := func(s float64) (r, slowPart float64) {
		// A healthy share at or above a rule's ratio keeps the window
		// over its line: a marked call trips whenever the window with it
		// holds the rule, not only when it crosses (overLine).
		failOver := p.ErrorRatio > 0 && b.fail >= p.ErrorRatio
		slowOver := p.SlowCall > 0 && b.slow >= p.SlowRatio
		if s >= p.Window.Seconds() {
			r = windowTripRate(t.Rate, b.fail, p.ErrorRatio, p.ErrorCount, p.MinRequests, p.Window, width, failOver)
			if p.SlowCall > 0 {
				slowPart = windowTripRate(t.Rate, b.slow, p.SlowRatio, 0, p.MinRequests, p.Window, width, slowOver)
			}
		} else {
			r = b.fail * t.Rate * ruleChance(t.Rate*b.fail*s, t.Rate*(1-b.fail)*s, p.ErrorRatio, p.ErrorCount, p.MinRequests, failOver)
			if p.SlowCall > 0 {
				// A call is counted when it ends: in the first SlowCall
				// after a close only calls faster than it have, and the
				// slow ones that started since lag by at least SlowCall.
				slowS := max(0, s-p.SlowCall.Seconds())
				slowPart = b.slow * t.Rate * ruleChance(t.Rate*b.slow*slowS, t.Rate*(1-b.slow)*s, p.SlowRatio, 0, p.MinRequests, slowOver)
			}
		}
		if c := p.ConsecutiveFailures; c > 0 && b.fail > 0 {
			// A run reaches c failures at a rate of λ·(1-p)·p^c: a call
			// that is not a failure, then c failures.
			r += t.Rate * (1 - b.fail) * math.Pow(b.fail, float64(c))
		}
		// A trip is decided on a failure or a slow call, so there are
		// no more of them than of those.
		total := min(r+slowPart, t.Rate*min(1, b.fail+b.slow))
		if r+slowPart > 0 {
			slowPart *= total / (r + slowPart)
		}
		return total, slowPart
	}
	full, fullSlow := hazard(p.Window.Seconds())
	m := falseTripModel{full: full}
	// The window's first Window after a close, in steps that are fine
	// where the hazard moves fast: the window's first calls.
	const steps = 200
	w := p.Window.Seconds()
	var cum, closed, slowTrips float64 // ∫hazard, ∫survival, ∫survival·slow hazard
	prev := 0.0
	for i := 1; i <= steps; i++ {
		s := w * math.Pow(float64(i)/steps, 3)
		mid := (prev + s) / 2
		h, hs := hazard(mid)
		surv := math.Exp(-cum)
		cum += h * (s - prev)
		next := math.Exp(-cum)
		closed += (surv + next) / 2 * (s - prev)
		if h > 0 {
			slowTrips += (surv - next) * hs / h
		}
		prev = s
	}
	survW := math.Exp(-cum)
	m.retrip = 1 - survW
	if m.full <= 0 && survW > 0 {
		return m // a breaker that survives the refill never trips again
	}
	// The expected time closed, from a close to the next trip, and the
	// chance that it is shorter than MaxOpenFor (so the next cooldown is
	// doubled).
	meanClosed := closed
	if m.full > 0 {
		meanClosed += survW / m.full
	}
	stable := p.MaxOpenFor.Seconds()
	var short float64 // P(closed < MaxOpenFor)
	if stable <= w {
		short = 1 - math.Exp(-cum*stable/w) // the hazard taken as even: an estimate
	} else {
		short = 1 - survW*math.Exp(-m.full*(stable-w))
	}
	// The share of trips the slow-call rule makes: those of the refill,
	// then those of a full window.
	slowShare := slowTrips
	if full > 0 {
		slowShare += survW * fullSlow / full
	}
	open := openSpell(p, t, b, slowShare, short)
	if math.IsInf(open, 1) {
		return m // its probes never pass: it stays open
	}
	m.perDay = 86400 / (open + meanClosed)
	return m
}

// openSpell is the mean time a breaker under p spends open after a false
// trip, on the healthy traffic t: its probe episodes until one passes.
// The cooldowns follow the doublings, a chain: d rises by one on each
// failed probe episode and on a trip after a short spell closed (short is
// its chance), and returns to 0 after a long one. The cooldown is
// min(OpenFor·2^d, MaxOpenFor) (jitter has mean 1), then the probes
// arrive, Probes calls at the key's rate. Every probe must pass: one
// fails on a timeout (with StrictProbes, on any failure), and, after a
// trip of the slow-call rule (a share slowShare of them), on a call
// slower than SlowCall. +Inf: the probes never pass.
func openSpell(p breaker.Policy, t Traffic, b baseline, slowShare, short float64) float64 {
	probeFail := b.timeouts
	slowFail := max(b.timeouts, b.slow)
	if p.StrictProbes {
		probeFail = b.fail
		slowFail = 1 - (1-b.fail)*(1-b.slow)
	}
	probes := float64(p.Probes) / t.Rate
	dcap := 0 // the doublings at which the cooldown reaches MaxOpenFor
	for dcap < 60 && p.OpenFor.Seconds()*math.Pow(2, float64(dcap)) < p.MaxOpenFor.Seconds() {
		dcap++
	}
	cool := func(d int) float64 {
		return math.Min(p.OpenFor.Seconds()*math.Pow(2, float64(d)), p.MaxOpenFor.Seconds())
	}
	// For each kind of trip: the pass chance of an episode, the mean open
	// time from d, and the chance of each d at the close.
	type kind struct {
		weight, pass float64
	}
	kinds := []kind{{1 - slowShare, math.Pow(1-probeFail, float64(p.Probes))}, {slowShare, math.Pow(1-slowFail, float64(p.Probes))}}
	openFrom := make([]float64, dcap+1)
	next := make([][]float64, dcap+1) // next[d][d'] the chance of d' at the next trip
	for d := range next {
		next[d] = make([]float64, dcap+1)
	}
	for _, k := range kinds {
		if k.weight <= 0 {
			continue
		}
		if k.pass <= 0 {
			return math.Inf(1)
		}
		for d := 0; d <= dcap; d++ {
			// Episode i (from 0) comes at d+i doublings, with the chance
			// (1-pass)^i that the ones before it failed.
			var spell float64
			reach := 1.0
			i := 0
			for ; d+i < dcap; i++ {
				spell += reach * (cool(d+i) + probes)
				// It closes after this episode with the chance pass.
				at := d + i
				next[d][min(at+1, dcap)] += k.weight * reach * k.pass * short
				next[d][0] += k.weight * reach * k.pass * (1 - short)
				reach *= 1 - k.pass
			}
			// At the cap, every episode is alike.
			spell += reach * (cool(dcap) + probes) / k.pass
			next[d][dcap] += k.weight * reach * short
			next[d][0] += k.weight * reach * (1 - short)
			openFrom[d] += k.weight * spell
		}
	}
	// The chain's stationary chances, by iteration from d = 0.
	pi := make([]float64, dcap+1)
	pi[0] = 1
	for range 500 {
		np := make([]float64, dcap+1)
		for d, v := range pi {
			for e, q := range next[d] {
				np[e] += v * q
			}
		}
		pi = np
	}
	var open float64
	for d, v := range pi {
		open += v * openFrom[d]
	}
	return open
}

// windowTripRate is the rate, per second, of the marked calls (failures,
// or slow calls) that find the window meeting the rule "at least minReq
// counted calls, and marked/counted >= ratio (ratio > 0) or marked >=
// count (count > 0)" once they are in it. Calls arrive as a Poisson stream
// of rate λ, each marked with probability q; a window of length L then
// holds Poisson(λqL) other marked calls and, independently, Poisson(λ(1-q)L)
// unmarked ones. By PASTA, a marked call finds the window as a random
// instant does, so the rate is λq·P[rule holds with the call added],
// averaged over the window's length L. overLine is as for ruleChance.
func windowTripRate(rate, q, ratio float64, count, minReq int, window, width time.Duration, overLine bool) float64 {
	if q <= 0 || (ratio <= 0 && count <= 0) {
		return 0
	}
	var sum float64
	for j := 0; j < phases; j++ {
		l := (window - width).Seconds() + (float64(j)+0.5)/phases*width.Seconds()
		sum += ruleChance(rate*q*l, rate*(1-q)*l, ratio, count, minReq, overLine)
	}
	return rate * q * sum / phases
}

// ruleChance is P[the rule holds with f+1 marked and S unmarked calls, and
// did not with f], F ~ Poisson(a), S ~ Poisson(b) independent: the chance
// that a marked call arriving at a random instant makes the window cross
// the line. A window already over it does not count again: it tripped the
// breaker when it crossed. That holds while the window is seldom over the
// line; with overLine (the marked share is at or above the ratio, so the
// window is over it more often than not, and is brought there by calls
// that do not check: unmarked ones, and old buckets leaving) it is
// P[the rule holds with f+1], every marked call that finds it so trips.
func ruleChance(a, b, ratio float64, count, minReq int, overLine bool) float64 {
	// holds returns the interval of s for which the rule holds with f
	// marked calls: [lo, hi], empty if hi < lo.
	holds := func(f int) (lo, hi int) {
		lo = max(minReq-f, 0, 1-f) // the breaker never trips on an empty window
		switch {
		case f <= 0:
			return 1, 0
		case count > 0 && f >= count:
			return lo, math.MaxInt32
		case ratio > 0:
			return lo, maxUnmarked(f, ratio)
		}
		return 1, 0
	}
	floF, hiF := poissonBounds(a)
	floS, hiS := poissonBounds(b)
	// The rule is monotone in f: if it cannot hold with the most marked
	// calls that are not negligible, against the fewest unmarked ones,
	// the chance is below what the bounds leave out. Most healthy keys
	// end here.
	if lo, hi := holds(hiF + 1); hi < max(lo, floS) || lo > hiS {
		return 0
	}
	_, pf := poissonRange(a)
	_, ps := poissonRange(b)
	// cdfS[i] = P(S <= floS+i).
	cdfS := ps
	acc := 0.0
	for i, v := range ps {
		acc += v
		cdfS[i] = acc
	}
	atMost := func(k int) float64 { // P(S <= k)
		switch {
		case k < floS:
			return 0
		case k-floS >= len(cdfS):
			return 1
		}
		return cdfS[k-floS]
	}
	chance := func(lo, hi int) float64 {
		if hi < lo {
			return 0
		}
		return atMost(hi) - atMost(lo-1)
	}
	var total float64
	for i, w := range pf {
		f := floF + i
		// The rule is monotone in f, so the set where it holds with f is
		// inside the set where it holds with f+1.
		if overLine {
			total += w * chance(holds(f+1))
			continue
		}
		total += w * (chance(holds(f+1)) - chance(holds(f)))
	}
	return min(max(total, 0), 1)
}

// maxUnmarked is the largest s with f/(f+s) >= ratio, computed as the
// breaker compares (float64 division), so that the model trips exactly
// where the breaker does.
func maxUnmarked(f int, ratio float64) int {
	s := int(math.Floor(float64(f) * (1 - ratio) / ratio))
	for s >= 0 && float64(f)/float64(f+s) < ratio {
		s--
	}
	for float64(f)/float64(f+s+1) >= ratio {
		s++
	}
	return s
}

// poissonRange returns the probabilities of a Poisson(mean) variable over
// the values where they are not negligible (within 12 standard deviations
// of the mean, which leaves out less than 1e-30), from lo on.
func poissonRange(mean float64) (lo int, p []float64) {
	lo, hi := poissonBounds(mean)
	if mean <= 0 {
		return 0, []float64{1}
	}
	p = make([]float64, hi-lo+1)
	lg, _ := math.Lgamma(float64(lo) + 1)
	v := math.Exp(float64(lo)*math.Log(mean) - mean - lg)
	for k := lo; k <= hi; k++ {
		p[k-lo] = v
		v *= mean / float64(k+1)
	}
	return lo, p
}

// poissonBounds is the range of values poissonRange covers.
func poissonBounds(mean float64) (lo, hi int) {
	if mean <= 0 {
		return 0, 0
	}
	sd := math.Sqrt(mean)
	return max(0, int(mean-12*sd-30)), int(mean+12*sd) + 30
}

// atLeastChance is P[Poisson(mean) >= k].
func atLeastChance(mean float64, k int) float64 {
	lo, p := poissonRange(mean)
	var s float64
	for i, v := range p {
		if lo+i >= k {
			s += v
		}
	}
	if k <= lo {
		return 1
	}
	return min(s, 1)
}

// Fault is a fault in front of a key's downstream: the share of calls
// answered with an error at once, and the share that hang until the
// breaker's timeout (or the client's deadline) cuts them.
type Fault struct {
	Errors   float64 `json:"errors"`
	Timeouts float64 `json:"timeouts"`
}

// DefaultFault is the fault the breaker's defaults were replayed against:
// 40% errors and 20% calls that do not answer in time.
var DefaultFault = Fault{Errors: 0.4, Timeouts: 0.2}

// TimeToTrip returns how long after a fault begins a breaker under policy
// p opens, at traffic t, or false if it never does. The window is taken
// as full of healthy traffic when the fault begins, at the start of a
// bucket; the fault's errors are counted as they happen and its timeouts
// when they are cut, one effective timeout later. The window's rules are
// followed as expected counts (a fluid model, to a sixteenth of a
// bucket); the ConsecutiveFailures rule as the expected wait for a run of
// that many failures. See docs/checking-policies.md.
func TimeToTrip(p breaker.Policy, t Traffic, f Fault) (time.Duration, bool) {
	if t.Rate <= 0 || p.Window <= 0 || p.Buckets <= 0 {
		return 0, false
	}
	b := baselineOf(p, t)
	lat := fitLatency(t)
	te := effectiveTimeout(p, t)
	fe, ft := f.Errors, f.Timeouts
	if te <= 0 {
		ft = 0 // calls that hang for ever are never counted
	}
	h := max(0, 1-f.Errors-f.Timeouts) // healthy share, at the baseline
	hangSlow := p.SlowCall > 0 && te > p.SlowCall
	var slowHealthy float64
	if p.SlowCall > 0 {
		slowHealthy = lat.over(p.SlowCall)
	}

	best, found := windowTimeToTrip(p, t.Rate, b, fe, ft, h, te, hangSlow, slowHealthy)
	if c := p.ConsecutiveFailures; c > 0 {
		if d, ok := runTimeToTrip(c, t.Rate, fe, ft, h, b.fail, te); ok && (!found || d < best) {
			best, found = d, true
		}
	}
	return best, found
}

func windowTimeToTrip(p breaker.Policy, rate float64, b baseline, fe, ft, h float64, te time.Duration, hangSlow bool, slowHealthy float64) (time.Duration, bool) {
	n := p.Buckets
	width := bucketWidth(p).Seconds()
	const sub = 16
	dt := width / sub
	type bucket struct{ counted, failures, slow float64 }
	ring := make([]bucket, n)
	// The n-1 buckets before the fault are full of healthy traffic.
	for i := 1; i < n; i++ {
		c := rate * width
		ring[i] = bucket{c, c * b.fail, c * b.slow}
	}
	tes := te.Seconds()
	horizon := tes + p.Window.Seconds() + 2*width
	steps := int(math.Ceil(horizon/dt)) + 1
	var win bucket // the sum of ring
	for _, r := range ring {
		win.counted += r.counted
		win.failures += r.failures
		win.slow += r.slow
	}
	cur := 0 // the ring slot of the head bucket
	minReq := float64(p.MinRequests)
	for k := 0; k < steps; k++ {
		if k == (n+1)*sub {
			// Every bucket has held the same fault traffic since k = n·sub
			// and did not trip in the bucket since: until the timeouts are
			// cut, each next bucket is that one again. Skip to the bucket
			// in which they are (a timeout of a day with a 1 ms window
			// would be a billion steps), or stop if they never are.
			if ft == 0 {
				break
			}
			if skip := int(tes/dt)/sub - k/sub; skip > 0 {
				k += skip * sub
				cur = (cur + skip) % n
			}
		}
		if k > 0 && k%sub == 0 {
			// A new bucket begins: the oldest leaves the window.
			cur = (cur + 1) % n
			old := ring[cur]
			win.counted -= old.counted
			win.failures -= old.failures
			win.slow -= old.slow
			ring[cur] = bucket{}
		}
		t := float64(k) * dt
		cut := 0.0
		if ft > 0 && t >= tes {
			cut = ft
		}
		add := bucket{
			counted:  rate * dt * (fe + h + cut),
			failures: rate * dt * (fe + h*b.fail + cut),
			slow:     rate * dt * h * slowHealthy,
		}
		if hangSlow {
			add.slow += rate * dt * cut
		}
		ring[cur].counted += add.counted
		ring[cur].failures += add.failures
		ring[cur].slow += add.slow
		win.counted += add.counted
		win.failures += add.failures
		win.slow += add.slow
		// 1e-9 absorbs the rounding of the sums; the breaker compares
		// whole counts.
		if win.counted+1e-9 < max(minReq, 1) {
			continue
		}
		switch {
		case p.ErrorRatio > 0 && win.failures/win.counted >= p.ErrorRatio-1e-12,
			p.ErrorCount > 0 && win.failures+1e-9 >= float64(p.ErrorCount),
			p.SlowCall > 0 && win.slow/win.counted >= p.SlowRatio-1e-12:
			return seconds(t + dt), true
		}
	}
	return 0, false
}

// runTimeToTrip is the expected time for a run of c failures in a row. A
// run of c events of probability q each, in independent trials, takes
// (1-q^c)/((1-q)·q^c) trials on average, and the n-th counted call comes
// n gaps of the counted calls after the fault begins. Before the first timeouts are
// cut (one effective timeout into the fault), the counted calls are the
// errors and the healthy calls; after, every call.
func runTimeToTrip(c int, rate, fe, ft, h, fail0 float64, te time.Duration) (time.Duration, bool) {
	wait := func(q float64) float64 { // calls
		switch {
		case q >= 1:
			return float64(c) // the run is the first c calls
		case q <= 0:
			return math.Inf(1)
		}
		return (1 - math.Pow(q, float64(c))) / ((1 - q) * math.Pow(q, float64(c)))
	}
	early := fe + h
	if early > 0 {
		q := (fe + h*fail0) / early
		// The run's last failure is the wait(q)-th counted call, the
		// first of which comes a gap after the fault begins.
		if d := wait(q) / (rate * early); ft == 0 || d <= te.Seconds() {
			if math.IsInf(d, 1) || d > maxSeconds {
				return 0, false
			}
			return seconds(d), true
		}
	}
	if ft == 0 {
		return 0, false
	}
	d := te.Seconds() + wait(fe+ft+h*fail0)/rate
	if math.IsInf(d, 1) || d > maxSeconds {
		return 0, false
	}
	return seconds(d), true
}

// maxSeconds bounds every time a model reports: a day, beyond which
// "never" is the honest answer.
const maxSeconds = 86400.0

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
