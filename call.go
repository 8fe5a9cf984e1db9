package breaker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

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
	if c := b.cand.Load(); c != nil {
		return c.do(ctx, fn)
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
	if c := b.cand.Load(); c != nil {
		return c.allow(ctx)
	}
	return b.allow(ctx)
}

// allow is Allow past its checks and the candidate hook.
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
// rules in force now, never a replaced policy.
func (b *Breaker) finish(caller context.Context, tok token, err error, r *rules) {
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
