package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
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
	// Read on every call. state packs state, mode, probe slots and
	// generation; see the comment on stateMask.
	state atomic.Uint64
	rules atomic.Pointer[rules]
	win   atomic.Pointer[window]
	opt   *options
	tally tally

	// deadline is, in the Open state, the offset at which probes may
	// start; in the HalfOpen state, the offset at which the oldest probe
	// still in flight will have been in flight for one cooldown (MaxInt64
	// while none is). One field serves both: only one is live at a time.
	// The refusals of a half-open breaker read it without the lock; the
	// probe timeout itself is decided under it (see probeTimeout).
	deadline  atomic.Int64
	warmUntil atomic.Int64 // offset until which this breaker's target is cold
	marks     atomic.Int64 // marksSeen, or when to look for WithInstanceStart next
	consec    atomic.Uint64
	openErr   atomic.Pointer[OpenError]
	other     [nOther]atomic.Uint64

	name string

	// The rest is guarded by mu, which serialises transitions and is never
	// taken on the closed path. The fields are packed: a group may hold
	// many thousands of breakers.
	mu sync.Mutex
	// since is, while closed, the last close after an outage (never if
	// none), for the stability check; otherwise the start of the outage.
	since  int64
	level  uint8 // doublings of the cooldown
	passed uint8 // probes passed in this half-open episode
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
	events    eventQueue
	// inflight holds the admission offsets of the current half-open
	// episode's probes that have no verdict yet, indexed by the slot
	// number in their token; never marks an unused entry.
	inflight []int64
}

// histLocked returns b.hist, allocating it. b.mu must be held.
func (b *Breaker) histLocked() *history {
	if b.hist == nil {
		b.hist = &history{}
	}
	return b.hist
}

// Counters of outcomes that are not recorded in the window (probes, stale
// results, warmup-exempt calls, shadow admissions) and of ignored calls.
const (
	oSuccess = iota
	oFailure
	oTimeout
	oIgnored
	oExempt
	oShadowRejected
	nOther
)

// Option configures a Breaker at creation: the parts of its behaviour that
// are code rather than numbers.
type Option func(*options)

type options struct {
	tb        timebase
	classify  Classifier
	randf     func() float64
	hooks     []func(Event)
	logger    *slog.Logger
	startCold bool
	group     *Group // the group that made the breaker, if any
}

// WithClock makes the breaker read time from c instead of the real clock.
// *clock.Mock from github.com/benbjohnson/clock plugs in directly. If c also
// has a method WithTimeout(context.Context, time.Duration)
// (context.Context, context.CancelFunc), as *clock.Mock does, the deadlines
// of Policy.Timeout are made through it, so they follow the same clock.
// A nil c means the real clock.
func WithClock(c Clock) Option { return func(o *options) { o.tb = newTimebase(c) } }

// WithClassifier replaces [DefaultClassifier]. A nil c keeps the default.
func WithClassifier(c Classifier) Option {
	return func(o *options) {
		if c != nil {
			o.classify = c
		}
	}
}

// WithRand sets the source of the cooldown jitter: a function returning a
// number in [0, 1), safe for concurrent use. A value outside [0, 1) (or
// NaN) is treated as 0.5, no jitter, and so is a panic of f: f runs in the
// middle of a transition, under the breaker's lock, where a panic would
// leave the breaker locked or half moved. The default is
// math/rand/v2.Float64; tests inject a fixed value to know each cooldown
// exactly. A nil f keeps the default.
func WithRand(f func() float64) Option {
	return func(o *options) {
		if f != nil {
			o.randf = f
		}
	}
}

// OnTransition adds a hook called with every transition. Hooks run after the
// transition, outside any lock of the breaker, one event at a time and in
// the order of the transitions; each hook sees every event. A hook may call
// back into the breaker, even causing another transition, which is then
// delivered after the current hook returns. A slow hook delays only the
// call that caused the transition. A hook that panics does not hide the
// event from the hooks after it, nor the events after it: they are all
// delivered, and then the first panic goes on up to the call that caused
// the transition (a call, a read of the state, a scrape). A nil h is
// ignored.
func OnTransition(h func(Event)) Option {
	return func(o *options) {
		if h != nil {
			o.hooks = append(o.hooks, h)
		}
	}
}

// StartCold makes a new breaker's target cold for Policy.Warmup from its
// creation, as if [Breaker.Rewarm] had been called: use it for breakers of
// one freshly started instance ("payment.Charge@10.0.0.7").
func StartCold() Option { return func(o *options) { o.startCold = true } }

// defaultOptions is shared by every breaker created without options: it is
// never changed after creation.
var defaultOptions = buildOptions(nil)

func newOptions(opts []Option) *options {
	if len(opts) == 0 {
		return defaultOptions
	}
	return buildOptions(opts)
}

func buildOptions(opts []Option) *options {
	o := &options{classify: DefaultClassifier, randf: rand.Float64, tb: newTimebase(nil)}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

func (o *options) random() (u float64) {
	defer func() {
		if recover() != nil {
			u = 0.5 // see WithRand
		}
	}()
	u = o.randf()
	if !(u >= 0 && u < 1) {
		return 0.5
	}
	return u
}

func (b *Breaker) classify(err error) Outcome { return b.opt.classify(err) }

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
	b := &Breaker{name: name, opt: o, since: never}
	b.rules.Store(r)
	b.win.Store(newWindow(r.width, r.buckets))
	b.warmUntil.Store(never)
	if o.startCold && r.warmup > 0 {
		b.warmUntil.Store(o.tb.now() + r.warmup)
	}
	return b
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// token is what admission hands to the end of a call.
type token struct {
	gen   uint64
	start int64 // offset at admission, if timed
	role  uint8
	timed bool
	slot  uint8 // a probe's entry in history.inflight, or noSlot
}

// Do calls fn if the breaker admits the call, and returns fn's error
// unchanged. If the breaker refuses the call, Do returns an error matching
// [ErrOpen] (an *[OpenError]) without calling fn. If ctx is already done,
// Do returns ctx.Err() without calling fn, and nothing is counted. Do
// returns after fn returns.
//
// The context fn receives is ctx, with a deadline of Policy.Timeout added
// when that is set, and marked for [IsProbe] when the call is a half-open
// probe. The outcome of fn's error is decided as the [Classifier]
// documentation says. If fn panics, the call counts as a failure and the
// panic continues unchanged. A half-open probe that panics frees its slot
// without a verdict, or, under Policy.StrictProbes, fails the episode and
// reopens the breaker (reason probe_failed).
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error) error {
	if b == nil || ctx == nil || fn == nil {
		return badCall(b, ctx, fn != nil)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := b.rules.Load()
	w := b.state.Load()
	if w&(stateMask|droppedBit) != 0 || r.timed {
		// The refusal of an open breaker in ModeAuto is the other path
		// that runs at full rate during an outage: one clock read, one
		// load, one add, and the outage's shared error. Everything else
		// takes the general path.
		if w&(stateMask|modeMask|droppedBit) == uint64(Open) && b.opt.tb.now() < b.deadline.Load() {
			b.tally.inc(kRejected)
			return b.refusal()
		}
		return b.do(ctx, fn, w, r)
	}
	// The closed path, kept apart so that its frame stays small: one
	// deferred check, no derived context.
	gen := wordGen(w)
	// A flag rather than recover: the panic, or runtime.Goexit, keeps its
	// original stack while the deferred call records the outcome.
	returned := false
	defer func() {
		if !returned {
			b.abandon(ctx, token{gen: gen})
		}
	}()
	err := fn(ctx)
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
func (b *Breaker) do(ctx context.Context, fn func(context.Context) error, w uint64, r *rules) error {
	if w&droppedBit != 0 {
		return b.successor().Do(ctx, fn)
	}
	tok, err := b.admitSlow(w, r)
	if err != nil {
		return err
	}
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
	err = fn(call)
	returned = true
	b.finish(ctx, tok, err, r)
	return err
}

func badCall(b *Breaker, ctx context.Context, haveFn bool) error {
	switch {
	case b == nil:
		return errors.New("breaker: nil *Breaker")
	case ctx == nil:
		return ErrNilContext
	case !haveFn:
		return ErrNilFunc
	}
	return nil
}

// Call is [Breaker.Do] for a function that returns a value as well as an
// error. It returns fn's results unchanged, or the zero T and the error of
// a refused call.
func Call[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	var v T
	if fn == nil {
		return v, ErrNilFunc
	}
	err := b.Do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// Allow is the two-step form of Do, for calls that cannot be wrapped in a
// function, such as a stream that outlives the function that opens it. If
// the breaker admits the call, Allow returns the context to make it with
// (carrying the probe mark and the Policy.Timeout deadline, like Do's) and
// a done function to report its result with; the call counts when done is
// called, and done must be called exactly once (later calls do nothing).
// If the breaker refuses, Allow returns an error matching [ErrOpen] and a
// nil done; if ctx is already done, ctx.Err().
//
// A done that is never called is a call that never ended: in the half-open
// state it holds its probe slot until the probe timeout reopens the
// breaker, once every slot is taken and it has been in flight for a
// cooldown.
func (b *Breaker) Allow(ctx context.Context) (context.Context, func(error), error) {
	if b == nil || ctx == nil {
		return nil, nil, badCall(b, ctx, true)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r := b.rules.Load()
	w := b.state.Load()
	if w&droppedBit != 0 {
		return b.successor().Allow(ctx)
	}
	tok, err := b.admitSlow(w, r)
	if err != nil {
		return nil, nil, err
	}
	call, cancel := b.prepare(ctx, &tok, r)
	p := &permit{b: b, caller: ctx, tok: tok, r: r, cancel: cancel}
	return call, p.done, nil
}

// permit is an admitted two-step call waiting for its result. It and the
// done method value are Allow's two allocations.
type permit struct {
	b      *Breaker
	caller context.Context
	tok    token
	r      *rules
	cancel context.CancelFunc
	used   atomic.Bool
}

func (p *permit) done(err error) {
	if !p.used.CompareAndSwap(false, true) {
		return
	}
	if p.cancel != nil {
		defer p.cancel() // even if the classifier panics
	}
	p.b.finish(p.caller, p.tok, err, p.r)
}

// prepare derives the context of an admitted call and starts its timer.
func (b *Breaker) prepare(ctx context.Context, tok *token, r *rules) (context.Context, context.CancelFunc) {
	if tok.role == roleProbe {
		ctx = context.WithValue(ctx, probeKey{}, probeMark{tok.gen})
	}
	if !r.timed {
		return ctx, nil
	}
	tok.timed = true
	tok.start = b.opt.tb.now()
	if r.timeout <= 0 {
		return ctx, nil
	}
	if c, ok := b.opt.tb.clock.(interface {
		WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc)
	}); ok {
		return c.WithTimeout(ctx, time.Duration(r.timeout))
	}
	return context.WithTimeout(ctx, time.Duration(r.timeout))
}

// finish settles a returned call. r is the rules the call was admitted
// under: they decide whether it overran the deadline it was given. Every
// other decision (slowness, warmup, the trip rules, the number of probes)
// follows the rules in force now, so that a call admitted before SetPolicy
// is never judged by a policy that has been replaced.
func (b *Breaker) finish(caller context.Context, tok token, err error, r *rules) {
	now := b.opt.tb.now()
	elapsed := int64(-1)
	if tok.timed {
		elapsed = now - tok.start
	}
	cur := b.rules.Load()
	// The classifier is user code. If it panics, the call is settled as
	// if its function had panicked, and the panic goes on: otherwise a
	// probe would keep its slot for the rest of the episode.
	classified := false
	defer func() {
		if !classified {
			b.abandon(caller, tok)
		}
	}()
	o := b.outcome(caller, err, elapsed, r)
	classified = true
	switch tok.role {
	case roleCounted:
		slow := cur.slowCall > 0 && elapsed > cur.slowCall // elapsed < 0: not timed
		b.record(caller, now, tok.gen, o, slow, cur)
	case roleProbe:
		b.countOff(o)
		b.verdict(caller, now, tok.gen, tok.slot, o, b.cold(caller, now, cur), false)
	default:
		b.countOff(o)
	}
}

// abandon settles a call whose function (or the classifier) panicked, or
// called runtime.Goexit, under the rules in force now.
func (b *Breaker) abandon(caller context.Context, tok token) {
	r := b.rules.Load()
	switch tok.role {
	case roleCounted:
		b.record(caller, b.opt.tb.now(), tok.gen, Failure, false, r)
	case roleProbe:
		b.countOff(Failure)
		now := b.opt.tb.now()
		b.verdict(caller, now, tok.gen, tok.slot, Failure, b.cold(caller, now, r), true)
	default:
		b.countOff(Failure)
	}
}

// State returns the breaker's state now. Like a call, it notices an ended
// cooldown or a probe timeout and makes that transition first.
func (b *Breaker) State() State {
	now := b.opt.tb.now()
	w := b.state.Load()
	switch wordState(w) {
	case Open:
		if wordMode(w) != ModeForcedOpen && now >= b.deadline.Load() {
			b.toHalfOpen(now, w)
		}
	case HalfOpen:
		if wordIssued(w) >= b.rules.Load().probes && now >= b.deadline.Load() {
			b.probeTimeout(now, w)
		}
	}
	return wordState(b.state.Load())
}

// Mode returns the breaker's mode.
func (b *Breaker) Mode() Mode { return wordMode(b.state.Load()) }

// Snapshot returns what the window holds now. While the breaker is open or
// half-open, nothing is added to the window, so it shows the calls that
// tripped it until they age out.
func (b *Breaker) Snapshot() Snapshot {
	return b.win.Load().sum(b.opt.tb.now(), &b.tally)
}

// Policy returns the policy the breaker applies.
func (b *Breaker) Policy() Policy { return b.rules.Load().p }
