package breaker

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker/internal/window"
)

// A Breaker guards calls to one downstream method. Wrap each call in
// [Breaker.Do]; when the method starts failing or timing out, the breaker
// opens and refuses calls at once with [ErrOpen]. After a cooldown it lets
// a few real calls through as probes, and closes again when they all pass.
// The rules are the [Policy]'s; docs/how-it-decides.md tells them in full.
//
// Most callers want [New] with [DefaultPolicy], then Do; [Call] returns a
// typed value, [Breaker.Allow] splits a call that cannot be wrapped, such
// as a stream, and a [Group] holds one breaker per method.
//
// A Breaker has no goroutines and no timers: it reads its [Clock] when a
// call arrives or ends. In the Closed state Do takes no lock and allocates
// nothing. A Breaker is safe for concurrent use by multiple goroutines.
type Breaker struct {
	// Read on every call; state is the packed word (see word).
	state stateWord
	rules atomic.Pointer[rules]
	win   atomic.Pointer[window.Window]
	opt   *options
	tally window.Tally // rejected, fallbacks, ignored, shadow-rejected

	// transitionDue is when the next timed transition falls due: the
	// cooldown's end, or the oldest probe's timeout (MaxInt64 if none).
	// Written under mu after the word, so a lock-free reader that sees
	// the word unchanged around its load has read it in that word's meaning.
	transitionDue atomic.Int64
	warmUntil     atomic.Int64  // offset until which this breaker's target is cold
	marks         atomic.Int64  // marksSeen, or when to look for WithInstanceStart next
	consec        atomic.Uint64 // the run of consecutive failures; see failRun
	openErr       atomic.Pointer[OpenError]
	other         [nOther]atomic.Uint64
	// cand is the candidate hook, nil without a candidate policy.
	cand atomic.Pointer[candidate]

	name string

	// The rest is guarded by mu, which serialises transitions and is
	// never taken on the closed path.
	mu sync.Mutex
	// hist is allocated at the first transition.
	hist *history
}

// history is what a breaker remembers of its transitions. Guarded by mu.
type history struct {
	openTotal int64 // time spent open or half-open in earlier outages
	opens     uint32
	probesOK  uint32
	probesBad uint32
	// level is the cooldown's doublings, passed the probes passed in
	// this half-open episode.
	level  uint8
	passed uint8
	// transitions counts the transitions made, one entry per (from, to,
	// reason), in the order each first happened.
	transitions []TransitionCount
	events      eventQueue
	// inflight holds the episode's probes without a verdict, by slot;
	// an entry admitted at never is unused.
	inflight []inflightProbe
	// sealed holds the outcomes of the windows sealed so far.
	sealed [window.Kinds]uint64
	// openedAt is when the breaker last left Closed, never while Closed;
	// closedAt when it last closed (never if it has not, or since Reset).
	openedAt, closedAt int64
	// out is the outage in progress, or the last one (see Outage).
	out outage
	// draw is the jitter draw of the running cooldown, in [0, 1).
	draw float64
	// lastTrip is the rule of the latest trip from Closed.
	lastTrip Reason
	// thrEnded is set when a change of generation ended throttling, for
	// flush to record after the lock, with thrWhy, what changed it.
	thrEnded bool
	thrWhy   string
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
		b.hist = &history{openedAt: never, closedAt: never}
	}
	return b.hist
}

// Counters of outcomes not recorded in the window (probes, stale results,
// warmup-exempt calls).
const (
	oSuccess = iota
	oFailure
	oTimeout
	oExempt
	nOther
)

// New returns a closed breaker named name (such as "orders.Create", as
// errors, events and metrics show it) that applies p. It returns a
// *[PolicyError] if p is invalid, and an error if name is empty.
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
	b := &Breaker{name: name, opt: o}
	if r.timed {
		r = r.own(nil, o.tb.Now()) // with the breaker's latency histogram
	}
	r, _ = r.withThrottle(b, nil) // with the breaker's throttle, if it throttles
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

// Snapshot returns what the window holds now; while the breaker is not
// closed, the calls that tripped it, until they age out.
func (b *Breaker) Snapshot() Snapshot {
	return snapshot(b.win.Load(), b.opt.tb.Now())
}

// Policy returns the policy the breaker applies.
func (b *Breaker) Policy() Policy { return b.rules.Load().p }
