package breaker

import (
	"math"
	"time"
)

// refModel is the reference model of TestModel: the contract written as
// plainly as possible, with no atomics, no packing and no cleverness. It is
// driven by one goroutine, so it needs no lock.
//
// Time: the model keeps the breaker's internal time, which never goes
// backwards. A clock reading earlier than the latest internal time is a
// pause of zero length: the skew grows so that the reading maps to the
// latest internal time, and later readings continue at the clock's rate.
// Every duration is measured on internal time; instants the breaker shows
// (Event.Time, OpenError.Since/Until) are base + internal offset.
type refModel struct {
	name string
	base time.Time // the clock's reading when the breaker was created
	clk  time.Time // the clock's reading now
	now  int64     // internal offset of the latest reading
	skew int64
	u    float64 // the jitter draw, already mapped into [0, 1)

	pol   Policy
	state State
	mode  Mode
	gen   uint64 // bumped on every transition and when a closed window is reshaped

	level     int
	openedAt  int64 // when it last left Closed; refNever while closed
	closedAt  int64 // when it last closed; refNever if never, or since Reset
	out       refOutage
	lastTrip  Reason  // the rule of the latest trip from Closed
	draw      float64 // the running cooldown's jitter draw
	openUntil int64   // open: end of the cooldown
	oe        *OpenError

	// Half-open episode.
	issued, passed int
	inflight       map[int]int64 // admission of each probe of this episode with no verdict

	win       []refEntry // outcomes recorded in the current window
	thr       []int64    // when each call the throttle refused in this generation was
	thrQ      uint32     // the throttle's refusal probability in force, × 2^32; 1 while its end waits
	thrUp     int64      // when the probability was last judged above 0
	consec    int
	warmUntil int64
	marks     int64 // refMarksSeen, or when a plain success is next looked at for a mark

	c         Counters // every field but OpenTime
	openTotal int64
	events    []Event
}

// refOutage is the outage in progress, as docs/behaviour.md (§4 Outages)
// has it.
type refOutage struct {
	active                bool
	since                 int64
	trip                  Trip
	trips, reopens        int
	refused0              uint64
	passed, failed, onErr int
}

type refEntry struct {
	t                   int64
	fail, timeout, slow bool
}

// Roles of an admitted call, as the model sees them.
const (
	refCounted uint8 = iota // closed: its outcome goes to the window
	refProbe                // half-open probe: its outcome is a verdict
	refShadow               // admitted by a shadow breaker that would refuse it
	refRefused = 0xFF
)

const (
	maxRefLevel = 62            // the cooldown stops doubling here
	refNever    = math.MinInt64 // no such instant
)

func refFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func newRefModel(name string, base time.Time, p Policy, u float64, startCold bool) *refModel {
	if !(u >= 0 && u < 1) {
		u = 0.5
	}
	m := &refModel{
		name: name, base: base, clk: base, u: u, pol: p,
		openedAt: refNever, closedAt: refNever, warmUntil: refNever,
		inflight: map[int]int64{},
	}
	if startCold && p.Warmup > 0 {
		m.warmUntil = int64(p.Warmup)
	}
	return m
}

// read is the breaker reading its clock.
func (m *refModel) read() int64 {
	v := int64(m.clk.Sub(m.base)) + m.skew
	if v < m.now {
		m.skew += m.now - v
		v = m.now
	}
	m.now = v
	return v
}

// clockFor returns the clock reading at which internal time is off, for a
// target later than now.
func (m *refModel) clockFor(off int64) time.Time {
	return m.base.Add(time.Duration(off - m.skew))
}

func (m *refModel) at(off int64) time.Time { return m.base.Add(time.Duration(off)) }

// sum is the window at now: the entries whose bucket index lies in
// idx(now)-Buckets+1 .. idx(now), bucket index = floor(t/width).
func (m *refModel) sum(now int64) Snapshot {
	width := int64(m.pol.Window) / int64(m.pol.Buckets)
	hi := refFloorDiv(now, width)
	lo := hi - int64(m.pol.Buckets) + 1
	var s Snapshot
	for _, e := range m.win {
		if i := refFloorDiv(e.t, width); i < lo || i > hi {
			continue
		}
		s.Counted++
		if e.fail {
			s.Failures++
		}
		if e.timeout {
			s.Timeouts++
		}
		if e.slow {
			s.Slow++
		}
	}
	return s
}

// throttleQ is Policy.Throttle's refusal probability at now, × 2^32: 0
// unless the breaker is closed, not forced closed, and throttles; else
// max(0, (requests - K·accepts) / (requests + 1)) once the window holds
// Throttle.MinRequests requests, where requests are the counted calls and
// the refusals in the window's buckets, accepts the counted successes.
func (m *refModel) throttleQ(now int64) uint32 {
	t := m.pol.Throttle
	if !t.Enabled || m.state != Closed || m.mode == ModeForcedClosed {
		return 0
	}
	s := m.sum(now)
	requests := s.Counted + m.refusedInWindow(now)
	if requests == 0 || requests < uint64(t.MinRequests) {
		return 0
	}
	p := (float64(requests) - t.K*float64(s.Counted-s.Failures)) / (float64(requests) + 1)
	if p <= 0 {
		return 0
	}
	return uint32(min(max(p*(1<<32), 2), 1<<32-1))
}

// judgeThrottle is a judgement of the throttle's probability at now: a
// probability above 0 is put in force; 0, after throttling, waits as 1
// until the probability has stayed 0 for one Window.
func (m *refModel) judgeThrottle(now int64) {
	q := m.throttleQ(now)
	switch {
	case q > 1:
		m.thrUp = now
	case m.thrQ != 0:
		q = 1
		if now-m.thrUp >= int64(m.pol.Window)/int64(m.pol.Buckets)*int64(m.pol.Buckets) {
			q = 0
		}
	}
	m.thrQ = q
}

// refusedInWindow is the throttle's refusals in the window at now.
func (m *refModel) refusedInWindow(now int64) uint64 {
	width := int64(m.pol.Window) / int64(m.pol.Buckets)
	hi := refFloorDiv(now, width)
	var n uint64
	for _, at := range m.thr {
		if i := refFloorDiv(at, width); i > hi-int64(m.pol.Buckets) && i <= hi {
			n++
		}
	}
	return n
}

// throttleFloor is the counted calls below which the throttle refuses
// nothing.
func (m *refModel) throttleFloor() uint64 {
	floor := 3 * uint64(m.pol.MinRequests)
	if e := m.pol.ErrorRatio; e > 0 && e < 1 {
		floor = max(floor, uint64(math.Ceil(9*e/(1-e))))
	}
	return floor
}

// refConfident is the Wilson score interval's lower bound at three
// standard errors reaching ratio, or every call failed.
func refConfident(failures, counted uint64, ratio float64) bool {
	if counted == 0 {
		return false
	}
	if ratio >= 1 {
		return failures >= counted
	}
	n, z := float64(counted), 3.0
	f := float64(failures) / n
	return (f+z*z/(2*n)-z*math.Sqrt(f*(1-f)/n+z*z/(4*n*n)))/(1+z*z/n) >= ratio
}

func (m *refModel) countOff(o Outcome) {
	switch o {
	case Success:
		m.c.Successes++
	case Ignored:
		m.c.Ignored++
	case Timeout:
		m.c.Timeouts++
	default:
		m.c.Failures++
	}
	m.c.Admitted++
}

func (m *refModel) baseCooldown() int64 {
	d, mx := int64(m.pol.OpenFor), int64(m.pol.MaxOpenFor)
	for i := 0; i < m.level && d < mx; i++ {
		d *= 2
	}
	return min(d, mx)
}

func (m *refModel) cooldown() int64 {
	m.draw = 0.5
	if m.pol.Jitter > 0 {
		m.draw = m.u
	}
	return m.jittered()
}

// jittered is the policy's base cooldown at the running cooldown's draw.
func (m *refModel) jittered() int64 {
	d := m.baseCooldown()
	if j := m.pol.Jitter; j > 0 {
		d = int64(float64(d) * (1 - j + 2*j*m.draw))
	}
	return max(d, 1)
}

// nextLevel is the doublings after a reopen: they stop rising once the
// cooldown has reached MaxOpenFor.
func (m *refModel) nextLevel() int {
	if m.level >= maxRefLevel || m.baseCooldown() >= int64(m.pol.MaxOpenFor) {
		return m.level
	}
	return m.level + 1
}

// settled reports whether no outage is in progress at now.
func (m *refModel) settled(now int64) bool {
	return !m.out.active ||
		(m.state == Closed && m.closedAt != refNever && now-m.closedAt >= int64(m.pol.MaxOpenFor))
}

// begin starts an outage with trip t if the breaker has settled, or
// counts a trip into the one in progress; it reports whether it began one.
func (m *refModel) begin(now int64, t Trip, trip bool) bool {
	if !m.settled(now) {
		if trip {
			m.out.trips++
			if m.out.trip.Reason == ReasonForcedOpen {
				m.out.trip = t // a hold's outage takes its first trip as its cause
			}
		}
		return false
	}
	m.out = refOutage{active: true, since: now, trip: t, refused0: m.c.Rejected}
	if trip {
		m.out.trips = 1
	}
	return true
}

// outage is Status().Outage at now.
func (m *refModel) outage(now int64) *Outage {
	if m.settled(now) {
		return nil
	}
	o := m.out
	out := &Outage{
		Since: m.at(o.since), Duration: time.Duration(max(0, now-o.since)), Trip: o.trip,
		Trips: o.trips, Reopens: o.reopens, Refused: m.c.Rejected - o.refused0,
		ProbesPassed: o.passed, ProbesFailed: o.failed, ProbesPassedOnError: o.onErr,
	}
	if m.state == Closed && m.closedAt != refNever {
		out.ClosedAt = m.at(m.closedAt)
		out.SettlesAt = m.at(m.closedAt + int64(m.pol.MaxOpenFor))
	}
	return out
}

func (m *refModel) openError(s State, reason Reason, until int64, cd int64) *OpenError {
	e := &OpenError{Name: m.name, State: s, Reason: reason, Trip: m.out.trip, Since: m.at(m.out.since),
		Cooldown: time.Duration(cd)}
	if until != refNever {
		e.Until = m.at(until)
	}
	return e
}

func (m *refModel) transition(now int64, to State, mode Mode, reason Reason, snap Snapshot, cd int64) {
	from := m.state
	m.gen++
	m.thr, m.thrQ = nil, 0
	m.issued, m.passed = 0, 0
	m.inflight = map[int]int64{}
	m.state, m.mode = to, mode
	if from != to {
		m.events = append(m.events, Event{
			Name: m.name, From: from, To: to, Reason: reason, Time: m.at(now),
			Snapshot: snap, Cooldown: time.Duration(cd), Doublings: m.level, Mode: mode,
			Outage: m.outage(now),
		})
	}
}

func (m *refModel) open(now int64, reason Reason, snap Snapshot) {
	cd := m.cooldown()
	m.openUntil = now + cd
	m.oe = m.openError(Open, reason, m.openUntil, cd)
	m.countOpen(now)
	m.transition(now, Open, m.mode, reason, snap, cd)
}

// countOpen counts a transition to Open about to be made.
func (m *refModel) countOpen(now int64) {
	if m.state == Closed {
		m.openedAt = now
	}
	if m.state != Open {
		m.c.Opens++
	}
}

func (m *refModel) trip(now int64, reason Reason, snap Snapshot) {
	t := Trip{Reason: reason, Window: snap, SlowCall: m.pol.SlowCall}
	if m.pol.ConsecutiveFailures > 0 {
		t.Run = uint64(m.consec)
	}
	m.lastTrip = reason
	if m.begin(now, t, true) {
		m.level = 0
	} else {
		m.level = m.nextLevel()
	}
	m.open(now, reason, snap)
}

func (m *refModel) reopen(now int64, reason Reason) {
	m.level = m.nextLevel()
	m.out.reopens++
	m.open(now, reason, m.out.trip.Window)
}

func (m *refModel) halfOpen(now int64, mode Mode, reason Reason) {
	why := reason
	if m.oe != nil {
		why = m.oe.Reason
	}
	m.oe = m.openError(HalfOpen, why, refNever, 0)
	// Every event of an outage carries its trip's window.
	m.transition(now, HalfOpen, mode, reason, m.out.trip.Window, 0)
}

func (m *refModel) close(now int64, mode Mode, reason Reason) {
	m.win = nil
	m.consec = 0
	if m.openedAt != refNever {
		m.openTotal += max(0, now-m.openedAt)
	}
	m.openedAt, m.closedAt = refNever, now
	m.oe = nil
	m.transition(now, Closed, mode, reason, Snapshot{}, 0)
}

// probeDeadline is when the episode reopens with probe_timeout if nothing
// else happens: one base cooldown after the admission of the oldest probe
// in flight, while every slot is taken. ok is false if no probe is in
// flight or a slot is free: time with a free slot never counts.
func (m *refModel) probeDeadline() (int64, bool) {
	if m.state != HalfOpen || m.issued < m.pol.Probes || len(m.inflight) == 0 {
		return 0, false
	}
	oldest := int64(math.MaxInt64)
	for _, t := range m.inflight {
		oldest = min(oldest, t)
	}
	return oldest + m.baseCooldown(), true
}

func (m *refModel) probeTimedOut(now int64) bool {
	d, ok := m.probeDeadline()
	return ok && now >= d
}

// State is Breaker.State: it makes the lazy transitions first.
func (m *refModel) State() State {
	now := m.read()
	switch m.state {
	case Open:
		if m.mode != ModeForcedOpen && now >= m.openUntil {
			m.halfOpen(now, m.mode, ReasonCooldown)
		}
	case HalfOpen:
		if m.probeTimedOut(now) {
			m.reopen(now, ReasonProbeTimeout)
		}
	}
	return m.state
}

func (m *refModel) Snapshot() Snapshot { return m.sum(m.read()) }

func (m *refModel) Counters() Counters {
	now := m.read()
	c := m.c
	open := m.openTotal
	if m.openedAt != refNever {
		open += max(0, now-m.openedAt)
	}
	c.OpenTime = time.Duration(open)
	return c
}

// refCall is an admitted call, as the model sees it. Its result is judged
// by the rules in force when it is recorded; the policy at admission only
// sets the call's deadline and whether its start was taken.
// timed reports whether the call's start was taken at its admission.
func (c refCall) timed() bool {
	return c.pol.CallTimeout > 0 || c.pol.SlowCall > 0 || c.pol.AdaptiveTimeout.Enabled
}

type refCall struct {
	id    int
	role  uint8
	gen   uint64
	pol   Policy // the policy at admission
	start int64
	inst  *time.Time // instance start mark of the call's context
}

// admit is the admission of Do and Allow at internal time now. It returns
// the call, or the refusal (role == refRefused).
func (m *refModel) admit(id int, now int64, inst *time.Time) (refCall, *OpenError) {
	for {
		switch m.state {
		case Closed:
			if m.thrQ != 0 {
				// Throttling: the probability is judged anew, then drawn.
				m.judgeThrottle(now)
				// It refuses nothing while the window holds fewer than
				// 3·MinRequests counted calls: the trip rules keep their sample.
				if m.thrQ > 1 && m.sum(now).Counted >= m.throttleFloor() && m.u < float64(m.thrQ)/(1<<32) {
					m.thr = append(m.thr, now)
					m.c.Throttled++
					if m.mode == ModeShadow {
						m.c.ShadowRejected++
						return refCall{id: id, role: refShadow, gen: m.gen, pol: m.pol, start: now, inst: inst}, nil
					}
					m.c.Rejected++
					return refCall{role: refRefused}, &OpenError{Name: m.name, State: Closed, Reason: ReasonThrottled}
				}
			}
			return refCall{id: id, role: refCounted, gen: m.gen, pol: m.pol, start: now, inst: inst}, nil
		case Open:
			if m.mode != ModeForcedOpen && now >= m.openUntil {
				m.halfOpen(now, m.mode, ReasonCooldown)
				continue
			}
		case HalfOpen:
			if m.issued < m.pol.Probes {
				m.issued++
				m.inflight[id] = now
				return refCall{id: id, role: refProbe, gen: m.gen, pol: m.pol, start: now, inst: inst}, nil
			}
			if m.probeTimedOut(now) {
				m.reopen(now, ReasonProbeTimeout)
				continue
			}
		}
		if m.mode == ModeShadow {
			m.c.ShadowRejected++
			return refCall{id: id, role: refShadow, gen: m.gen, pol: m.pol, start: now, inst: inst}, nil
		}
		m.c.Rejected++
		e := *m.oe
		return refCall{role: refRefused}, &e
	}
}

// refMarksSeen in refModel.marks: the breaker has seen a WithInstanceStart
// mark and looks for one on every call. Otherwise marks is the internal
// time from which the next plain closed-state success is looked at (0, a
// new breaker's, samples its first call); then one in each
// refInstanceSample.
const (
	refMarksSeen      = math.MinInt64
	refInstanceSample = int64(100 * time.Millisecond)
)

// coldFast is cold for a plain closed-state success of Do (no deadline, no
// slow-call rule at admission): its context is looked at only once a mark
// has been seen, or when a sample is due.
func (m *refModel) coldFast(now int64, inst *time.Time) bool {
	if m.pol.Warmup > 0 && now >= m.warmUntil && now < m.marks {
		return false
	}
	return m.cold(now, inst)
}

// cold reports whether a call ending at now went to a warming-up target,
// looking at the call's context for an instance mark.
func (m *refModel) cold(now int64, inst *time.Time) bool {
	if m.pol.Warmup == 0 {
		return false
	}
	if now < m.warmUntil {
		return true
	}
	switch {
	case inst != nil && m.marks != refMarksSeen:
		m.marks = refMarksSeen
	case inst == nil && m.marks != refMarksSeen && m.marks <= now:
		m.marks = now + refInstanceSample
	}
	// The start is an instant of the clock, not of the breaker: its age is
	// the clock's reading now minus it, so that a clock that stepped back
	// does not age the instance by the size of the step.
	return inst != nil && m.clk.Sub(*inst) < m.pol.Warmup
}

// classifyRef is the outcome of a call that returned after elapsed (-1 if
// its start was not taken: neither Timeout nor SlowCall was set when it was
// admitted), and whether it was slow. The deadline is the call's own, set
// at admission; slowness is judged by slowCall, that of the rules in force.
func classifyRef(c refCall, kind modelKind, elapsed int64, slowCall time.Duration) (Outcome, bool) {
	slow := elapsed >= 0 && slowCall > 0 && elapsed > int64(slowCall)
	if kind == mkCanceled {
		return Ignored, slow
	}
	if elapsed >= 0 && c.pol.CallTimeout > 0 && elapsed > int64(c.pol.CallTimeout) {
		return Timeout, slow
	}
	switch kind {
	case mkSuccess:
		return Success, slow
	case mkIgnored:
		return Ignored, slow
	case mkTimeout, mkNetTimeout, mkRefused:
		return Timeout, slow
	case mkMarkedSuccess:
		return Success, slow
	}
	return Failure, slow
}

// finishDo settles a call made through Do (or Call) that returned. A plain
// success admitted closed with no deadline and no slow-call rule takes the
// breaker's fast path, which looks for instance marks only now and then.
func (m *refModel) finishDo(c refCall, kind modelKind) {
	if c.role != refCounted || c.pol.CallTimeout > 0 || c.pol.SlowCall > 0 || kind.err() != nil {
		m.finish(c, kind)
		return
	}
	now := m.read()
	if m.coldFast(now, c.inst) || c.gen != m.gen {
		m.record(now, c, Success, false)
		return
	}
	m.countOff(Success)
	m.win = append(m.win, refEntry{t: now})
	if m.pol.ConsecutiveFailures > 0 {
		m.consec = 0
	}
}

// finish settles a call that returned.
func (m *refModel) finish(c refCall, kind modelKind) {
	now := m.read()
	elapsed := int64(-1)
	if c.pol.CallTimeout > 0 || c.pol.SlowCall > 0 {
		elapsed = now - c.start
	}
	o, slow := classifyRef(c, kind, elapsed, m.pol.SlowCall)
	switch c.role {
	case refCounted:
		m.record(now, c, o, slow)
	case refProbe:
		m.verdict(now, c, o)
	default:
		m.countOff(o)
	}
}

// abandon settles a call whose function panicked.
func (m *refModel) abandon(c refCall) {
	now := m.read()
	switch c.role {
	case refCounted:
		m.record(now, c, Failure, false)
	case refProbe:
		if m.pol.StrictProbes {
			m.verdict(now, c, Failure)
			break
		}
		m.countOff(Failure)
		// The breaker looks at the call's context for an instance mark
		// here too (it decides whether a strict failure is excused), and
		// the look itself moves its sampling of plain successes.
		m.cold(now, c.inst)
		m.release(c)
	default:
		m.countOff(Failure)
	}
}

func (m *refModel) release(c refCall) {
	if c.gen == m.gen && m.state == HalfOpen && m.issued > 0 {
		m.issued--
	}
	delete(m.inflight, c.id)
}

func (m *refModel) record(now int64, c refCall, o Outcome, slow bool) {
	if o == Ignored {
		m.c.Ignored++
		m.c.Admitted++
		return
	}
	cold := m.cold(now, c.inst) // looked at before the generation, as the breaker does
	if c.gen != m.gen {
		m.countOff(o) // stale: counters only
		return
	}
	if cold {
		m.c.Exempt++
		m.countOff(o)
		return
	}
	m.countOff(o)
	m.win = append(m.win, refEntry{t: now, fail: o != Success, timeout: o == Timeout, slow: slow})
	if slow {
		m.c.Slow++
	}
	if o == Success {
		if m.pol.ConsecutiveFailures > 0 {
			m.consec = 0
		}
		if !slow {
			return
		}
	} else {
		m.consec++
	}
	if m.mode != ModeForcedClosed {
		m.evaluate(now)
		if o != Success && c.gen == m.gen {
			m.judgeThrottle(now) // after a failure, once the trip rules have had their say
		}
	}
}

func (m *refModel) evaluate(now int64) {
	p := m.pol
	snap := m.sum(now)
	var reason Reason
	// While the throttle refuses calls, the ratio rule asks for confidence.
	throttling := p.Throttle.Enabled && ((m.thrQ != 0 && m.refusedInWindow(now) > 0) ||
		(p.ErrorRatio > 1-1/p.Throttle.K && !m.settled(now) && m.state == Closed))
	if snap.Counted >= uint64(p.MinRequests) && snap.Counted > 0 {
		switch {
		case p.ErrorRatio > 0 && float64(snap.Failures)/float64(snap.Counted) >= p.ErrorRatio &&
			(!throttling || refConfident(snap.Failures, snap.Counted, p.ErrorRatio)):
			reason = ReasonErrorRatio
		case p.ErrorCount > 0 && snap.Failures >= uint64(p.ErrorCount):
			reason = ReasonErrorCount
		case p.SlowCall > 0 && float64(snap.Slow)/float64(snap.Counted) >= p.SlowRatio:
			reason = ReasonSlowRatio
		case p.ConsecutiveFailures > 0 && m.consec >= p.ConsecutiveFailures:
			reason = ReasonConsecutiveFailures
		}
	} else if p.ConsecutiveFailures > 0 && m.consec >= p.ConsecutiveFailures {
		// ConsecutiveFailures is its own sample requirement.
		reason = ReasonConsecutiveFailures
	}
	if reason != "" {
		m.trip(now, reason, snap)
	}
}

func (m *refModel) verdict(now int64, c refCall, o Outcome) {
	m.countOff(o)
	cold := m.cold(now, c.inst)
	if c.gen != m.gen || m.state != HalfOpen {
		return // stale probe
	}
	delete(m.inflight, c.id)
	pass := o == Success || (o == Failure && !m.pol.StrictProbes)
	if pass && m.lastTrip == ReasonSlowRatio && m.pol.SlowCall > 0 && c.timed() && now-c.start > int64(m.pol.SlowCall) {
		pass, o = false, Failure // a slow probe of a breaker its slowness opened
	}
	switch {
	case o == Ignored || (cold && !pass):
		m.release(c)
	case pass:
		m.c.ProbesPassed++
		m.passed++
		m.out.passed++
		if o != Success {
			m.out.onErr++
		}
		if m.passed >= m.pol.Probes {
			m.close(now, m.mode, ReasonProbesPassed)
		}
	default:
		m.c.ProbesFailed++
		m.out.failed++
		m.reopen(now, ReasonProbeFailed)
	}
}

// SetPolicy with a policy the model knows to be valid.
func (m *refModel) SetPolicy(p Policy) {
	now := m.read()
	old := m.pol
	if m.settled(now) {
		m.out.active = false // settled under the old MaxOpenFor: it stays so
	}
	m.pol = p
	if m.state == Open && m.oe != nil && m.oe.Cooldown > 0 {
		// The running cooldown is cut to what the new policy gives it
		// (its doublings, its jitter at the same draw), from when it
		// began, if that is shorter; it is never lengthened.
		cd := int64(m.oe.Cooldown)
		if ncd := m.jittered(); ncd < cd {
			m.openUntil += ncd - cd
			e := *m.oe
			e.Until, e.Cooldown = m.at(m.openUntil), time.Duration(ncd)
			m.oe = &e
		}
	}
	if old.Window != p.Window || old.Buckets != p.Buckets {
		m.win, m.thr = nil, nil
		if m.state == Closed {
			// No result of a call admitted before lands in the new
			// window: a new generation, without a transition.
			m.gen++
		}
	}
	if old.ConsecutiveFailures != p.ConsecutiveFailures {
		m.consec = 0
	}
	if m.state == HalfOpen && m.passed >= p.Probes {
		// Fewer probes now: the passed ones are enough.
		m.close(now, m.mode, ReasonProbesPassed)
	}
	if !p.Throttle.Enabled || old.Window != p.Window || old.Buckets != p.Buckets {
		m.thrQ = 0 // a throttle turned off, or on a new window, starts over
	}
	// The throttle's probability is judged under the new policy at once;
	// a policy that ends throttling ends it without waiting.
	m.judgeThrottle(now)
	if m.thrQ == 1 {
		m.thrQ = 0
	}
}

// ThrottleProbability is Status.ThrottleProbability: the probability the
// next call faces, judged at now, while the one in force is above 0.
func (m *refModel) ThrottleProbability() float64 {
	now := m.read()
	if m.thrQ <= 1 || m.sum(now).Counted < m.throttleFloor() {
		return 0
	}
	return float64(m.throttleQ(now)) / (1 << 32)
}

func (m *refModel) SetMode(mode Mode) {
	now := m.read()
	from := m.mode
	switch {
	case from == mode:
	case mode == ModeForcedOpen:
		if m.state == Closed {
			// The level returns to 0 once the breaker has settled, as on
			// a trip; a forced open begins an outage then, but is no trip.
			if m.begin(now, Trip{Reason: ReasonForcedOpen}, false) {
				m.level = 0
			}
			m.lastTrip = ReasonForcedOpen
		}
		m.openUntil = int64(^uint64(0) >> 1)
		m.oe = m.openError(Open, ReasonForcedOpen, refNever, 0)
		m.countOpen(now)
		m.transition(now, Open, mode, ReasonForcedOpen, m.out.trip.Window, 0)
	case mode == ModeForcedClosed:
		if m.state != Closed {
			m.close(now, mode, ReasonForcedClosed)
		} else {
			m.mode = mode
		}
	case from == ModeForcedOpen:
		// The outage starts afresh at the release (its length, its counts
		// and the open error's Since), keeping its trip; the time spent open
		// so far stays in OpenTime.
		m.out = refOutage{active: true, since: now, trip: m.out.trip, refused0: m.c.Rejected}
		if m.oe != nil {
			e := *m.oe
			e.Since = m.at(now)
			m.oe = &e
		}
		m.halfOpen(now, mode, ReasonReleased)
	default:
		m.mode = mode
	}
}

func (m *refModel) Reset() {
	now := m.read()
	mode := m.mode
	if mode != ModeShadow {
		mode = ModeAuto
	}
	m.level = 0
	m.out.active, m.lastTrip = false, ""
	m.close(now, mode, ReasonReset)
	m.closedAt = refNever
}

func (m *refModel) MarkCold() {
	now := m.read()
	if m.pol.Warmup > 0 {
		m.warmUntil = now + int64(m.pol.Warmup)
	}
}

// RetryAfter is OpenError.RetryAfter at the current reading.
func (m *refModel) RetryAfter(e *OpenError) time.Duration {
	if e.Until.IsZero() {
		return 0
	}
	return max(0, e.Until.Sub(m.at(m.read())))
}
