package breaker

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/govkit/breaker/internal/shadowhook"
)

// A candidate is the candidate policy of one breaker: a shadow breaker
// that runs it on the calls the breaker admits. It is the breaker's call
// hook (Breaker.cand): Do and Allow hand it every call, which it runs
// through the breaker's general path and settles on the shadow too; then
// obs, package candidate's observer, compares the two and reports
// (docs/api.md, "Candidates").
type candidate struct {
	b          *Breaker      // the breaker whose calls it sees
	shadow     *Breaker      // ModeShadow: reports, never refuses
	wouldAdmit atomic.Uint64 // calls refused that the candidate would have admitted
	obs        shadowhook.Observer
}

func init() {
	shadowhook.Of = func(b any) shadowhook.Observer {
		if c := b.(*Breaker).cand.Load(); c != nil {
			return c.obs
		}
		return nil
	}
	shadowhook.StateOf = func(g any) *shadowhook.GroupState { return &g.(*Group).shadows }
}

// errNoCandidatePackage refuses a document with a candidate in a program
// that does not link the package that reports on it.
var errNoCandidatePackage = errors.New("breaker: the policy document has a candidate, which needs package github.com/govkit/breaker/candidate; import it (package live does)")

// canRunCandidate says why gp's candidate cannot run, if it has one.
func canRunCandidate(gp GroupPolicy) error {
	if gp.Candidate != nil && shadowhook.Registered() == nil {
		return errNoCandidatePackage
	}
	return nil
}

// newCandidate returns b's candidate, running r, with its observer made
// by f.
func newCandidate(g *Group, b *Breaker, r *rules, version string, f shadowhook.Factory) *candidate {
	c := &candidate{b: b}
	o := *g.opt
	// The observer is made once the shadow is: until then the shadow
	// has no transition to report, and none is lost.
	o.hooks = []func(Event){func(e Event) {
		if c.obs != nil {
			c.obs.Transition(e)
		}
	}}
	o.logger, o.group = nil, nil
	c.shadow = newBreaker(b.name, r, &o)
	_ = c.shadow.SetMode(ModeShadow)
	// The candidate runs on the same outcomes, warmup included: one that
	// comes to a breaker whose target was marked cold counts from that
	// mark, by its own Warmup (a later mark reaches it: markCold).
	if until := b.warmUntil.Load(); until != never {
		c.shadow.markCold(until - b.rules.Load().warmup)
	}
	// It looks for a call's WithInstanceStart on every call rather than
	// sample for one first, so that it misses none the breaker has seen.
	c.shadow.marks.Store(marksSeen)
	c.obs = f(g, b, c.shadow, &c.wouldAdmit, version)
	return c
}

// candidateCall is what the candidate needs to settle one call.
type candidateCall struct {
	ctx context.Context // the caller's
	c   *candidate
	ran bool  // fn was called
	err error // what it returned
	// The candidate's admission of the call.
	tok token
	r   *rules
	ok  bool
}

// do is Do for a breaker with a candidate: the candidate admits the call
// when the breaker does, settles it with the same error once the breaker
// has, and the two are compared. It allocates nothing more than Do.
func (c *candidate) do(ctx context.Context, fn func(context.Context) error) error {
	b := c.b
	cc := candidateCall{ctx: ctx, c: c}
	settled := false
	defer func() {
		if !settled {
			cc.abandon()
			c.obs.Settled()
		}
	}()
	r := b.rules.Load()
	err := b.do(ctx, func(call context.Context) error { return cc.run(call, fn) }, b.state.Load(), r)
	settled = true
	if cc.ran {
		cc.settle(cc.err)
	} else if errors.Is(err, ErrOpen) {
		c.refused()
	}
	c.obs.Settled()
	return err
}

// allow is Allow for a breaker with a candidate.
func (c *candidate) allow(ctx context.Context) (context.Context, func(error), error) {
	call, done, err := c.b.allow(ctx)
	if err != nil {
		if errors.Is(err, ErrOpen) {
			c.refused()
		}
		c.obs.Settled()
		return nil, nil, err
	}
	cc := &candidateCall{ctx: ctx, c: c, ran: true}
	cc.admit()
	var once atomic.Bool
	return call, func(err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		done(err)
		cc.settle(err)
		c.obs.Settled()
	}, nil
}

// run is the call as the breaker makes it, admitted by the candidate too.
func (cc *candidateCall) run(call context.Context, fn func(context.Context) error) error {
	cc.ran = true
	cc.admit()
	cc.err = fn(call)
	return cc.err
}

// admit has the candidate admit the call, timed from here for its
// deadlines, which it judges without imposing.
func (cc *candidateCall) admit() {
	s := cc.c.shadow
	r := s.rules.Load()
	tok, err := s.admitNotClosed(s.state.Load(), r)
	if err != nil {
		return
	}
	// No context carries a candidate probe's mark: end it at once.
	tok.mark.end()
	tok.mark = nil
	if r.timed {
		tok.timed, tok.start = true, s.opt.tb.Now()
		if r.adaptive {
			tok.limit = s.deadline(r)
		}
	}
	cc.tok, cc.r, cc.ok = tok, r, true
}

func (cc *candidateCall) settle(err error) {
	if !cc.ok {
		return
	}
	cc.ok = false
	if err == nil && cc.tok.role == roleCounted && !cc.tok.timed {
		// The common case, as in Do's closed path.
		cc.c.shadow.recordSuccess(cc.ctx, cc.tok.gen)
		return
	}
	cc.c.shadow.finish(cc.ctx, cc.tok, err, cc.r)
}

func (cc *candidateCall) abandon() {
	if cc.ran && cc.ok {
		cc.ok = false
		cc.c.shadow.abandon(cc.ctx, cc.tok)
	}
}

// refused counts a call the breaker refused, if the candidate would have
// admitted it.
func (c *candidate) refused() {
	if c.shadow.state.Load().state() == Closed {
		c.wouldAdmit.Add(1)
	}
}

// setCandidate gives b the candidate rules r (nil: none) of version; one
// that stays keeps its state and window. The group's mu is held.
func (b *Breaker) setCandidate(g *Group, r *rules, version string) {
	c := b.cand.Load()
	switch {
	case r == nil:
		if c != nil {
			b.cand.Store(nil)
		}
	case c == nil:
		if f := shadowhook.Registered(); f != nil { // else refused: canRunCandidate
			b.cand.Store(newCandidate(g, b, r, version, f))
		}
	default:
		c.obs.Update(version)
		c.shadow.setRules(r)
	}
}
