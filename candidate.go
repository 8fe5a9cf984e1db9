package breaker

import (
	"context"
	"sync"
	"sync/atomic"
)

// A Candidate is the candidate policy (GroupPolicy.Candidate) one
// breaker of a group runs: a shadow breaker, in ModeShadow, that admits
// each call the breaker admits and settles it with the same error once the
// breaker has, refusing none. The breaker runs it in any program, whether
// or not anything reads it; it compares the two after each call, and an
// [Observation] carries the result. Package candidate reports on it.
type Candidate struct {
	b          *Breaker      // the breaker whose calls it sees
	shadow     *Breaker      // ModeShadow: reports, never refuses
	wouldAdmit atomic.Uint64 // calls refused that the candidate would have admitted
	diffs      atomic.Uint64 // pairs of different states compared

	// seen packs the states last compared, so that a call that changed
	// neither costs two state reads. Written under mu.
	seen atomic.Uint32

	mu      sync.Mutex
	version string
	last    *Event // the shadow's last transition
}

// Candidate returns the breaker's candidate policy, or nil without one.
func (b *Breaker) Candidate() *Candidate { return b.cand.Load() }

// Shadow returns the breaker that runs the candidate policy, in
// ModeShadow: its State, Status, Counters (ShadowRejected: the calls the
// candidate would have refused) and Transitions are the candidate's.
func (c *Candidate) Shadow() *Breaker { return c.shadow }

// Version returns the version of the policy document that carries the
// candidate.
func (c *Candidate) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// WouldAdmit returns the calls, since the candidate began, that the
// breaker refused and the candidate would have admitted.
func (c *Candidate) WouldAdmit() uint64 { return c.wouldAdmit.Load() }

// Differences returns how many times a call has left the breaker and its
// candidate in a new pair of different states (Observation.Difference).
func (c *Candidate) Differences() uint64 { return c.diffs.Load() }

// LastTransition returns the candidate's last transition; ok is false
// before its first.
func (c *Candidate) LastTransition() (e Event, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return Event{}, false
	}
	return *c.last, true
}

// newCandidate returns b's candidate, running r.
func newCandidate(g *Group, b *Breaker, r *rules, version string) *Candidate {
	c := &Candidate{b: b, version: version}
	o := *g.opt
	o.hooks = []func(Event){func(e Event) {
		c.mu.Lock()
		c.last = &e
		c.mu.Unlock()
	}}
	o.logger, o.group, o.obs = nil, nil, nil
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
	c.seen.Store(statePair(b.State(), Closed))
	return c
}

func statePair(active, cand State) uint32 { return uint32(active)<<8 | uint32(cand) }

// compare returns whose transition made the breaker and its candidate
// differ, once both have settled a call: "candidate" or "active", or ""
// if the pair of states is one compared before or the two agree.
func (c *Candidate) compare() string {
	active, cand := c.b.State(), c.shadow.State()
	pair := statePair(active, cand)
	if c.seen.Load() == pair {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.seen.Load()
	if prev == pair {
		return ""
	}
	c.seen.Store(pair)
	if active == cand {
		return ""
	}
	c.diffs.Add(1)
	if cand != State(prev&0xff) && c.last != nil {
		return "candidate"
	}
	return "active"
}

// candidateCall is what the candidate needs to settle one call.
type candidateCall struct {
	ctx context.Context // the caller's
	c   *Candidate      // nil: none
	ran bool            // fn was called
	// The candidate's admission of the call.
	tok token
	r   *rules
	ok  bool
}

// admit has the candidate admit the call, timed from here for its
// deadlines, which it judges without imposing.
func (cc *candidateCall) admit() {
	if cc.c == nil {
		return
	}
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
func (c *Candidate) refused() {
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
		b.cand.Store(newCandidate(g, b, r, version))
	default:
		c.mu.Lock()
		c.version = version
		c.mu.Unlock()
		c.shadow.setRules(r)
	}
}
