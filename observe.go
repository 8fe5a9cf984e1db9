package breaker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// An Observer sees every call a breaker makes or refuses, once the
// breaker has settled it: the one seam through which other packages watch
// calls (package calltrace records them; package candidate reports on a
// candidate policy). Give it with [WithObserver] to [New], or to
// [NewGroup] for every breaker of the group.
//
// Observe is called on the goroutine of the call, after the call has
// returned to the breaker (for [Breaker.Allow], in done) and before it
// returns to the caller, outside any lock, once per call. It must be
// safe for concurrent use and quick: a slow Observe delays the call. A
// panic in Observe goes on up to the call, which the breaker has already
// settled. A call that never reached the breaker (a nil function, a
// context already done) is not observed.
type Observer interface {
	Observe(Observation)
}

// An Observation is one call as a breaker settled it. It is a value: an
// Observer may keep it.
type Observation struct {
	// Breaker is the breaker that made the call; Name its name (its key,
	// in a group).
	Breaker *Breaker
	Name    string
	// Start is when the breaker was asked, on its clock; Duration how
	// long until it settled the call (0 for a refused call).
	Start    time.Time
	Duration time.Duration
	// Refused is set if the breaker refused the call: it never ran.
	// Throttled, with Refused, if the refusal was Policy.Throttle's (the
	// breaker closed) rather than an open breaker's.
	Refused   bool
	Throttled bool
	// Outcome is what the breaker counted; Failure for a call that
	// panicked. Meaningless for a refused call.
	Outcome Outcome
	// Probe is set for a half-open probe.
	Probe bool
	// State is the breaker's state once it settled the call.
	State State
	// Candidate is the breaker's candidate policy (GroupPolicy.Candidate),
	// which has settled the call too, or nil without one; Difference is
	// set when the call left the two in a new pair of different states:
	// "candidate" or "active", whose transition made it ("" otherwise).
	Candidate  *Candidate
	Difference string
}

// watched reports whether calls take the observed path: b has an
// observer or a candidate.
func (b *Breaker) watched() bool { return len(b.opt.obs) != 0 || b.cand.Load() != nil }

// observedCall is the state of one call on the observed path.
type observedCall struct {
	b     *Breaker
	start int64
	cc    candidateCall // cc.c is nil without a candidate
}

// observedDo is Do for a watched breaker: Do's general path, with the
// call's outcome kept for the observation. On the closed path it
// allocates nothing more than Do.
func (b *Breaker) observedDo(ctx context.Context, fn func(context.Context) error) error {
	r := b.rules.Load()
	w := b.state.Load()
	if w.dropped() {
		return b.successor().Do(ctx, fn)
	}
	oc := observedCall{b: b, cc: candidateCall{ctx: ctx, c: b.cand.Load()}}
	oc.begin()
	tok, err := b.admitNotClosed(w, r)
	if err != nil {
		oc.refused(err)
		return err
	}
	call, cancel := b.prepare(ctx, &tok, r)
	if cancel != nil {
		defer cancel()
	}
	// A panic in fn is settled here; one in the classifier, by finish.
	// Either is observed as a failure.
	returned, settled := false, false
	defer func() {
		if !settled {
			if !returned {
				b.abandon(ctx, tok)
			}
			oc.cc.abandon()
			oc.observe(Failure, tok.role == roleProbe)
		}
	}()
	oc.cc.ran = true
	oc.cc.admit()
	err = fn(call)
	returned = true
	o := Success
	if err == nil && tok.role == roleCounted && !tok.timed {
		b.recordSuccess(ctx, tok.gen) // as on Do's closed path
	} else {
		o = b.finish(ctx, tok, err, r)
	}
	settled = true
	oc.cc.settle(err)
	oc.observe(o, tok.role == roleProbe)
	return err
}

// observedAllow is Allow for a watched breaker.
func (b *Breaker) observedAllow(ctx context.Context) (context.Context, func(error), error) {
	r := b.rules.Load()
	w := b.state.Load()
	if w.dropped() {
		return b.successor().Allow(ctx)
	}
	oc := &observedCall{b: b, cc: candidateCall{ctx: ctx, c: b.cand.Load()}}
	oc.begin()
	tok, err := b.admitNotClosed(w, r)
	if err != nil {
		oc.refused(err)
		return nil, nil, err
	}
	oc.cc.ran = true
	oc.cc.admit()
	call, cancel := b.prepare(ctx, &tok, r)
	var once atomic.Bool
	return call, func(err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		if cancel != nil {
			defer cancel() // even if the classifier panics
		}
		settled := false
		defer func() {
			if !settled { // the classifier panicked; finish settled the call
				oc.cc.abandon()
				oc.observe(Failure, tok.role == roleProbe)
			}
		}()
		o := b.finish(ctx, tok, err, r)
		settled = true
		oc.cc.settle(err)
		oc.observe(o, tok.role == roleProbe)
	}, nil
}

// begin notes when the call began, if an observer is to be told: a
// breaker with a candidate alone reads no clock for it.
func (oc *observedCall) begin() {
	if len(oc.b.opt.obs) != 0 {
		oc.start = oc.b.opt.tb.Now()
	}
}

// refused observes a call the breaker refused with err.
func (oc *observedCall) refused(err error) {
	if !errors.Is(err, ErrOpen) {
		return // not a refusal: the breaker's error about the call
	}
	if c := oc.cc.c; c != nil {
		c.refused()
	}
	oe, _ := err.(*OpenError)
	oc.send(Observation{Refused: true, Throttled: oe != nil && oe.Reason == ReasonThrottled}, 0)
}

// observe observes a call that ran, with outcome o.
func (oc *observedCall) observe(o Outcome, probe bool) {
	var end int64
	if len(oc.b.opt.obs) != 0 {
		end = oc.b.opt.tb.Now()
	}
	oc.send(Observation{Outcome: o, Probe: probe}, end)
}

// send completes ob and hands it to the observers; end is when the call
// was settled, 0 for a refusal.
func (oc *observedCall) send(ob Observation, end int64) {
	b := oc.b
	if c := oc.cc.c; c != nil {
		ob.Candidate = c
		ob.Difference = c.compare()
	}
	if len(b.opt.obs) == 0 {
		return // a candidate, and no observer
	}
	ob.Breaker, ob.Name = b, b.name
	ob.Start = b.opt.tb.Time(oc.start)
	if end > oc.start {
		ob.Duration = time.Duration(end - oc.start)
	}
	ob.State = b.state.Load().state()
	for _, o := range b.opt.obs {
		o.Observe(ob)
	}
}
