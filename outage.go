package breaker

import (
	"strconv"
	"time"
)

// An Outage is one incident of a breaker, the unit that alerts grade and
// every view reports. It begins when a settled breaker trips (or is forced
// open), and it is over, settled, once the breaker has stayed closed for
// Policy.MaxOpenFor: the same quiet period after which the cooldown's
// doubling starts over. Closes and trips inside it belong to it: a
// downstream whose probes pass and that trips the breaker again at once is
// one outage, whose length grows across its closes. [Status] carries the
// outage in progress, and the events of its transitions carry it too.
// docs/behaviour.md (§4 Outages) has the rules.
type Outage struct {
	// Since is when it began: its first trip, or the end of a forced open.
	Since time.Time `json:"since"`
	// Duration is how long it has lasted: from Since to the instant it
	// was read, its closes included.
	Duration time.Duration `json:"duration_ns"`
	// Trip is the trip that began it, with the evidence its rule judged.
	Trip Trip `json:"trip"`
	// Trips is the trips from Closed in it, the first included; Reopens
	// the failed probes and probe timeouts that sent it back to Open.
	Trips   int `json:"trips"`
	Reopens int `json:"reopens"`
	// Refused is the calls refused with ErrOpen since it began.
	Refused uint64 `json:"refused"`
	// ProbesPassed and ProbesFailed are its probes' verdicts;
	// ProbesPassedOnError is the passes of probes that answered with an
	// error, which pass unless Policy.StrictProbes is set.
	ProbesPassed        int `json:"probes_passed"`
	ProbesFailed        int `json:"probes_failed"`
	ProbesPassedOnError int `json:"probes_passed_on_error"`
	// ClosedAt is when the breaker last closed in it, and SettlesAt when
	// the outage is over if the breaker stays closed; both zero while the
	// breaker is open or half-open.
	ClosedAt  time.Time `json:"closed_at,omitzero"`
	SettlesAt time.Time `json:"settles_at,omitzero"`
}

// Recovering reports whether the breaker is closed in the outage: its
// probes passed, and it has not yet stayed closed long enough to settle.
func (o Outage) Recovering() bool { return !o.ClosedAt.IsZero() }

// Trip is what opened a breaker: the rule and the evidence it judged.
type Trip struct {
	// Reason is the rule that tripped (ReasonErrorRatio, …), or
	// ReasonForcedOpen.
	Reason Reason `json:"reason"`
	// Window is the window the rule judged.
	Window Snapshot `json:"window"`
	// Run is the run of consecutive failures at the trip, counted while
	// Policy.ConsecutiveFailures is set.
	Run uint64 `json:"run"`
	// SlowCall is the policy's SlowCall at the trip, what Window.Slow
	// counts calls slower than; 0 if the slow rule was off.
	SlowCall time.Duration `json:"slow_call_ns"`
}

// String leads with the evidence of the rule that tripped: "error_ratio:
// 9 of 18 calls failed, 9 of them timeouts", "slow_ratio: 88 of 169 calls
// slower than 200ms (0 failed)", "consecutive_failures: 7 failures in a
// row", or the reason alone when there is no evidence (a forced open).
func (t Trip) String() string {
	s := string(t.Reason)
	w := t.Window
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	switch {
	case t.Reason == ReasonConsecutiveFailures && t.Run > 0:
		s += ": " + u(t.Run) + " failures in a row"
		if w.Counted > 0 {
			s += " (" + u(w.Failures) + " of " + u(w.Counted) + " calls failed)"
		}
	case t.Reason == ReasonSlowRatio && w.Counted > 0:
		s += ": " + u(w.Slow) + " of " + u(w.Counted) + " calls slower than " + t.SlowCall.String() +
			" (" + u(w.Failures) + " failed)"
	case w.Counted > 0:
		s += ": " + u(w.Failures) + " of " + u(w.Counted) + " calls failed, " + u(w.Timeouts) + " of them timeouts"
	}
	return s
}

// brief is the evidence as an error message has it: ", 12/24 failed, 8
// timeouts", ", 88/169 slower than 200ms", ", 7 failures in a row".
func (t Trip) brief() string {
	w := t.Window
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	switch {
	case t.Reason == ReasonConsecutiveFailures && t.Run > 0:
		return ", " + u(t.Run) + " failures in a row"
	case t.Reason == ReasonSlowRatio && w.Counted > 0:
		return ", " + u(w.Slow) + "/" + u(w.Counted) + " slower than " + t.SlowCall.String()
	case w.Counted > 0:
		return ", " + u(w.Failures) + "/" + u(w.Counted) + " failed, " + u(w.Timeouts) + " timeouts"
	}
	return ""
}

// outage is the breaker's record of its outage in progress. Guarded by
// b.mu.
type outage struct {
	active   bool
	since    int64
	trip     Trip
	trips    int
	reopens  int
	refused0 uint64 // Counters.Rejected when it began
	passed   int
	failed   int
	onError  int
}

// settledLocked reports whether the breaker has no outage in progress at
// now under r: none began, or it has stayed closed for MaxOpenFor since
// its last close. b.mu must be held.
func (b *Breaker) settledLocked(now int64, r *rules) bool {
	h := b.hist
	if h == nil || !h.out.active {
		return true
	}
	return b.state.Load().state() == Closed && h.closedAt != never && now-h.closedAt >= r.maxOpenFor
}

// beginOutageLocked starts an outage at now with trip t, or, if one is in
// progress, counts a trip into it; it reports whether it began a new one.
// b.mu must be held.
func (b *Breaker) beginOutageLocked(now int64, r *rules, t Trip, trip bool) bool {
	h := b.histLocked()
	if !b.settledLocked(now, r) {
		if trip {
			h.out.trips++
			if h.out.trip.Reason == ReasonForcedOpen {
				// The first trip of an outage an operator's hold began is
				// its cause: the hold has no evidence to show.
				h.out.trip = t
			}
		}
		return false
	}
	h.out = outage{active: true, since: now, trip: t, refused0: b.tally.Load(countRejected)}
	if trip {
		h.out.trips = 1
	}
	return true
}

// outageLocked is the outage in progress at now, if any. b.mu must be
// held.
func (b *Breaker) outageLocked(now int64) (Outage, bool) {
	r := b.rules.Load()
	if b.settledLocked(now, r) {
		return Outage{}, false
	}
	h := b.hist // not nil: an outage is in progress
	o := h.out
	out := Outage{
		Since:               b.opt.tb.Time(o.since),
		Duration:            time.Duration(max(0, now-o.since)),
		Trip:                o.trip,
		Trips:               o.trips,
		Reopens:             o.reopens,
		Refused:             b.tally.Load(countRejected) - o.refused0,
		ProbesPassed:        o.passed,
		ProbesFailed:        o.failed,
		ProbesPassedOnError: o.onError,
	}
	if b.state.Load().state() == Closed && h.closedAt != never {
		out.ClosedAt = b.opt.tb.Time(h.closedAt)
		out.SettlesAt = b.opt.tb.Time(h.closedAt + r.maxOpenFor)
	}
	return out, true
}
