package breaker

import (
	"time"
)

// Counters are a breaker's totals since it was created, for metrics: they
// never go down. What the window holds now is a [Snapshot].
type Counters struct {
	// Admitted is the admitted calls that have returned (Successes +
	// Failures + Timeouts + Ignored); calls still running are not in it.
	Admitted uint64 `json:"admitted"`
	// The outcomes of returned calls, probes included. Failures does not
	// include Timeouts.
	Successes uint64 `json:"successes"`
	Failures  uint64 `json:"failures"`
	Timeouts  uint64 `json:"timeouts"`
	Ignored   uint64 `json:"ignored"`
	// Slow is the number of closed-state calls slower than Policy.SlowCall.
	Slow uint64 `json:"slow"`
	// Exempt is the outcomes left out of the window by warmup.
	Exempt uint64 `json:"exempt"`
	// Rejected is the number of calls refused with ErrOpen.
	Rejected uint64 `json:"rejected"`
	// ShadowRejected is the calls a shadow breaker would have refused.
	ShadowRejected uint64 `json:"shadow_rejected"`
	// Throttled is the calls Policy.Throttle refused (also in Rejected),
	// or, in a shadow breaker, would have refused (also in ShadowRejected).
	Throttled uint64 `json:"throttled"`
	// Fallbacks is the fallbacks served (see [Fallback]) for calls this
	// breaker refused or counted as failed, which are also in Rejected or
	// Failures.
	Fallbacks uint64 `json:"fallbacks"`
	// ProbesPassed and ProbesFailed count half-open verdicts.
	ProbesPassed uint64 `json:"probes_passed"`
	ProbesFailed uint64 `json:"probes_failed"`
	// Opens is the number of transitions to Open.
	Opens uint64 `json:"opens"`
	// OpenTime is the time spent open or half-open, this outage included.
	OpenTime time.Duration `json:"open_time_ns"`
}

// Counters returns the breaker's counters. Each is read atomically, but
// not all at one instant.
func (b *Breaker) Counters() Counters {
	now := b.opt.tb.Now()
	// Sums of monotonic counters, each read once. Sealed and current
	// windows are read under the lock that seals, so each is counted once;
	// Slow is read before the outcomes, so Slow <= Admitted.
	var c Counters
	var open int64
	b.mu.Lock()
	tot := b.win.Load().Outcomes()
	if h := b.hist; h != nil {
		for k := range tot {
			tot[k] += h.sealed[k]
		}
		c.ProbesPassed = uint64(h.probesOK)
		c.ProbesFailed = uint64(h.probesBad)
		c.Opens = uint64(h.opens)
		open = h.openTotal
	}
	if b.hist != nil && b.hist.openedAt != never {
		open += max(0, now-b.hist.openedAt)
	}
	b.mu.Unlock()
	o := func(i int) uint64 { return b.other[i].Load() }
	c.Successes = tot[kSuccess] + o(oSuccess)
	c.Failures = tot[kFailure] + o(oFailure)
	c.Timeouts = tot[kTimeout] + o(oTimeout)
	c.Ignored = b.tally.Load(countIgnored)
	c.Slow = tot[kSlow]
	c.Exempt = o(oExempt)
	c.Rejected = b.tally.Load(countRejected)
	c.ShadowRejected = b.tally.Load(countShadowRejected)
	c.Throttled = b.throttledTotal()
	c.Fallbacks = b.tally.Load(countFallbacks)
	c.Admitted = c.Successes + c.Failures + c.Timeouts + c.Ignored
	c.OpenTime = time.Duration(open)
	return c
}

// Status is everything one breaker shows, for a dashboard or a health
// endpoint.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	Mode  Mode   `json:"mode"`
	// Outage is the outage in progress, what alerts grade: when it
	// began, how long it has lasted, the trip that began it and what has
	// happened since; nil once it has settled, or if none began.
	Outage *Outage `json:"outage,omitempty"`
	// Reason is why the breaker is not closed now: the trip rule, or
	// what reopened it since, as in [OpenError]. Empty while closed.
	Reason Reason `json:"reason,omitempty"`
	// Until is when an open breaker's cooldown ends ([OpenError.Until]);
	// empty in the other states and when forced open.
	Until *time.Time `json:"until,omitempty"`
	// Cooldown is the length, jittered and doubled, of the cooldown that
	// ends at Until.
	Cooldown time.Duration `json:"cooldown_ns,omitempty"`
	// Window is the sliding window now, with its failure ratio.
	Window     Snapshot `json:"window"`
	ErrorRatio float64  `json:"error_ratio"`
	Counters   Counters `json:"counters"`
	Policy     Policy   `json:"policy"`
	// Latency is the window's latency and the deadline, if timed.
	Latency *Latency `json:"latency,omitempty"`
	// ThrottleProbability is the probability with which Policy.Throttle
	// refuses the breaker's next call: 0 while it is not throttling.
	ThrottleProbability float64 `json:"throttle_probability"`
}

// Status returns the breaker's state, window, counters and policy, and
// its latency if it times its calls.
func (b *Breaker) Status() Status {
	s := Status{
		Name:     b.name,
		State:    b.State(),
		Mode:     b.Mode(),
		Window:   b.Snapshot(),
		Counters: b.Counters(),
		Policy:   b.Policy(),
	}
	s.ErrorRatio = s.Window.ErrorRatio()
	s.ThrottleProbability = b.throttleProbabilityNow(b.opt.tb.Now())
	// Copies, here and below, so that only a breaker that has one pays
	// for the pointer (docs/internals.md, "Where the breaker's fields live").
	if lat, ok := b.Latency(); ok {
		l := lat
		s.Latency = &l
	}
	if e := b.openErr.Load(); e != nil && s.State != Closed {
		s.Reason = e.Reason
		// Only an open breaker has a probe time: an error read in a race
		// with the cooldown's end may still carry a past one.
		if s.State == Open && !e.Until.IsZero() {
			u := e.Until
			s.Until, s.Cooldown = &u, e.Cooldown
		}
	}
	b.mu.Lock()
	o, ok := b.outageLocked(b.opt.tb.Now())
	b.mu.Unlock()
	if ok {
		oc := o // a copy, as above
		s.Outage = &oc
	}
	return s
}

// TransitionCount is how many times a breaker has moved From one state To
// another for one Reason.
type TransitionCount struct {
	From   State  `json:"from"`
	To     State  `json:"to"`
	Reason Reason `json:"reason"`
	Count  uint64 `json:"count"`
}

// Transitions returns the transitions made since creation, counted by
// from, to and reason, in the order each first happened; the counts only
// grow. The result is a copy, nil for a breaker that never left Closed.
func (b *Breaker) Transitions() []TransitionCount {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hist == nil || len(b.hist.transitions) == 0 {
		return nil
	}
	return append([]TransitionCount(nil), b.hist.transitions...)
}

// possibleTransitions is every transition the state machine makes.
var possibleTransitions = [...]TransitionCount{
	{From: Closed, To: Open, Reason: ReasonErrorRatio},
	{From: Closed, To: Open, Reason: ReasonErrorCount},
	{From: Closed, To: Open, Reason: ReasonSlowRatio},
	{From: Closed, To: Open, Reason: ReasonConsecutiveFailures},
	{From: Closed, To: Open, Reason: ReasonForcedOpen},
	{From: Open, To: HalfOpen, Reason: ReasonCooldown},
	{From: Open, To: HalfOpen, Reason: ReasonReleased},
	{From: Open, To: Closed, Reason: ReasonForcedClosed},
	{From: Open, To: Closed, Reason: ReasonReset},
	{From: HalfOpen, To: Open, Reason: ReasonProbeFailed},
	{From: HalfOpen, To: Open, Reason: ReasonProbeTimeout},
	{From: HalfOpen, To: Open, Reason: ReasonForcedOpen},
	{From: HalfOpen, To: Closed, Reason: ReasonProbesPassed},
	{From: HalfOpen, To: Closed, Reason: ReasonForcedClosed},
	{From: HalfOpen, To: Closed, Reason: ReasonReset},
}

// PossibleTransitions returns, in a fixed order and at Count 0, every
// transition [Breaker.Transitions] can report, so that an exporter can
// show each from a breaker's creation and a rate sees its first trip
// (docs/observability.md). The result is a new slice.
func PossibleTransitions() []TransitionCount {
	return append([]TransitionCount(nil), possibleTransitions[:]...)
}

// countTransitionLocked counts a transition being made. b.mu must be held.
func (b *Breaker) countTransitionLocked(from, to State, reason Reason) {
	h := b.histLocked()
	for i := range h.transitions {
		if t := &h.transitions[i]; t.From == from && t.To == to && t.Reason == reason {
			t.Count++
			return
		}
	}
	h.transitions = append(h.transitions, TransitionCount{From: from, To: to, Reason: reason, Count: 1})
}
