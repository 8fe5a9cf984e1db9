package breaker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A Breaker guards calls to one downstream method. Wrap each call in
// [Breaker.Do]; when the method starts failing or timing out, the breaker
// opens and refuses calls at once with [ErrOpen]. After a cooldown it lets
// a few real calls through as probes, and closes again when they all pass.
// The rules are the [Policy]'s; docs/behaviour.md tells them in full.
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
	win   atomic.Pointer[slidingWindow]
	opt   *options
	tally tally // rejected, fallbacks, ignored, shadow-rejected

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
	// cand is the candidate policy, nil without one; with it or an
	// observer, calls take the observed path (observe.go).
	cand atomic.Pointer[Candidate]

	name string

	// The rest is guarded by mu, which serialises transitions and is
	// never taken on the closed path.
	mu sync.Mutex
	// hist is allocated at the first transition.
	hist *history
}

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
	b.win.Store(newSlidingWindow(r.width, r.buckets))
	b.warmUntil.Store(never)
	return b
}

// Do calls fn if the breaker admits the call, and returns fn's error
// unchanged; it returns after fn returns. A refused call gets an error
// matching [ErrOpen] (an *[OpenError]) and fn is not called. If ctx is done,
// or ctx or fn is nil, Do returns an error without calling fn and counts
// nothing.
//
// fn receives ctx with the breaker's deadline added, if any, and marked for
// [IsProbe] only if the call is a probe. The [Classifier] decides the
// outcome. If fn panics, the call counts as a failure and the panic goes on
// (a probe frees its slot, or fails the episode under StrictProbes).
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error) error {
	if b == nil || ctx == nil || fn == nil {
		return badCall(b, ctx, fn != nil)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.watched() {
		return b.observedDo(ctx, fn)
	}
	r := b.rules.Load()
	w := b.state.Load()
	if !w.plain() || r.timed {
		// A refusal needs no lock: transitionDue is valid while the word
		// is still w, so the word is loaded again after it.
		if w.refusing(r.probes) && b.opt.tb.Now() < b.transitionDue.Load() && b.state.Load() == w {
			b.tally.Inc(countRejected)
			return b.refusal()
		}
		return b.do(ctx, fn, w, r)
	}
	// The closed path. A panic or Goexit in fn is settled by the
	// deferred call and keeps its own stack.
	gen := w.gen()
	if t := r.thr; t != nil && uint32(t.p.Load()) != 0 { // Policy.Throttle: see throttle.go
		if role, err := b.throttleAdmit(w); err != nil || role == roleShadow {
			if err != nil {
				return err
			}
			return b.run(ctx, fn, token{gen: gen, role: roleShadow}, r)
		}
	}
	returned := false
	defer func() {
		if !returned {
			b.abandon(ctx, token{gen: gen})
		}
	}()
	err := fn(unmarked(ctx))
	returned = true
	if err == nil {
		b.recordSuccess(ctx, gen)
	} else {
		b.finish(ctx, token{gen: gen}, err, r)
	}
	return err
}

// do is Do for every call that is not a plain closed-state call: probes,
// shadow admissions, timed calls, refusals.
func (b *Breaker) do(ctx context.Context, fn func(context.Context) error, w word, r *rules) error {
	if w.dropped() {
		return b.successor().Do(ctx, fn)
	}
	tok, err := b.admitNotClosed(w, r)
	if err != nil {
		return err
	}
	return b.run(ctx, fn, tok, r)
}

// run runs fn for an admitted call and settles it: as finish if fn
// returns, as abandon if it panics or calls Goexit.
func (b *Breaker) run(ctx context.Context, fn func(context.Context) error, tok token, r *rules) error {
	call, cancel := b.prepare(ctx, &tok, r)
	if cancel != nil {
		defer cancel()
	}
	returned := false
	defer func() {
		if !returned {
			b.abandon(ctx, tok)
		}
	}()
	err := fn(call)
	returned = true
	b.finish(ctx, tok, err, r)
	return err
}

func badCall(b *Breaker, ctx context.Context, haveFn bool) error {
	switch {
	case b == nil:
		return errors.New("breaker: nil *Breaker")
	case ctx == nil:
		return errNilContext
	case !haveFn:
		return errNilFunc
	}
	return nil
}

// Call is [Breaker.Do] for a function that returns a value as well as an
// error. It returns fn's results unchanged, or the zero T and the error of
// a refused call.
func Call[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	var v T
	if fn == nil {
		return v, errNilFunc
	}
	err := b.Do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// Allow is the two-step form of Do, for calls that cannot be wrapped in a
// function, such as streams. If the breaker admits the call, Allow returns
// the context to make it with (as Do's fn gets it) and done, to report the
// result once; later calls of done do nothing. done cancels that context
// and ends its probe mark. A refused call gets an error matching [ErrOpen]
// and a nil done; if ctx is done, ctx.Err(). A call that reports early,
// such as a stream at its first message, goes on with
// context.WithoutCancel of the returned context (docs/integrations.md).
// A done never called holds a probe slot until the probe timeout.
func (b *Breaker) Allow(ctx context.Context) (context.Context, func(error), error) {
	if b == nil || ctx == nil {
		return nil, nil, badCall(b, ctx, true)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if b.watched() {
		return b.observedAllow(ctx)
	}
	return b.allow(ctx)
}

// allow is Allow past its checks, for a breaker not watched.
func (b *Breaker) allow(ctx context.Context) (context.Context, func(error), error) {
	r := b.rules.Load()
	w := b.state.Load()
	if w.dropped() {
		return b.successor().Allow(ctx)
	}
	tok, err := b.admitNotClosed(w, r)
	if err != nil {
		return nil, nil, err
	}
	call, cancel := b.prepare(ctx, &tok, r)
	// One allocation: the closure; its once-flag comes from a block.
	t, used := tok, newOnceFlag()
	done := func(err error) {
		if !used.CompareAndSwap(false, true) {
			return
		}
		if cancel != nil {
			defer cancel() // even if the classifier panics
		}
		b.finish(ctx, t, err, r)
	}
	return call, done, nil
}

// prepare derives the context of an admitted call and starts its timer.
func (b *Breaker) prepare(ctx context.Context, tok *token, r *rules) (context.Context, context.CancelFunc) {
	if tok.role == roleProbe {
		ctx = context.WithValue(ctx, probeKey{}, tok.mark)
	} else {
		ctx = unmarked(ctx)
	}
	if !r.timed {
		return ctx, nil
	}
	tok.timed = true
	tok.start = b.opt.tb.Now()
	d := r.timeout
	if r.adaptive {
		d = b.deadline(r)
		tok.limit = d
	}
	if d <= 0 {
		return ctx, nil
	}
	if c, ok := b.opt.tb.Clock().(timeoutClock); ok {
		return withClockTimeout(c, ctx, time.Duration(d))
	}
	return context.WithTimeout(ctx, time.Duration(d))
}

// finish settles a returned call. The rules r it was admitted under
// decide whether it overran its deadline; everything else follows the
// rules in force now, never a replaced policy. It returns the outcome
// counted.
func (b *Breaker) finish(caller context.Context, tok token, err error, r *rules) Outcome {
	tok.mark.end()
	now := b.opt.tb.Now()
	elapsed := int64(-1)
	if tok.timed {
		elapsed = now - tok.start
	}
	cur := b.rules.Load()
	// A panicking classifier settles the call as a panic would, so that
	// a probe does not keep its slot.
	classified := false
	defer func() {
		if !classified {
			b.abandon(caller, tok)
		}
	}()
	o := b.outcome(caller, err, elapsed, r)
	if tok.limit > 0 && elapsed > tok.limit && o != Ignored {
		o = Timeout // late for its adaptive deadline, whatever it returned
	}
	classified = true
	switch tok.role {
	case roleCounted:
		slow := cur.slowCall > 0 && elapsed > cur.slowCall // elapsed < 0: not timed
		b.record(caller, now, tok.gen, o, slow, cur)
		b.measure(now, elapsed, o, cur)
	case roleProbe:
		b.countOutcome(o)
		b.verdict(caller, now, tok.gen, tok.slot, o, elapsed, b.cold(caller, now, cur), false)
	default:
		b.countOutcome(o)
	}
	return o
}

// abandon settles a call whose function (or the classifier) panicked, or
// called runtime.Goexit, under the rules in force now.
func (b *Breaker) abandon(caller context.Context, tok token) {
	tok.mark.end()
	r := b.rules.Load()
	switch tok.role {
	case roleCounted:
		b.record(caller, b.opt.tb.Now(), tok.gen, Failure, false, r)
	case roleProbe:
		b.countOutcome(Failure)
		now := b.opt.tb.Now()
		b.verdict(caller, now, tok.gen, tok.slot, Failure, -1, b.cold(caller, now, r), true)
	default:
		b.countOutcome(Failure)
	}
}

// token is what admission hands to the end of a call.
type token struct {
	gen   uint64
	start int64 // offset at admission, if timed
	role  uint8
	timed bool
	slot  uint8      // a probe's entry in history.inflight, or noSlot
	mark  *probeMark // a probe's mark, ended with its result; nil otherwise
	// limit is the adaptive deadline given, ns; 0 if not adaptive.
	limit int64
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
	sealed [numKinds]uint64
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

// flagBlock is a block of once-flags, for a done that may be called
// more than once. A flag is handed out once and never reused,
// so code holding one, even long after, can never take another's; a
// block is collected when the last holder of one of its flags is. Blocks
// are handed out through a sync.Pool, so that goroutines on different
// processors take flags from different blocks without sharing a counter.
type flagBlock struct {
	next  int
	flags [flagsPerBlock]atomic.Bool
}

// flagsPerBlock is the number of flags in a block: a flag costs 1/64 of a
// block's allocation, and a long-lived one keeps its block alive.
const flagsPerBlock = 64

var flagPool = sync.Pool{New: func() any { return new(flagBlock) }}

// newOnceFlag returns a false flag no one else has. It is safe for concurrent use.
func newOnceFlag() *atomic.Bool {
	blk := flagPool.Get().(*flagBlock)
	f := &blk.flags[blk.next]
	if blk.next++; blk.next < len(blk.flags) {
		flagPool.Put(blk)
	}
	return f
}
