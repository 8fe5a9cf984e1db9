package breaker

import (
	"time"

	"github.com/govkit/breaker/internal/window"
)

// Counters are a breaker's monotonic totals since it was created, for
// metrics: they never go down; take differences for rates. What the
// window holds now is a [Snapshot]; everything a breaker shows is its
// [Status], which holds both.
type Counters struct {
	// Admitted is the number of admitted calls (their function was
	// called) that have returned: the sum of Successes, Failures,
	// Timeouts and Ignored. Calls still running are not in it; counting
	// them at admission would cost a second counter increment on every
	// call.
	Admitted uint64 `json:"admitted"`
	// Successes, Failures, Timeouts and Ignored count the outcomes of
	// admitted calls that have returned, probes included. Failures does
	// not include Timeouts.
	Successes uint64 `json:"successes"`
	Failures  uint64 `json:"failures"`
	Timeouts  uint64 `json:"timeouts"`
	Ignored   uint64 `json:"ignored"`
	// Slow is the number of closed-state calls slower than Policy.SlowCall.
	Slow uint64 `json:"slow"`
	// Exempt is the number of outcomes left out of the window because
	// their target was warming up.
	Exempt uint64 `json:"exempt"`
	// Rejected is the number of calls refused with ErrOpen.
	Rejected uint64 `json:"rejected"`
	// ShadowRejected is the number of calls a shadow breaker admitted but
	// would have refused.
	ShadowRejected uint64 `json:"shadow_rejected"`
	// Fallbacks is the number of results served by [Fallback],
	// [FallbackOnFailure], [FallbackResult] or [FallbackResultOnFailure] instead of the
	// downstream, for calls this breaker refused or counted as failed.
	// They are not outcomes: a refusal is counted in Rejected, a failure
	// in Failures.
	Fallbacks uint64 `json:"fallbacks"`
	// ProbesPassed and ProbesFailed count half-open verdicts.
	ProbesPassed uint64 `json:"probes_passed"`
	ProbesFailed uint64 `json:"probes_failed"`
	// Opens is the number of transitions to Open.
	Opens uint64 `json:"opens"`
	// OpenTime is the time the breaker has spent open or half-open, the
	// current outage included.
	OpenTime time.Duration `json:"open_time_ns"`
}

// Counters returns the breaker's counters. Each is read atomically; the
// set is not one instant, so two of them may disagree by the calls that
// ended while it was read.
func (b *Breaker) Counters() Counters {
	now := b.opt.tb.Now()
	// Every field is a sum of monotonic counters, each read once, so every
	// field is monotonic from one call to the next. The window's outcomes
	// are those of the windows sealed so far and of the current one, read
	// under the lock that seals, so that a window's outcomes are in one of
	// the two, never both or neither. Slow is read before the outcomes, so
	// Slow <= Admitted.
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
	if b.state.Load().state() != Closed && b.outageEdge != never {
		open += max(0, now-b.outageEdge)
	}
	b.mu.Unlock()
	o := func(i int) uint64 { return b.other[i].Load() }
	c.Successes = tot[window.Success] + o(oSuccess)
	c.Failures = tot[window.Failure] + o(oFailure)
	c.Timeouts = tot[window.Timeout] + o(oTimeout)
	c.Ignored = b.tally.Load(countIgnored)
	c.Slow = tot[window.Slow]
	c.Exempt = o(oExempt)
	c.Rejected = b.tally.Load(countRejected)
	c.ShadowRejected = b.tally.Load(countShadowRejected)
	c.Fallbacks = b.tally.Load(countFallbacks)
	c.Admitted = c.Successes + c.Failures + c.Timeouts + c.Ignored
	c.OpenTime = time.Duration(open)
	return c
}

// OpenSince returns when the current outage began: the trip that opened
// the breaker, however many times it has reopened since, or the end of a
// forced open (see [ModeForcedOpen]), whichever came last. ok is false
// while the breaker is closed.
func (b *Breaker) OpenSince() (t time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load().state() == Closed || b.outageEdge == never {
		return time.Time{}, false
	}
	return b.opt.tb.Time(b.outageEdge), true
}

// Status is everything one breaker shows, for a dashboard or a health
// endpoint: its state and policy, its [Counters] (totals since it was
// made) and its [Snapshot] (what the window holds now), among the rest.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	Mode  Mode   `json:"mode"`
	// OpenSince is when the current outage began and OpenDuration how
	// long it has lasted, on the breaker's clock; both are empty while
	// closed. OpenDuration is elapsed time, not a cooldown (that is
	// Policy.OpenFor).
	OpenSince    *time.Time    `json:"open_since,omitempty"`
	OpenDuration time.Duration `json:"open_duration_ns,omitempty"`
	// TripReason and Trip say why the outage began: the rule that tripped
	// the closed breaker and the window that tripped it, the same for the
	// whole outage. Reason is why it is open or half-open now: the trip
	// rule, or what reopened it since (probe_failed, probe_timeout,
	// forced_open). A refusal's [OpenError] gives all three. All are
	// empty while closed.
	TripReason Reason   `json:"trip_reason,omitempty"`
	Trip       Snapshot `json:"trip"`
	Reason     Reason   `json:"reason,omitempty"`
	// ProbeAt is when an open breaker's cooldown ends and it lets probes
	// through, as a refusal's [OpenError.Until] says; empty in the other
	// states and for a breaker forced open, which waits for its mode to
	// change. A status page shows it as the next probe.
	ProbeAt *time.Time `json:"probe_at,omitempty"`
	// Cooldown is the length of the cooldown that ends at ProbeAt, as
	// drawn with its jitter and doubled after failed probes; zero when
	// ProbeAt is empty.
	Cooldown time.Duration `json:"cooldown_ns,omitempty"`
	// Window is the sliding window now, with its failure ratio.
	Window     Snapshot `json:"window"`
	ErrorRatio float64  `json:"error_ratio"`
	Counters   Counters `json:"counters"`
	Policy     Policy   `json:"policy"`
	// Candidate is what the breaker's candidate policy has done, if the
	// group's document has one for it (see [GroupPolicy.Candidate]).
	Candidate *CandidateStatus `json:"candidate,omitempty"`
	// Latency is the latency over the window and the deadline in force,
	// for a breaker that times its calls; nil for one that does not.
	Latency *Latency `json:"latency,omitempty"`
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
	// Copies, here and for the candidate below, so that only a breaker
	// that has one pays for the pointer: taking the address of the
	// variable the if statement declares moves it to the heap on every
	// call, and a snapshot of 10,000 untimed breakers made 20,000 of them.
	if lat, ok := b.Latency(); ok {
		l := lat
		s.Latency = &l
	}
	if e := b.openErr.Load(); e != nil && s.State != Closed {
		s.Reason, s.TripReason, s.Trip = e.Reason, e.TripReason, e.Snapshot
		// The error of a half-open episode has no Until; one read in a
		// race with the end of the cooldown may still have it, and a
		// probe time in the past says no more than none.
		if s.State == Open && !e.Until.IsZero() {
			u := e.Until
			s.ProbeAt, s.Cooldown = &u, e.Cooldown
		}
	}
	if t, ok := b.OpenSince(); ok {
		// A copy, so that only a breaker that is not closed pays for the
		// pointer: &t itself would move t to the heap on every call, and a
		// snapshot of a group of 10,000 closed breakers made 10,000 of them.
		since := t
		s.OpenSince = &since
		s.OpenDuration = max(0, b.opt.tb.Time(b.opt.tb.Now()).Sub(t))
	}
	if c, ok := b.Candidate(); ok {
		cs := c
		s.Candidate = &cs
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

// Transitions returns how many transitions the breaker has made since it
// was created, by from, to and reason, in the order in which each
// combination first happened; combinations that never happened are absent.
// Like [Counters] the counts only grow, so an exporter that reads them
// when it is scraped counts every transition, however late it was set up.
// The result is a copy the caller may keep; it is nil for a breaker that
// has never left Closed.
func (b *Breaker) Transitions() []TransitionCount {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hist == nil || len(b.hist.transitions) == 0 {
		return nil
	}
	return append([]TransitionCount(nil), b.hist.transitions...)
}

// possibleTransitions is every transition the state machine makes, by
// from, to and reason: the trips by each rule, the cooldown's end, the
// probes' verdicts, and the operator's forced modes, releases and resets.
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

// PossibleTransitions returns every transition a breaker can make, by
// from, to and reason, each with a Count of 0, in a fixed order:
// [Breaker.Transitions] never reports one that is not here. An exporter
// shows each at 0 from a breaker's creation, as Prometheus's practice for
// labelled counters asks: a series that first appears at 1 shows no
// increase, so a rate, an increase or a changes() over it would miss a
// breaker's first trip. The result is a new slice the caller may keep.
func PossibleTransitions() []TransitionCount {
	return append([]TransitionCount(nil), possibleTransitions[:]...)
}

// countTransitionLocked counts a transition being made. It runs only on
// transitions, under b.mu, so the calls pay nothing for it. b.mu must be
// held.
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
