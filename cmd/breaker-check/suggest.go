package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/check"
	"github.com/govkit/breaker/ops"
	"github.com/govkit/breaker/replay"
)

// Suggestions replay one key's traffic through a fault, once for each of a
// small grid of candidate policies around the key's current one, in the
// simulator of package replay: a caller tier (the service, with its pool
// of workers) making the key's call to a downstream tier that answers
// with the key's latency, the fault injected in front of the downstream.
// A request of the caller is good when it is answered, by the downstream
// or by a fallback, within the client's deadline.
//
// When a candidate opens is the checker's figure, the one its
// fault_time_to_trip finding gives for that policy (check.FaultTimeToTrip:
// the same model, source and interval), not the replay's one draw of the
// fault: one figure, from one model.
//
// Candidates are ranked by, in order: whether they are acceptable, which
// is to open during the fault (the checker's median time to trip within
// it: the fault is one the breaker is there to catch, and without a
// fallback an open breaker answers nothing, so on goodput alone the
// replay of a single call would always prefer a breaker that never opens,
// blind to what a failing downstream costs beyond this call) with
// expected false trips a day at the baseline within the threshold (the
// checker's model: a replay long enough to see a once-a-week trip would
// take a simulated week); the goodput the caller lost from the start of
// the fault to the end of the replay, against a run with neither fault
// nor breaker (two candidates within 1% of the fault's calls of each
// other tie: the replay draws its own arrivals and faults, and a
// difference that small is its noise); the expected false trips; the
// calls sent into the fault that failed (the load the breaker spares the
// failing downstream; within 1% of the fault's calls, a tie); how long
// the breaker stayed open after the fault (refusing a recovered
// downstream; within a second, a tie); and how few changes they make, so
// that among equals the current policy comes first. With a fallback
// every candidate loses about nothing: the last three tell them apart.

// suggestConfig is what the command's flags say about suggestions.
type suggestConfig struct {
	fault    check.Fault
	faultFor time.Duration
	seed     uint64
	maxFalse float64
	top      int
	simCalls int
}

// Limits that keep a suggestion within a few seconds of wall time.
const (
	// maxFaultFor bounds -fault-for, the fault each candidate is
	// replayed through.
	maxFaultFor = 10 * time.Minute
	// maxSuggestKeys bounds the keys one -suggest replays.
	maxSuggestKeys = 100
	// maxSimRate is the highest rate a replay runs at. A busier key is
	// replayed at this rate with the caller's workers, MinRequests and
	// ErrorCount scaled down alike (the last two to no fewer than
	// minScaled), which keeps the ratio rules' timing and the pool's load
	// as they are. At these rates a window holds a thousand calls or
	// more, so the ratio is as well judged at either rate.
	maxSimRate = 250.0
	// minScaled keeps a scaled MinRequests or ErrorCount from judging on
	// a handful of calls, which the key at its real rate never does: a
	// busy key's MinRequests is met within milliseconds of a close, by
	// enough calls to judge a ratio.
	minScaled = 20
	// slowLatency is how long the fault's slow calls take: longer than
	// any timeout worth having, so each is cut by the timeout.
	slowLatency = 5 * time.Second
	// maxTail bounds the replay after the fault, in which the breaker
	// recovers.
	maxTail = 90 * time.Second
)

// keySuggestions are the ranked candidates for one key.
type keySuggestions struct {
	Key     string  `json:"key"`
	Rate    float64 `json:"rate"`
	SimRate float64 `json:"simulated_rate"`
	Fault   string  `json:"fault"`
	Seed    uint64  `json:"seed"`
	// Current is the key's policy as it is; Best the top candidates,
	// which may include it.
	Current candidate   `json:"current"`
	Best    []candidate `json:"best"`
	Tried   int         `json:"tried"`
	// Tie is the difference in goodput lost below which two candidates
	// rank as equals.
	Tie float64 `json:"tie"`
}

// candidate is one policy and how it did.
type candidate struct {
	Policy  breaker.Policy `json:"policy"`
	Changes []string       `json:"changes"`
	// Lost is the caller's goodput lost (requests, at the key's real
	// rate) from the start of the fault to the end of the replay.
	Lost float64 `json:"lost"`
	// WorstDrop is the largest share of goodput lost in one second.
	WorstDrop float64 `json:"worst_drop"`
	// FalseTripsPerDay is the checker's expected false trips a day at the
	// baseline.
	FalseTripsPerDay float64 `json:"false_trips_per_day"`
	// Opens is when the breaker opens into the fault: the checker's
	// figure for this policy.
	Opens opens `json:"opens"`
	// Wasted are the calls sent into the fault that failed or timed out,
	// at the key's real rate; OpenAfter how long the breaker stayed open
	// or half-open after the fault ended. BaselineOpens counts the
	// openings the replay saw outside the fault.
	Wasted        float64       `json:"wasted"`
	OpenAfter     time.Duration `json:"open_after_fault_ns"`
	BaselineOpens int           `json:"baseline_opens"`
	Acceptable    bool          `json:"acceptable"`
}

// opens is the checker's time to trip into the fault (its
// fault_time_to_trip finding): the median and p90 in seconds, with the
// 95% interval of the median when simulated, its source, and whether
// the median is within the fault.
type opens struct {
	Median  float64 `json:"median_s,omitempty"`
	P90     float64 `json:"p90_s,omitempty"`
	Low     float64 `json:"median_low_s,omitempty"`
	High    float64 `json:"median_high_s,omitempty"`
	Source  string  `json:"source"`
	Never   bool    `json:"never"`
	InFault bool    `json:"in_fault"`
	Message string  `json:"message"`
}

// opensOf reads a fault_time_to_trip finding; a breaker whose median is
// beyond the fault does not open during it.
func opensOf(f check.Finding, faultFor time.Duration) opens {
	o := opens{Source: f.Source, Message: f.Message}
	med, ok := f.Numbers["time_to_trip_s"]
	if !ok {
		o.Never = true
		return o
	}
	o.Median, o.P90 = med, f.Numbers["time_to_trip_p90_s"]
	o.Low, o.High = f.Numbers["time_to_trip_low_s"], f.Numbers["time_to_trip_high_s"]
	o.InFault = med <= faultFor.Seconds()
	return o
}

// suggestFor ranks the candidates for one key; current is the check's
// fault_time_to_trip finding for the key's policy, if it made one.
func suggestFor(kr check.KeyReport, current *check.Finding, cfg suggestConfig) (keySuggestions, error) {
	t, cur := kr.Traffic, kr.Policy
	out := keySuggestions{Key: kr.Key, Rate: t.Rate, Seed: cfg.seed,
		Fault: fmt.Sprintf("%s for %v", cfg.fault, cfg.faultFor)}
	if t.Rate <= 0 {
		return out, fmt.Errorf("the key has no traffic (rate 0) to replay")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"deadline", t.Deadline}, {"p50", t.P50}, {"p99", t.P99}} {
		if d.v > replay.MaxLatency {
			return out, fmt.Errorf("the key's %s (%v) is longer than a replayed call may take (%v)", d.name, d.v, replay.MaxLatency)
		}
	}
	if n := replayLength(cur, cfg); n > replay.MaxDuration {
		return out, fmt.Errorf("the policy's window (%v) and cooldowns need a replay of %v, longer than the %v a replay covers", cur.Window, n, replay.MaxDuration)
	}
	out.SimRate = math.Min(t.Rate, maxSimRate)
	tie := ties{lost: math.Max(1, 0.01*t.Rate*cfg.faultFor.Seconds()), falseTrips: 0.01 * cfg.maxFalse, openAfter: time.Second}
	out.Tie = tie.lost
	var cands []breaker.Policy
	for _, p := range grid(cur, t) {
		if replayLength(p, cfg) <= replay.MaxDuration {
			cands = append(cands, p)
		}
	}
	var results []candidate
	opt := check.Options{Fault: cfg.fault, MaxFalseTripsPerDay: cfg.maxFalse, SimCalls: cfg.simCalls, Seed: cfg.seed}
	try := func(p breaker.Policy) (candidate, error) {
		c, err := replayOne(p, t, cfg)
		if err != nil {
			return c, err
		}
		f := current
		if p != cur || f == nil {
			ft, err := check.FaultTimeToTrip(kr.Key, p, t, opt)
			if err != nil {
				return c, err
			}
			f = &ft
		}
		c.Opens = opensOf(*f, cfg.faultFor)
		c.Changes = diff(cur, p)
		c.FalseTripsPerDay = check.FalseTripsPerDay(p, t)
		c.Acceptable = c.Opens.InFault && c.FalseTripsPerDay <= cfg.maxFalse
		results = append(results, c)
		return c, nil
	}
	for _, p := range cands {
		if _, err := try(p); err != nil {
			return out, err
		}
	}
	out.Current = results[0]
	// One more candidate: every single change that beat the current
	// policy, together.
	if combo, ok := combine(cur, results, tie); ok && !seen(cands, combo) && replayLength(combo, cfg) <= replay.MaxDuration {
		if _, err := try(combo); err != nil {
			return out, err
		}
	}
	out.Tried = len(results)
	sort.SliceStable(results, func(i, j int) bool { return better(results[i], results[j], tie) })
	out.Best = results[:min(cfg.top, len(results))]
	return out, nil
}

// ties are the differences below which two candidates' figures are the
// same: goodput lost and calls wasted within 1% of the fault's calls,
// false trips within 1% of the threshold, time open after the fault
// within a second.
type ties struct {
	lost, falseTrips float64
	openAfter        time.Duration
}

// better orders candidates for the ranking.
func better(a, b candidate, tie ties) bool {
	switch {
	case a.Acceptable != b.Acceptable:
		return a.Acceptable
	case math.Abs(a.Lost-b.Lost) > tie.lost:
		return a.Lost < b.Lost
	case math.Abs(a.FalseTripsPerDay-b.FalseTripsPerDay) > tie.falseTrips:
		return a.FalseTripsPerDay < b.FalseTripsPerDay
	case math.Abs(a.Wasted-b.Wasted) > tie.lost:
		return a.Wasted < b.Wasted
	case a.OpenAfter-b.OpenAfter > tie.openAfter || b.OpenAfter-a.OpenAfter > tie.openAfter:
		return a.OpenAfter < b.OpenAfter
	}
	return len(a.Changes) < len(b.Changes)
}

// grid returns the current policy, then the candidates around it, each
// valid and different from the ones before.
func grid(p breaker.Policy, t check.Traffic) []breaker.Policy {
	out := []breaker.Policy{p}
	add := func(mod func(q *breaker.Policy)) {
		q := p
		mod(&q)
		if q.Validate() == nil && !seen(out, q) {
			out = append(out, q)
		}
	}
	full := t.Rate * p.Window.Seconds()
	add(func(q *breaker.Policy) { q.MinRequests = max(1, p.MinRequests/2) })
	add(func(q *breaker.Policy) { q.MinRequests = p.MinRequests * 2 })
	if float64(p.MinRequests) > full {
		add(func(q *breaker.Policy) { q.MinRequests = max(1, int(full/2)) })
	}
	if p.ErrorRatio > 0 {
		add(func(q *breaker.Policy) { q.ErrorRatio = round2(math.Max(0.1, p.ErrorRatio-0.1)) })
		add(func(q *breaker.Policy) { q.ErrorRatio = round2(math.Min(1, p.ErrorRatio+0.1)) })
	}
	add(func(q *breaker.Policy) { q.Window = p.Window / 2 })
	add(func(q *breaker.Policy) { q.Window = p.Window * 2 })
	if to, ok := suggestedTimeout(t); ok && (p.CallTimeout == 0 || math.Abs(float64(to-p.CallTimeout)) > 0.1*float64(p.CallTimeout)) {
		add(func(q *breaker.Policy) { q.CallTimeout = to })
	}
	add(func(q *breaker.Policy) {
		q.OpenFor = p.OpenFor / 2
	})
	add(func(q *breaker.Policy) {
		q.OpenFor = p.OpenFor * 2
		q.MaxOpenFor = max(p.MaxOpenFor, q.OpenFor)
	})
	return out
}

// suggestedTimeout is p99 × 2 + RTT, at least 2 × RTT and below the
// client's deadline: the middle of the range the checker advises.
func suggestedTimeout(t check.Traffic) (time.Duration, bool) {
	if t.P99 <= 0 {
		return 0, false
	}
	to := max(2*t.P99+t.RTT, 2*t.RTT)
	if t.Deadline > 0 && to >= t.Deadline {
		return 0, false
	}
	return to.Round(time.Millisecond), true
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func seen(list []breaker.Policy, p breaker.Policy) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}

// combine lays every single change that did better than the current
// policy onto it.
func combine(cur breaker.Policy, results []candidate, tie ties) (breaker.Policy, bool) {
	base := results[0]
	p := cur
	n := 0
	taken := map[string]bool{}
	sorted := append([]candidate(nil), results[1:]...)
	sort.SliceStable(sorted, func(i, j int) bool { return better(sorted[i], sorted[j], tie) })
	for _, r := range sorted {
		if len(r.Changes) != 1 || !better(r, base, tie) {
			continue
		}
		field := strings.Fields(r.Changes[0])[0]
		if taken[field] {
			continue
		}
		taken[field] = true
		q := p
		switch field {
		case "min_requests":
			q.MinRequests = r.Policy.MinRequests
		case "error_ratio":
			q.ErrorRatio = r.Policy.ErrorRatio
		case "window":
			q.Window = r.Policy.Window
		case "call_timeout":
			q.CallTimeout = r.Policy.CallTimeout
		case "open_for":
			q.OpenFor, q.MaxOpenFor = r.Policy.OpenFor, r.Policy.MaxOpenFor
		default:
			continue
		}
		if q.Validate() == nil {
			p = q
			n++
		}
	}
	return p, n >= 2
}

// diff lists the fields in which p differs from cur: "min_requests 20 → 10".
func diff(cur, p breaker.Policy) []string {
	var out []string
	f := func(name string, a, b any) {
		if a != b {
			out = append(out, fmt.Sprintf("%s %v → %v", name, a, b))
		}
	}
	f("window", cur.Window, p.Window)
	f("min_requests", cur.MinRequests, p.MinRequests)
	f("error_ratio", cur.ErrorRatio, p.ErrorRatio)
	f("call_timeout", cur.CallTimeout, p.CallTimeout)
	f("open_for", cur.OpenFor, p.OpenFor)
	f("max_open_for", cur.MaxOpenFor, p.MaxOpenFor)
	if out == nil {
		out = []string{}
	}
	return out
}

// replayOne replays the key's traffic through the fault under policy p.
func replayOne(p breaker.Policy, t check.Traffic, cfg suggestConfig) (candidate, error) {
	s, scale, lead := scenario(p, t, cfg)
	rep, err := replay.Run(s)
	if err != nil {
		return candidate{}, err
	}
	base, run := rep.Run(replay.Baseline), rep.Run(replay.WithBreaker)
	c := candidate{Policy: p, WorstDrop: run.WorstDrop}
	from := int(lead / time.Second)
	lost := 0
	for sec := from; sec < len(run.Entry.Good); sec++ {
		lost += base.Entry.Good[sec] - run.Entry.Good[sec]
	}
	c.Lost = math.Max(0, float64(lost)/scale)
	faultEnd := lead + cfg.faultFor
	call := run.Calls[0]
	for _, tr := range call.Transitions {
		if tr.To != breaker.Open || tr.From != breaker.Closed {
			continue
		}
		if tr.At < lead || tr.At >= faultEnd {
			c.BaselineOpens++
		}
	}
	// The replay's baseline errors fail the same calls for every
	// candidate; what differs is how many the breaker let into the fault.
	c.Wasted = float64(call.Wasted()) / scale
	c.OpenAfter = notClosed(call.Transitions, faultEnd, s.Duration)
	return c, nil
}

// notClosed is how long the breaker whose transitions are ts was open or
// half-open between from and to.
func notClosed(ts []replay.Transition, from, to time.Duration) time.Duration {
	var total time.Duration
	st, since := breaker.Closed, time.Duration(0)
	span := func(until time.Duration) {
		if st != breaker.Closed {
			total += max(0, min(until, to)-max(since, from))
		}
	}
	for _, tr := range ts {
		span(tr.At)
		st, since = tr.To, tr.At
	}
	span(to)
	return total
}

// scenario builds the replay of traffic t through the fault under p, and
// returns it with the rate scale (simulated over real) and the fault's
// start.
func scenario(p breaker.Policy, t check.Traffic, cfg suggestConfig) (*replay.Scenario, float64, time.Duration) {
	rate := math.Min(t.Rate, maxSimRate)
	scale := rate / t.Rate
	sp := p
	if scale < 1 {
		down := func(n int) int { return max(int(math.Ceil(float64(n)*scale)), min(n, minScaled)) }
		sp.MinRequests = down(p.MinRequests)
		if p.ErrorCount > 0 {
			sp.ErrorCount = down(p.ErrorCount)
		}
	}
	deadline := t.Deadline
	if deadline <= 0 {
		deadline = time.Second
	}
	svc := service(t)
	workers := float64(t.Workers)
	if workers <= 0 {
		// Four times the calls in flight on a healthy day, and at least
		// eight: a pool sized for the traffic with room for a spike.
		workers = math.Ceil(4 * t.Rate * (svc.Mean + time.Millisecond).Seconds())
	}
	// Clamped as a float: a pool too large for an int is the largest a
	// replay has, not an overflow.
	pool := int(min(max(8, math.Ceil(workers*scale)), replay.MaxWorkers))

	lead, tail := phases(p)
	dur := lead + cfg.faultFor + tail
	down := "downstream"
	var faults []replay.Fault
	if t.ErrorRatio > 0 {
		faults = append(faults,
			replay.Fault{Tier: down, Start: 0, Duration: lead, ErrorRate: t.ErrorRatio},
			replay.Fault{Tier: down, Start: lead + cfg.faultFor, Duration: tail, ErrorRate: t.ErrorRatio})
	}
	f := replay.Fault{Tier: down, Start: lead, Duration: cfg.faultFor, ErrorRate: cfg.fault.Errors}
	if cfg.fault.Timeouts > 0 {
		f.SlowFraction, f.SlowLatency = cfg.fault.Timeouts, slowLatency
	}
	faults = append(faults, f)
	s := &replay.Scenario{
		Name:     "breaker-check",
		Duration: dur,
		Seed:     cfg.seed,
		Entry:    replay.Entry{Tier: "caller", Rate: rate, Arrivals: replay.Poisson, Timeout: deadline},
		Tiers: []replay.Tier{{
			Name: "caller", Workers: pool, Queue: replay.Unbounded,
			Service: replay.Service{Dist: replay.Constant, Mean: time.Millisecond},
			Calls:   []replay.Call{{To: down, Probability: 1, Timeout: deadline, Fallback: t.Fallback, Policy: &sp}},
		}, {
			Name: down, Workers: replay.MaxWorkers, Queue: replay.Unbounded, Service: svc,
		}},
		Faults: faults,
		Policy: sp,
	}
	return s, scale, lead
}

// phases are the replay's stretches before the fault (two windows, so
// that the breaker judges a full one of healthy calls) and after it (the
// cooldowns, for the breaker to recover), for policy p.
func phases(p breaker.Policy) (lead, tail time.Duration) {
	lead = max(2*p.Window, 10*time.Second).Round(time.Second)
	tail = min(p.MaxOpenFor+p.OpenFor+10*time.Second, maxTail).Round(time.Second)
	return lead, tail
}

// replayLength is how long a replay of policy p through the fault runs.
func replayLength(p breaker.Policy, cfg suggestConfig) time.Duration {
	lead, tail := phases(p)
	return lead + cfg.faultFor + tail
}

// service is the downstream's latency: a lognormal with the traffic's
// median and 99th percentile, or 10 ms when it has none. A mean beyond
// what a replay takes (a 99th percentile tens of thousands of times the
// median) is the longest it takes.
func service(t check.Traffic) replay.Service {
	if t.P50 <= 0 || t.P99 <= t.P50 {
		mean := t.P50
		if mean <= 0 {
			mean = 10 * time.Millisecond
		}
		return replay.Service{Dist: replay.Constant, Mean: mean}
	}
	sigma := math.Log(float64(t.P99)/float64(t.P50)) / 2.3263478740408408
	mean := time.Duration(float64(t.P50) * math.Exp(sigma*sigma/2))
	if mean >= t.P99 || float64(t.P99) > 14.9*float64(mean) {
		return replay.Service{Dist: replay.Exponential, Mean: min(mean, replay.MaxLatency)}
	}
	return replay.Service{Dist: replay.Lognormal, Mean: mean, P99: t.P99}
}

func (s keySuggestions) writeText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\nsuggestions for %s: %d candidates replayed through %s at %s calls/s",
		ops.Printable(s.Key), s.Tried, s.Fault, fmtNum(s.SimRate))
	if s.SimRate < s.Rate {
		fmt.Fprintf(bw, " (the key's %s scaled down, with min_requests and workers)", fmtNum(s.Rate))
	}
	fmt.Fprintf(bw, ", seed %d; goodput lost and calls wasted within %s requests tie\n", s.Seed, fmtNum(s.Tie))
	fmt.Fprintf(bw, "  opens: the check's time to trip into the fault for each policy (median [its 95%% interval], p90; source); wasted: calls sent into the fault that failed; open after: how long the breaker stayed open after it\n")
	fmt.Fprintf(bw, "  %-4s  %8s  %6s  %-42s  %8s  %10s  %13s  %s\n", "rank", "lost", "worst", "opens", "wasted", "open after", "false trips/d", "changes")
	row := func(rank string, c candidate) {
		op := "never within 10m (" + c.Opens.Source + ")"
		switch {
		case c.Opens.Never:
		case c.Opens.Source == check.SourceSimulated:
			op = fmt.Sprintf("%s [%s, %s], p90 %s, simulated", secs(c.Opens.Median), secs(c.Opens.Low), secs(c.Opens.High), secs(c.Opens.P90))
		default:
			op = fmt.Sprintf("%s, p90 %s, %s", secs(c.Opens.Median), secs(c.Opens.P90), c.Opens.Source)
		}
		changes := strings.Join(c.Changes, ", ")
		if changes == "" {
			changes = "(current policy)"
		}
		mark := ""
		switch {
		case !c.Opens.InFault:
			mark = " (lets the fault through)"
		case !c.Acceptable:
			mark = " (over the false-trip threshold)"
		}
		fmt.Fprintf(bw, "  %-4s  %8.0f  %5.0f%%  %-42s  %8.0f  %10s  %13s  %s%s\n", rank, c.Lost, c.WorstDrop*100, op, c.Wasted,
			c.OpenAfter.Round(100*time.Millisecond), fmtNum(c.FalseTripsPerDay), changes, mark)
	}
	for i, c := range s.Best {
		row(fmt.Sprint(i+1), c)
	}
	if !seenCandidate(s.Best, s.Current) {
		row("now", s.Current)
	}
	return bw.Flush()
}

func seenCandidate(list []candidate, c candidate) bool {
	for _, x := range list {
		if x.Policy == c.Policy {
			return true
		}
	}
	return false
}

// secs formats a time to trip in seconds to three digits: "17.1s",
// "3.17s".
func secs(v float64) string {
	d := time.Duration(v * float64(time.Second))
	switch {
	case d >= 100*time.Second:
		return d.Round(time.Second).String()
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1e-3 || v >= 1e6:
		return fmt.Sprintf("%.1g", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
