package breaker

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker/internal/window"
)

// A Breaker guards calls to one downstream method. Wrap each call in
// [Breaker.Do]; when the method starts failing or timing out, the breaker
// opens and refuses calls at once with [ErrOpen], so callers stop piling up
// behind a downstream that cannot answer. After a cooldown it lets a few
// real calls through as probes, and closes again when they all pass.
//
// The model: outcomes of calls in the Closed state go into a sliding window
// of Policy.Window. After a failure, if the window holds at least
// Policy.MinRequests counted calls and a trip rule holds (the failure ratio
// reaches Policy.ErrorRatio, or an optional count or slow-call rule), or if
// the optional run of Policy.ConsecutiveFailures is reached, the breaker
// opens. It stays open for a cooldown
// that starts at Policy.OpenFor and doubles, up to Policy.MaxOpenFor, each
// time it reopens before it has been stable. Then, half-open, it admits
// Policy.Probes calls; all must pass to close it, one failure reopens it.
// So does a probe that hangs: once every slot is taken and a probe has been
// in flight for one cooldown without a verdict (probe_timeout).
//
// Most callers want [New] with [DefaultPolicy], then Do; [Call] returns a
// typed value, and [Breaker.Allow] splits a call into admission and report
// for calls that cannot be wrapped in a function, such as streams. Use a
// [Group] for one breaker per downstream method.
//
// A Breaker has no goroutines and no timers: it reads its [Clock] when a
// call arrives or ends, so time-dependent changes happen lazily, and a test
// with a mock clock drives it deterministically. In the Closed state Do
// takes no lock and allocates nothing.
//
// A Breaker is safe for concurrent use by multiple goroutines.
type Breaker struct {
	// Read on every call. state packs state, mode, the dropped bit, probe
	// slots and generation; see word.
	state stateWord
	rules atomic.Pointer[rules]
	win   atomic.Pointer[window.Window]
	opt   *options
	tally window.Tally // rejected, fallbacks, ignored, shadow-rejected

	// due is the offset at which the next timed transition falls due. It
	// has two meanings, one per state, and is read and written only
	// through their accessors: openUntil in the Open state, probeDeadline
	// in the HalfOpen state. One field serves both because only one is
	// live at a time, and a second field would make every Breaker larger.
	// A transition that gives it a new meaning stores the state word
	// first and due after it, so a reader that loads the word, then due,
	// then the word again unchanged, has read due in the word's meaning.
	due       atomic.Int64
	warmUntil atomic.Int64  // offset until which this breaker's target is cold
	marks     atomic.Int64  // marksSeen, or when to look for WithInstanceStart next
	consec    atomic.Uint64 // the run of consecutive failures; see failRun
	openErr   atomic.Pointer[OpenError]
	other     [nOther]atomic.Uint64
	cand      atomic.Pointer[candidate] // nil unless the group's document has a candidate for it

	name string

	// The rest is guarded by mu, which serialises transitions and is never
	// taken on the closed path. The fields are packed: a group may hold
	// many thousands of breakers.
	mu sync.Mutex
	// spellStart is the start of the current spell, closed or not. It
	// has two meanings, one per side, and is read and written only
	// through their accessors: closedAt while the state is Closed,
	// outageStart otherwise. One field serves both because only one is
	// live at a time, and a second field would make every Breaker larger.
	spellStart int64
	// hist is allocated at the first transition: a breaker that never
	// trips, the usual case in a large group, does not carry it.
	hist *history
}

// history is what a breaker remembers of its transitions. Guarded by mu.
type history struct {
	openTotal int64 // time spent open or half-open in earlier outages
	opens     uint32
	probesOK  uint32
	probesBad uint32
	// level is the cooldown's doublings and passed the probes passed in
	// this half-open episode; both are 0 before the first transition.
	// They live here rather than in Breaker, where their padding took an
	// idle breaker into the next size class.
	level  uint8
	passed uint8
	// transitions counts the transitions made, one entry per (from, to,
	// reason) in the order each first happened. A handful of entries at
	// most: the reasons are a short fixed list.
	transitions []TransitionCount
	events      eventQueue
	// inflight holds the current half-open episode's probes that have no
	// verdict yet, indexed by the slot number in their token; an entry
	// admitted at never is unused.
	inflight []inflightProbe
	// sealed holds the outcomes of the windows sealed so far, by window
	// kind (see endGenLocked): Counters adds the current window's.
	sealed [window.Kinds]uint64
}

// inflightProbe is a probe in flight: its admission offset, for the probe
// timeout, and its mark, which the end of its episode ends.
type inflightProbe struct {
	at   int64
	mark *probeMark
}

// openUntil is, in the Open state, the offset at which probes may start.
// One atomic load: the refusal path of Do reads it at full rate.
func (b *Breaker) openUntil() int64 { return b.due.Load() }

// setOpenUntil sets openUntil, on entering the Open state. b.mu must be
// held.
func (b *Breaker) setOpenUntil(t int64) { b.due.Store(t) }

// probeDeadline is, in the HalfOpen state, the offset at which the oldest
// probe still in flight will have been in flight for one cooldown
// (MaxInt64 while none is). The refusals of a half-open breaker read it
// without the lock; the probe timeout itself is decided under it (see
// probeTimeout).
func (b *Breaker) probeDeadline() int64 { return b.due.Load() }

// setProbeDeadline sets probeDeadline, in the HalfOpen state. b.mu must be
// held.
func (b *Breaker) setProbeDeadline(t int64) { b.due.Store(t) }

// closedAt is, while the state is Closed, the last close after an outage
// (never if none, or since Reset), for the stability check. b.mu must be
// held.
func (b *Breaker) closedAt() int64 { return b.spellStart }

// setClosedAt sets closedAt, on closing or resetting. b.mu must be held.
func (b *Breaker) setClosedAt(t int64) { b.spellStart = t }

// outageStart is, while the state is not Closed, the start of the current
// outage: the trip, or the end of a forced open. b.mu must be held.
func (b *Breaker) outageStart() int64 { return b.spellStart }

// setOutageStart sets outageStart, on tripping or when a forced open ends.
// b.mu must be held.
func (b *Breaker) setOutageStart(t int64) { b.spellStart = t }

// doublings is the cooldown's doublings (history.level). b.mu must be
// held.
func (b *Breaker) doublings() uint8 {
	if b.hist == nil {
		return 0
	}
	return b.hist.level
}

// setDoublings sets history.level, allocating the history only for a
// level other than 0. b.mu must be held.
func (b *Breaker) setDoublings(l uint8) {
	if b.hist != nil || l != 0 {
		b.histLocked().level = l
	}
}

// probesPassed is history.passed. b.mu must be held.
func (b *Breaker) probesPassed() uint8 {
	if b.hist == nil {
		return 0
	}
	return b.hist.passed
}

// histLocked returns b.hist, allocating it. b.mu must be held.
func (b *Breaker) histLocked() *history {
	if b.hist == nil {
		b.hist = &history{}
	}
	return b.hist
}

// Counters of outcomes that are not recorded in the window (probes, stale
// results, warmup-exempt calls). Ignored calls and shadow admissions are
// counted in the breaker's tally (countIgnored, countShadowRejected).
const (
	oSuccess = iota
	oFailure
	oTimeout
	oExempt
	nOther
)

// New returns a closed breaker named name (such as "orders.Create"; the
// name appears in errors, events and metrics) that applies policy p. It
// returns a *[PolicyError] if p is invalid, and an error if name is empty.
func New(name string, p Policy, opts ...Option) (*Breaker, error) {
	if name == "" {
		return nil, errors.New("breaker: empty name")
	}
	r, err := compileShared(p)
	if err != nil {
		return nil, err
	}
	return newBreaker(name, r, newOptions(opts)), nil
}

func newBreaker(name string, r *rules, o *options) *Breaker {
	b := &Breaker{name: name, opt: o, spellStart: never} // closedAt: never
	if r.timed {
		r = r.own(nil, o.tb.now()) // with the breaker's latency histogram
	}
	b.rules.Store(r)
	b.win.Store(window.New(r.width, r.buckets))
	b.warmUntil.Store(never)
	return b
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// State returns the breaker's state now. Like a call, it notices an ended
// cooldown or a probe timeout and makes that transition first.
func (b *Breaker) State() State {
	now := b.opt.tb.now()
	w := b.state.Load()
	switch w.state() {
	case Open:
		if w.mode() != ModeForcedOpen && now >= b.openUntil() {
			b.toHalfOpen(now, w)
		}
	case HalfOpen:
		if w.issued() >= b.rules.Load().probes && now >= b.probeDeadline() {
			b.probeTimeout(now, w)
		}
	}
	return b.state.Load().state()
}

// Mode returns the breaker's mode.
func (b *Breaker) Mode() Mode { return b.state.Load().mode() }

// Snapshot returns what the window holds now. While the breaker is open or
// half-open, nothing is added to the window, so it shows the calls that
// tripped it until they age out.
func (b *Breaker) Snapshot() Snapshot {
	return snapshot(b.win.Load(), b.opt.tb.now())
}

// Policy returns the policy the breaker applies.
func (b *Breaker) Policy() Policy { return b.rules.Load().p }
