package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
)

// A TraceReport is what a candidate policy would have done with recorded
// traffic ([ReplayTrace]).
type TraceReport struct {
	// Candidate is the candidate group policy.
	Candidate breaker.GroupPolicy
	// Start is the time of the first recorded call; every time in the
	// report is relative to it. Length runs to the end of the last call.
	Start  time.Time
	Length time.Duration
	// Calls is the number of recorded calls.
	Calls int
	// Keys holds one report per breaker key, in order of key.
	Keys []*KeyReport

	// The self-check: the policy that ran (TraceOptions.Active), replayed
	// the same way, should refuse the calls the recorded breakers refused.
	// Refused is the number of recorded refusals, Reproduced those the
	// replay of Active refuses too, and Extra the calls it refuses that
	// the recorded breakers admitted.
	Active                     breaker.GroupPolicy
	Refused, Reproduced, Extra int
	// Throttled is the number of the recorded refusals that were the
	// throttle's (calltrace.Record.Throttled), the breaker closed.
	Throttled int
	// Transitions is the number of breaker transitions the trace records,
	// and Origin the recorded breakers' time origin, on which the replay
	// aligns its windows' buckets (zero if the trace has none: the
	// buckets are aligned on the first call).
	Transitions int
	Origin      time.Time
}

// TraceOptions adjust [ReplayTraceWith].
type TraceOptions struct {
	// Active is the policy that ran when the trace was recorded, for the
	// self-check; its zero value is breaker.DefaultPolicy() for every
	// key.
	Active breaker.GroupPolicy
}

// KeyReport is the counterfactual for one key's calls. Each recorded call
// falls in exactly one of: admitted by both (the candidate sees its
// recorded outcome), refused by both, refused by the candidate only
// (FailuresAvoided, SuccessesLost or IgnoredRefused, by its recorded
// outcome), admitted by the candidate only (Unknown: nobody knows how it
// would have ended).
type KeyReport struct {
	Key string
	// Policy is the candidate's policy for the key.
	Policy breaker.Policy
	// Calls is the number of recorded calls; Refused those the recorded
	// breaker refused, Throttled those of them its throttle refused (the
	// breaker closed), Failed those that failed or timed out, Probes the
	// recorded probes.
	Calls, Refused, Throttled, Failed, Probes int
	// BothAdmitted and BothRefused are the calls on which the candidate
	// agrees with what happened.
	BothAdmitted, BothRefused int
	// FailuresAvoided are calls that failed or timed out and that the
	// candidate would have refused; SuccessesLost calls that succeeded and
	// that it would have refused; IgnoredRefused calls with an ignored
	// outcome that it would have refused.
	FailuresAvoided, SuccessesLost, IgnoredRefused int
	// CandidateThrottled are the calls the candidate's throttle would
	// have refused, the candidate closed: of those it refuses.
	CandidateThrottled int
	// Unknown are calls the recorded breaker refused and the candidate
	// would have admitted. The candidate is told nothing about them (they
	// end as ignored: no verdict), which is the most it can honestly be
	// told.
	Unknown int
	// Recorded are the spans in which the recorded breaker was open and
	// refused calls: from its first refusal as open to the first call it
	// admitted that was not a probe, or refused as throttled (or the end
	// of the trace). The throttle's refusals are in Seconds.
	Recorded []Span
	// Transitions are the candidate breaker's state changes.
	Transitions []Transition
	// Reproduced is the number of the recorded refusals (Refused) that a
	// replay of the policy that ran refuses too, and ActiveExtra the
	// calls that replay refuses and the recording admitted: the
	// self-check, see TraceReport.
	Reproduced, ActiveExtra int
	// Seconds counts the calls per second of the trace.
	Seconds []TraceSecond
}

// Span is a stretch of time [From, To) in a trace.
type Span struct{ From, To time.Duration }

// TraceSecond is one second of one key's replay.
type TraceSecond struct {
	// Calls recorded; Failed of them failed or timed out; Refused of them
	// the recorded breaker refused; CandidateRefused the candidate would
	// have refused. Throttled and CandidateThrottled are those of the
	// refusals that were a throttle's, the breaker closed.
	Calls, Failed, Refused, CandidateRefused int32
	Throttled, CandidateThrottled            int32
}

// MaxTraceSpan bounds the time a trace covers, from its first call's
// start to its last call's end; maxTraceCells bounds its keys times its
// seconds, the size of the per-second counts.
const (
	MaxTraceSpan  = 24 * time.Hour
	maxTraceCells = 20_000_000
)

// MaxTraceCalls bounds the calls ReplayTrace reads: four hours at
// 1,000 calls a second, about 400 MB of memory.
const MaxTraceCalls = 15_000_000

// call is one recorded call, compactly: the replay holds millions.
type traceCall struct {
	at      int64  // ns from the trace's start
	dur     uint32 // µs: a trace's own resolution
	outcome breaker.Outcome
	flags   uint8
}

// maxCallDuration is the longest call a replay takes: its duration is
// kept in 32 bits of microseconds.
const maxCallDuration = time.Duration(math.MaxUint32) * time.Microsecond

const (
	flagProbe uint8 = 1 << iota
	flagRefused
	flagThrottled
)

// recordedErrors are what a replayed call reports to the candidate, by
// outcome: made once, not once a call.
var recordedErrors = func() map[breaker.Outcome]error {
	err := errors.New("replay: recorded outcome")
	m := map[breaker.Outcome]error{}
	for _, o := range []breaker.Outcome{breaker.Ignored, breaker.Failure, breaker.Timeout} {
		m[o] = breaker.Mark(err, o)
	}
	return m
}()

// ReplayTrace reads a trace (the format of package
// github.com/govkit/breaker/calltrace) and replays each key's calls, in the
// order they were made, through a breaker with the candidate's policy for
// that key, on the trace's own time. The candidate is a group policy, as a
// service runs: its override for the key, or for the key's method (the
// part before "@"), or its default; a zero default means
// breaker.DefaultPolicy(). A single policy is GroupPolicy{Default: p}. A call the candidate admits ends with its
// recorded outcome after its recorded duration (so a candidate Timeout
// shorter than the duration counts it as a timeout, as a real breaker
// would). The result is the same for the same trace and policy: each
// key's jitter is drawn from a source seeded by the key.
//
// A trace that cannot be read is an error naming the line and the field.
func ReplayTrace(r io.Reader, candidate breaker.GroupPolicy) (*TraceReport, error) {
	return ReplayTraceWith(r, candidate, TraceOptions{})
}

// ReplayTraceWith is ReplayTrace with options. Besides the candidate, it
// replays every key whose recorded breaker refused calls with the policy
// that ran (opt.Active), and counts how many of the recorded refusals that
// replay reproduces: the self-check at the top of the report. The replay
// uses what the trace records of the breakers (package calltrace): their
// time origin, on which it aligns the windows' buckets, and the cooldown
// of each opening, which a replay that opens within a second of a
// recorded opening takes (the same jitter draw, scaled to its own policy)
// instead of drawing its own.
func ReplayTraceWith(r io.Reader, candidate breaker.GroupPolicy, opt TraceOptions) (*TraceReport, error) {
	if err := candidate.Validate(); err != nil {
		return nil, err
	}
	if err := opt.Active.Validate(); err != nil {
		return nil, fmt.Errorf("replay: the active policy: %w", err)
	}
	dec := calltrace.NewDecoder(r)
	var (
		lists []callList
		keys  []string
		index = map[string]int32{}
		t0    int64
		n     int
		end   int64
	)
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if n == MaxTraceCalls {
			return nil, fmt.Errorf("replay: trace line %d: more than %d calls", dec.Line(), MaxTraceCalls)
		}
		k, ok := index[rec.Key]
		if !ok {
			k = int32(len(keys))
			index[rec.Key] = k
			keys = append(keys, rec.Key)
			lists = append(lists, callList{})
		}
		at := rec.Time.UnixNano()
		if n == 0 || at < t0 {
			t0 = at
		}
		end = max(end, at+int64(rec.Duration))
		n++
		if rec.Duration > maxCallDuration {
			return nil, &calltrace.LineError{Line: dec.Line(), Field: "d", Problem: fmt.Sprintf("a call of %v is longer than a replay takes (%v)", rec.Duration, maxCallDuration)}
		}
		c := traceCall{at: at, dur: uint32(rec.Duration.Microseconds()), outcome: rec.Outcome}
		if rec.Probe {
			c.flags |= flagProbe
		}
		if rec.Refused {
			c.flags |= flagRefused
		}
		if rec.Throttled {
			c.flags |= flagThrottled
		}
		lists[k].add(c)
	}
	rep := &TraceReport{Candidate: candidate, Active: opt.Active, Start: time.Unix(0, t0).UTC(), Calls: n}
	if n == 0 {
		return rep, nil
	}
	opens := map[string][]opening{}
	for _, tr := range dec.Transitions() {
		rep.Transitions++
		if tr.To == breaker.Open {
			opens[tr.Key] = append(opens[tr.Key], opening{at: tr.Time.UnixNano() - t0, cooldown: tr.Cooldown, doublings: tr.Doublings})
		}
	}
	// The breakers' clock first read the origin: the replay's must too,
	// so that its buckets fall where theirs did. An origin after the
	// first call is no breaker's: it is left out.
	originOff := int64(0)
	if o, ok := dec.Origin(); ok && o.UnixNano() <= t0 {
		rep.Origin = o
		originOff = o.UnixNano() - t0
	}
	end -= t0
	rep.Length = time.Duration(end)
	byStart := func(a, b traceCall) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	}
	byKey := make([][]traceCall, len(lists))
	for k := range lists {
		byKey[k] = lists[k].flatten()
		calls := byKey[k]
		for i := range calls {
			calls[i].at -= t0
		}
		// Lines are written as calls end; the replay needs them as they
		// started. A stable sort keeps equal instants in file order.
		if !slices.IsSortedFunc(calls, byStart) {
			slices.SortStableFunc(calls, byStart)
		}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return 0
	})
	nsec := int(end/second) + 1
	if end > int64(MaxTraceSpan) {
		return nil, fmt.Errorf("replay: the trace spans %v, more than %v", time.Duration(end), MaxTraceSpan)
	}
	if cells := nsec * len(keys); cells > maxTraceCells {
		return nil, fmt.Errorf("replay: %d keys over %v is more than %d key-seconds", len(keys), time.Duration(end).Round(time.Second), maxTraceCells)
	}
	for _, k := range order {
		key := keys[k]
		pol := policyFor(candidate, key)
		kr, err := replayKey(key, byKey[k], pol, rep.Start, nsec, end, originOff, opens[key], false)
		if err != nil {
			return nil, err
		}
		if kr.Refused > 0 {
			act := kr
			// The policy that ran follows the recording's throttle; a
			// candidate draws its own.
			if ap := policyFor(opt.Active, key); ap != pol || ap.Throttle.Enabled {
				if act, err = replayKey(key, byKey[k], ap, rep.Start, nsec, end, originOff, opens[key], true); err != nil {
					return nil, err
				}
			}
			kr.Reproduced = act.BothRefused
			kr.ActiveExtra = act.FailuresAvoided + act.SuccessesLost + act.IgnoredRefused
		}
		rep.Refused += kr.Refused
		rep.Throttled += kr.Throttled
		rep.Reproduced += kr.Reproduced
		rep.Extra += kr.ActiveExtra
		rep.Keys = append(rep.Keys, kr)
	}
	return rep, nil
}

// opening is a recorded transition to Open, its instant relative to the
// trace's start.
type opening struct {
	at        int64
	cooldown  time.Duration
	doublings int
}

// openingTolerance is how far from a recorded opening a replayed one may
// come and still take its cooldown.
const openingTolerance = int64(time.Second)

// jitter is a replayed breaker's source of cooldown jitter: the draw that
// gives a recorded opening's cooldown when the breaker opens within
// openingTolerance of it (each recorded opening serves once), a draw of
// its own otherwise.
type jitter struct {
	clk   *traceClock
	pol   breaker.Policy
	opens []opening
	used  []bool
	own   func() float64
}

func (j *jitter) next() float64 {
	best := -1
	for i, o := range j.opens {
		if j.used[i] {
			continue
		}
		d := o.at - j.clk.now
		if d < 0 {
			d = -d
		}
		if d <= openingTolerance && (best < 0 || d < abs64(j.opens[best].at-j.clk.now)) {
			best = i
		}
	}
	if best < 0 || j.pol.Jitter <= 0 {
		return j.own()
	}
	j.used[best] = true
	return drawFor(j.pol, j.opens[best])
}

// draws is a replayed breaker's source of random draws
// (breaker.WithRand), which the breaker makes for two things: the
// throttle's decision, while it admits a call in the closed state, and
// the cooldown jitter, as it opens. Each has a source of its own, so that
// the throttle's draws never take the one a recorded opening's cooldown
// was matched to.
//
// The throttle's draws come from a source seeded by the key, or, to
// follow the recording (the replay of the policy that ran), are the
// recorded decisions: 0, which refuses whatever the probability, for a
// call the recorded throttle refused, and just below 1, which admits, for
// any other. The replay of the policy that ran then refuses what the
// recorded throttle refused, as it opens for the recorded cooldowns.
type draws struct {
	jit      *jitter
	throttle func() float64 // nil: follow the recording
	// admitting is set while a call is being admitted, with its flags in
	// cur; closed is the breaker's state as its last transition left it.
	admitting bool
	closed    bool
	cur       uint8
}

func (d *draws) next() float64 {
	if !d.admitting || !d.closed {
		return d.jit.next()
	}
	switch {
	case d.throttle != nil:
		return d.throttle()
	case d.cur&flagThrottled != 0:
		return 0
	}
	return math.Nextafter(1, 0)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// drawFor returns the jitter draw u in [0, 1) with which a breaker on
// policy p, at o's doublings, opens for o's cooldown: the breaker opens
// for base·(1 - J + 2J·u), base = min(OpenFor·2^doublings, MaxOpenFor). A
// cooldown out of the policy's reach takes the nearest draw.
func drawFor(p breaker.Policy, o opening) float64 {
	base := int64(p.MaxOpenFor)
	if l := o.doublings; l < 62 && p.OpenFor <= p.MaxOpenFor>>l {
		base = min(int64(p.OpenFor)<<l, int64(p.MaxOpenFor))
	}
	j := p.Jitter
	want := int64(o.cooldown)
	u := (float64(want)/float64(base) - 1 + j) / (2 * j)
	below1 := math.Nextafter(1, 0)
	u = min(max(u, 0), below1)
	// The recorded cooldown has microseconds; find the draw whose
	// cooldown, as the breaker computes it, is nearest, within a few
	// steps of u.
	got := func(u float64) int64 { return int64(float64(base) * (1 - j + 2*j*u)) }
	for range 64 {
		switch g := got(u); {
		case g < want && u < below1:
			u = math.Nextafter(u, 1)
		case g > want && u > 0:
			u = math.Nextafter(u, 0)
		default:
			return u
		}
	}
	return u
}

// policyFor is gp's policy for key, as a breaker.Group would pick it.
func policyFor(gp breaker.GroupPolicy, key string) breaker.Policy {
	if p, ok := gp.Overrides[key]; ok {
		return p
	}
	if m, _ := breaker.SplitKey(key); m != key {
		if p, ok := gp.Overrides[m]; ok {
			return p
		}
	}
	if gp.Default == (breaker.Policy{}) {
		return breaker.DefaultPolicy()
	}
	return gp.Default
}

// callList collects one key's calls in chunks, so that reading a trace
// of millions of calls copies each call once rather than every time a
// slice outgrows its array. Chunks start small and grow with the list, up
// to callChunk, so that a key called once takes little more than its call.
type callList struct {
	chunks [][]traceCall
	n      int
}

const (
	firstChunk = 16
	callChunk  = 1 << 14
)

func (l *callList) add(c traceCall) {
	if len(l.chunks) == 0 || len(l.chunks[len(l.chunks)-1]) == cap(l.chunks[len(l.chunks)-1]) {
		l.chunks = append(l.chunks, make([]traceCall, 0, min(max(firstChunk, l.n), callChunk)))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, c)
	l.n++
}

func (l *callList) flatten() []traceCall {
	out := make([]traceCall, 0, l.n)
	for _, ch := range l.chunks {
		out = append(out, ch...)
	}
	l.chunks = nil
	return out
}

// pending is a call the candidate admitted, until its recorded end.
type pending struct {
	end  int64
	seq  int
	done func(error)
	err  error
}

// traceClock is the trace's own time. The breaker's window buckets are
// aligned on the clock's instants, so the replay runs on the recorded
// instants rather than on the simulation's epoch: a breaker that tripped
// on a window's edge in production trips on it in the replay.
type traceClock struct {
	base time.Time
	now  int64 // ns since base
}

func (c *traceClock) Now() time.Time                  { return c.base.Add(time.Duration(c.now)) }
func (c *traceClock) set(ns int64)                    { c.now = ns }
func (c *traceClock) since(t time.Time) time.Duration { return t.Sub(c.base) }

// WithTimeout leaves ctx as it is: nothing in a replay waits on a context,
// and a candidate's Timeout is applied by the breaker from the clock (a
// call that took longer counts as a timeout). A real deadline would start
// a wall-clock timer for every call.
func (c *traceClock) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

// replayKey replays one key's calls through a breaker on pol. follow
// makes its throttle follow the recorded throttle's decisions (see
// draws).
func replayKey(key string, calls []traceCall, pol breaker.Policy, start time.Time, nsec int, end, originOff int64, opens []opening, follow bool) (*KeyReport, error) {
	kr := &KeyReport{Key: key, Policy: pol, Seconds: make([]TraceSecond, nsec)}
	// The breaker's time starts where the recorded breakers' did (the
	// first call's instant if the trace does not say): its first reading
	// of the clock is at breaker.New.
	clk := traceClock{base: start, now: originOff}
	h := fnv.New64a()
	h.Write([]byte(key))
	own := rand.New(rand.NewPCG(h.Sum64(), streamJitter))
	jit := &jitter{clk: &clk, pol: pol, opens: opens, used: make([]bool, len(opens)), own: own.Float64}
	dr := &draws{jit: jit, closed: true}
	if !follow {
		dr.throttle = rand.New(rand.NewPCG(h.Sum64(), streamThrottle)).Float64
	}
	br, err := breaker.New(key, pol, breaker.WithClock(&clk), breaker.WithRand(dr.next),
		breaker.OnTransition(func(ev breaker.Event) {
			dr.closed = ev.To == breaker.Closed
			kr.Transitions = append(kr.Transitions, Transition{
				At: clk.since(ev.Time), From: ev.From, To: ev.To, Reason: ev.Reason,
				Snapshot: ev.Snapshot, Cooldown: ev.Cooldown, Doublings: ev.Doublings,
				Trip: tripOf(ev, pol.SlowCall),
			})
		}))
	if err != nil {
		return nil, err
	}
	var inflight pendingHeap
	settle := func(until int64) {
		for len(inflight) > 0 && inflight[0].end <= until {
			p := inflight.pop()
			clk.set(p.end)
			p.done(p.err)
		}
	}
	refusedSince := int64(-1)
	ctx := context.Background()
	// run is the call Do makes: one closure for every call of the key.
	var cur struct {
		ran bool
		end int64
		err error
	}
	run := func(context.Context) error {
		dr.admitting = false
		cur.ran = true
		clk.set(cur.end)
		return cur.err
	}
	for i, c := range calls {
		settle(c.at)
		clk.set(c.at)
		sec := &kr.Seconds[c.at/second]
		sec.Calls++
		kr.Calls++
		refused := c.flags&flagRefused != 0
		throttled := refused && c.flags&flagThrottled != 0
		failed := !refused && (c.outcome == breaker.Failure || c.outcome == breaker.Timeout)
		switch {
		case throttled:
			// The recorded breaker was closed: an open span ends.
			kr.Refused++
			sec.Refused++
			kr.Throttled++
			sec.Throttled++
			if refusedSince >= 0 {
				kr.Recorded = append(kr.Recorded, Span{time.Duration(refusedSince), time.Duration(c.at)})
				refusedSince = -1
			}
		case refused:
			kr.Refused++
			sec.Refused++
			if refusedSince < 0 {
				refusedSince = c.at
			}
		default:
			if c.flags&flagProbe != 0 {
				kr.Probes++
			} else if refusedSince >= 0 {
				kr.Recorded = append(kr.Recorded, Span{time.Duration(refusedSince), time.Duration(c.at)})
				refusedSince = -1
			}
			if failed {
				kr.Failed++
				sec.Failed++
			}
		}
		var outcome error
		switch {
		case refused:
			outcome = recordedErrors[breaker.Ignored]
		case c.outcome != breaker.Success:
			outcome = recordedErrors[c.outcome]
		}
		callEnd := c.at + int64(c.dur)*int64(time.Microsecond)
		if refused {
			callEnd = c.at
		}
		var done func(error)
		dr.admitting, dr.cur = true, c.flags
		if len(inflight) == 0 && (i+1 == len(calls) || callEnd <= calls[i+1].at) {
			// Nothing else happens while this call runs: Do runs it
			// start to end, without the allocation of the two-step form
			// (calls of a key's quiet spells).
			cur.ran, cur.end, cur.err = false, callEnd, outcome
			err = br.Do(ctx, run)
			dr.admitting = false
			if cur.ran {
				if refused {
					kr.Unknown++
				} else {
					kr.BothAdmitted++
				}
				continue
			}
		} else {
			_, done, err = br.Allow(ctx)
			dr.admitting = false
		}
		if err != nil {
			sec.CandidateRefused++
			if calltrace.IsThrottled(err) {
				sec.CandidateThrottled++
				kr.CandidateThrottled++
			}
			switch {
			case refused:
				kr.BothRefused++
			case failed:
				kr.FailuresAvoided++
			case c.outcome == breaker.Success:
				kr.SuccessesLost++
			default:
				kr.IgnoredRefused++
			}
			continue
		}
		if refused {
			kr.Unknown++
			done(outcome)
			continue
		}
		kr.BothAdmitted++
		inflight.push(pending{end: callEnd, seq: i, done: done, err: outcome})
	}
	settle(end)
	if refusedSince >= 0 {
		kr.Recorded = append(kr.Recorded, Span{time.Duration(refusedSince), time.Duration(end)})
	}
	return kr, nil
}

// pendingHeap orders admitted calls by end, then by start.
type pendingHeap []pending

func (h pendingHeap) less(i, j int) bool {
	return h[i].end < h[j].end || (h[i].end == h[j].end && h[i].seq < h[j].seq)
}

func (h *pendingHeap) push(p pending) {
	*h = append(*h, p)
	q := *h
	for i := len(q) - 1; i > 0; {
		par := (i - 1) / 2
		if !q.less(i, par) {
			break
		}
		q[i], q[par] = q[par], q[i]
		i = par
	}
}

func (h *pendingHeap) pop() pending {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = pending{}
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
