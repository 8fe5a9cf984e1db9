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

	// transitionDue is the offset at which the next timed transition
	// falls due: in Open, the end of the cooldown; in HalfOpen, the probe
	// timeout of the oldest probe in flight (MaxInt64 while none is). A
	// transition stores the state word first and transitionDue after it,
	// so a reader that loads the word, then transitionDue, then the word
	// again unchanged, has read transitionDue in the word's meaning.
	// Written under mu; the refusals read it without the lock.
	transitionDue atomic.Int64
	warmUntil     atomic.Int64  // offset until which this breaker's target is cold
	marks         atomic.Int64  // marksSeen, or when to look for WithInstanceStart next
	consec        atomic.Uint64 // the run of consecutive failures; see failRun
	openErr       atomic.Pointer[OpenError]
	other         [nOther]atomic.Uint64
	// cand is the candidate hook: nil unless the group's document has a
	// candidate policy for this breaker. Do and Allow load it once and,
	// when it is set, hand it the call (see candidate).
	cand atomic.Pointer[candidate]

	name string

	// The rest is guarded by mu, which serialises transitions and is never
	// taken on the closed path. The fields are packed: a group may hold
	// many thousands of breakers.
	mu sync.Mutex
	// outageEdge is, while the state is not Closed, the start of the
	// current outage (the trip, or the end of a forced open); while
	// Closed, the end of the last outage, for the stability check (never
	// if none, or since Reset).
	outageEdge int64
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
	// They live here, not in Breaker, so that a breaker that never trips
	// does not carry them.
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
	b := &Breaker{name: name, opt: o, outageEdge: never}
	if r.timed {
		r = r.own(nil, o.tb.Now()) // with the breaker's latency histogram
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
	now := b.opt.tb.Now()
	w := b.state.Load()
	switch w.state() {
	case Open:
		if w.mode() != ModeForcedOpen && now >= b.transitionDue.Load() {
			b.toHalfOpen(now, w)
		}
	case HalfOpen:
		if w.issued() >= b.rules.Load().probes && now >= b.transitionDue.Load() {
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
	return snapshot(b.win.Load(), b.opt.tb.Now())
}

// Policy returns the policy the breaker applies.
func (b *Breaker) Policy() Policy { return b.rules.Load().p }
