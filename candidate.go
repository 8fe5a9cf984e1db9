package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// A candidate is the candidate policy of one breaker (see
// GroupPolicy.Candidate): a shadow breaker that runs it on the outcomes
// of the calls the breaker admits, and what the group has reported of
// the two.
type candidate struct {
	g      *Group
	b      *Breaker // the breaker whose calls it sees
	shadow *Breaker // ModeShadow: reports, never refuses

	wouldAdmit atomic.Uint64 // calls refused that the candidate would have admitted
	diffs      atomic.Uint64 // differences reported

	// seen packs the states of the breaker and of the candidate last
	// reconciled, so that a call that changed neither, the usual case,
	// is told apart with atomic loads only. It is written under mu.
	seen atomic.Uint32

	mu      sync.Mutex
	version string
	last    *Event // the candidate's last transition
}

func statePair(active, cand State) uint32 { return uint32(active)<<8 | uint32(cand) }

func newCandidate(g *Group, b *Breaker, r *rules, version string) *candidate {
	c := &candidate{g: g, b: b, version: version}
	o := *g.opt
	o.hooks = []func(Event){c.onEvent}
	o.logger, o.group = nil, nil
	c.shadow = newBreaker(b.name, r, &o)
	_ = c.shadow.SetMode(ModeShadow)
	c.seen.Store(statePair(b.state.Load().state(), Closed))
	return c
}

// onEvent keeps the candidate's last transition, for the report
// reconcile makes once the call that caused it is settled on both sides.
func (c *candidate) onEvent(e Event) {
	c.mu.Lock()
	c.last = &e
	c.mu.Unlock()
}

// candidateCall is a call of a breaker with a candidate: the caller's
// context, and what the candidate needs to settle the call. doCandidate
// keeps it on the stack; allowCandidate passes it to Allow as the
// context, which marks the call as one whose candidate is already taken
// care of.
type candidateCall struct {
	context.Context
	c   *candidate
	ran bool  // fn was called
	err error // what it returned
	// The candidate's admission of the call.
	tok token
	r   *rules
	ok  bool
}

// candidate returns the candidate a call must also run, or nil. Without
// a candidate, the usual case, it costs the closed path one atomic load
// and a nil check. The call allowCandidate makes through Allow, with a
// *candidateCall for its context, does not run the candidate a second
// time; a call to another breaker made with that context runs that
// breaker's candidate. The check compares types rather than looking up a
// context value, which would walk the context's parents.
func (b *Breaker) candidate(ctx context.Context) *candidate {
	if c := b.cand.Load(); c != nil {
		if cc, inner := ctx.(*candidateCall); !inner || cc.c != c {
			return c
		}
	}
	return nil
}

// doCandidate is Do for a breaker with a candidate: the call goes through
// the breaker's general path (do, which admits, runs and settles any
// call), and the candidate admits it when the breaker does, which a
// shadow always can; once the breaker has settled the call, the
// candidate settles it with the same error (or, if fn panicked, as the
// breaker does such a call), and the two are compared. Nothing escapes:
// a call with a candidate allocates nothing more than one without.
func (b *Breaker) doCandidate(ctx context.Context, fn func(context.Context) error, c *candidate) error {
	cc := candidateCall{Context: ctx, c: c}
	settled := false
	defer func() {
		if !settled {
			cc.abandon()
			c.reconcile()
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
	c.reconcile()
	return err
}

// run is the call, as the breaker makes it: the candidate admits it, and
// fn runs with the context the breaker gives.
func (cc *candidateCall) run(call context.Context, fn func(context.Context) error) error {
	cc.ran = true
	cc.admit()
	cc.err = fn(call)
	return cc.err
}

// admit has the candidate admit the call. A shadow breaker never refuses,
// and needs no context of its own: the call is timed from here for its
// slow-call rule, its Policy.CallTimeout and its adaptive deadline in force,
// which it judges without imposing.
func (cc *candidateCall) admit() {
	s := cc.c.shadow
	r := s.rules.Load()
	tok, err := s.admitSlow(s.state.Load(), r)
	if err != nil {
		return
	}
	// A probe of the candidate runs on the context of the breaker in
	// force: no context carries its mark, so it ends at once.
	tok.mark.end()
	tok.mark = nil
	if r.timed {
		tok.timed, tok.start = true, s.opt.tb.now()
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
		cc.c.shadow.recordSuccess(cc.Context, cc.tok.gen)
		return
	}
	cc.c.shadow.finish(cc.Context, cc.tok, err, cc.r)
}

func (cc *candidateCall) abandon() {
	if cc.ran && cc.ok {
		cc.ok = false
		cc.c.shadow.abandon(cc.Context, cc.tok)
	}
}

// refused counts a call the breaker refused, if the candidate would have
// admitted it.
func (c *candidate) refused() {
	if c.shadow.state.Load().state() == Closed {
		c.wouldAdmit.Add(1)
	}
}

// allowCandidate is Allow for a breaker with a candidate.
func (b *Breaker) allowCandidate(ctx context.Context, c *candidate) (context.Context, func(error), error) {
	cc := &candidateCall{Context: ctx, c: c}
	call, done, err := b.Allow(cc)
	if err != nil {
		if errors.Is(err, ErrOpen) {
			c.refused()
		}
		c.reconcile()
		return nil, nil, err
	}
	if call == context.Context(cc) {
		call = ctx
	}
	cc.ran = true
	cc.admit()
	var once atomic.Bool
	return call, func(err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		done(err)
		cc.settle(err)
		c.reconcile()
	}, nil
}

// setCandidate gives b the candidate rules r (nil: none) from the
// document of version. A candidate that stays keeps its state and
// window, as a breaker does across SetPolicy; one that is new starts
// closed, with an empty window. The group's mu is held.
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

// CandidateEvent reports that a breaker's candidate policy (see
// [GroupPolicy.Candidate]) decides differently from its policy in force:
// after a call, or a refusal, the two are in different states. One is
// reported each time the pair of states changes to one that differs, so
// that a candidate that would have opened where the policy in force
// stayed closed, or the reverse, is seen at once, and again when either
// moves on.
type CandidateEvent struct {
	// Name is the breaker's name; Version the version of the document
	// that carries the candidate.
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	// Candidate and Active are the states of the candidate and of the
	// policy in force.
	Candidate State `json:"candidate"`
	Active    State `json:"active"`
	// Moved is "candidate" when the candidate's transition made the
	// difference, "active" when the policy in force moved and the
	// candidate did not.
	Moved string `json:"moved"`
	// Reason and Window are the reason of the transition that made the
	// difference and, for a trip, the window that tripped it: the
	// candidate's tripping window when the candidate would have opened.
	Reason Reason   `json:"reason,omitempty"`
	Window Snapshot `json:"window"`
	// WouldRefuse counts the calls the policy in force admitted and the
	// candidate would have refused; WouldAdmit the calls it refused and
	// the candidate would have admitted; both since the candidate began.
	WouldRefuse uint64 `json:"would_refuse"`
	WouldAdmit  uint64 `json:"would_admit"`
}

// CandidateStatus is what a breaker's candidate policy has done: a part
// of [Status].
type CandidateStatus struct {
	Version string   `json:"version"`
	State   State    `json:"state"`
	Window  Snapshot `json:"window"`
	// Trip is the window that tripped the candidate, while it is not
	// closed.
	Trip        Snapshot          `json:"trip"`
	WouldRefuse uint64            `json:"would_refuse"`
	WouldAdmit  uint64            `json:"would_admit"`
	Differences uint64            `json:"differences"`
	Transitions []TransitionCount `json:"transitions,omitempty"`
	Policy      Policy            `json:"policy"`
}

// Candidate returns what the breaker's candidate policy has done, and
// true, or false if the breaker has no candidate.
func (b *Breaker) Candidate() (CandidateStatus, bool) {
	c := b.cand.Load()
	if c == nil {
		return CandidateStatus{}, false
	}
	s := c.shadow
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	st := CandidateStatus{
		Version:     version,
		State:       s.state.Load().state(),
		Window:      s.Snapshot(),
		WouldRefuse: s.Counters().ShadowRejected,
		WouldAdmit:  c.wouldAdmit.Load(),
		Differences: c.diffs.Load(),
		Transitions: s.Transitions(),
		Policy:      s.Policy(),
	}
	if e := s.openErr.Load(); e != nil && st.State != Closed {
		st.Trip = e.Snapshot
	}
	return st, true
}

// reconcile compares the states of the breaker and of its candidate
// after a call, and reports a difference that is new. It runs once both
// have settled the call, so that an outcome that trips both is no
// difference.
func (c *candidate) reconcile() {
	active, cand := c.b.state.Load().state(), c.shadow.state.Load().state()
	pair := statePair(active, cand)
	if c.seen.Load() == pair {
		return
	}
	c.mu.Lock()
	prev := c.seen.Load()
	if prev == pair {
		c.mu.Unlock()
		return
	}
	c.seen.Store(pair)
	if active == cand {
		c.mu.Unlock()
		return
	}
	e := CandidateEvent{Name: c.b.name, Version: c.version, Candidate: cand, Active: active}
	if cand != State(prev&0xff) && c.last != nil {
		e.Moved, e.Reason, e.Time = "candidate", c.last.Reason, c.last.Time
		if cand != Closed {
			e.Window = c.last.Snapshot
		} else {
			e.Window = c.shadow.Snapshot()
		}
	} else {
		e.Moved, e.Time = "active", c.g.Now()
		if oe := c.b.openErr.Load(); oe != nil && active != Closed {
			e.Reason, e.Window = oe.Reason, oe.Snapshot
		} else {
			e.Window = c.b.Snapshot()
		}
	}
	c.mu.Unlock()
	e.WouldRefuse = c.shadow.Counters().ShadowRejected
	e.WouldAdmit = c.wouldAdmit.Load()
	c.diffs.Add(1)
	c.g.reportCandidate(e)
}

type candidateSubscriber struct {
	f   func(CandidateEvent)
	off atomic.Bool
}

// SubscribeCandidate adds f to the subscribers of the group's candidate
// reports: f is called with every [CandidateEvent], on the goroutine of
// the call that revealed the difference, outside any lock. Reports of
// one breaker come in order of the calls that settle them; calls running
// at once on several goroutines may settle in either order. The
// returned function removes f; once it has returned, f is not called
// again. A panic in f is recovered and logged, as for [Group.Subscribe].
// A nil f is ignored.
//
// Every report is also logged, to the group's logger or [slog.Default],
// at Info (a candidate is an experiment, not an incident), with its
// attributes under breaker and breaker.candidate=true:
//
//	level=INFO msg="breaker candidate differs" breaker.name=payment.Charge breaker.candidate=true breaker.version=v7 breaker.moved=candidate breaker.candidate_state=open breaker.active_state=closed breaker.reason=error_ratio breaker.ratio=0.3 breaker.counted=20 breaker.failures=6 breaker.timeouts=0 breaker.would_refuse=0 breaker.would_admit=0
func (g *Group) SubscribeCandidate(f func(CandidateEvent)) (unsubscribe func()) {
	if f == nil {
		return func() {}
	}
	s := &candidateSubscriber{f: f}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.csubs.Store(ptr(append(append([]*candidateSubscriber{}, *g.csubs.Load()...), s)))
	return func() {
		s.off.Store(true)
		g.pmu.Lock()
		defer g.pmu.Unlock()
		var next []*candidateSubscriber
		for _, x := range *g.csubs.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		g.csubs.Store(&next)
	}
}

func (g *Group) reportCandidate(e CandidateEvent) {
	g.auditLogger().LogAttrs(context.Background(), slog.LevelInfo, "breaker candidate differs",
		slog.Attr{Key: logGroup, Value: slog.GroupValue(
			slog.String("name", e.Name),
			slog.Bool("candidate", true),
			slog.String("version", e.Version),
			slog.String("moved", e.Moved),
			slog.String("candidate_state", e.Candidate.String()),
			slog.String("active_state", e.Active.String()),
			slog.String("reason", string(e.Reason)),
			slog.Float64("ratio", math.Round(e.Window.ErrorRatio()*100)/100),
			slog.Uint64("counted", e.Window.Counted),
			slog.Uint64("failures", e.Window.Failures),
			slog.Uint64("timeouts", e.Window.Timeouts),
			slog.Uint64("would_refuse", e.WouldRefuse),
			slog.Uint64("would_admit", e.WouldAdmit),
		)})
	for _, s := range *g.csubs.Load() {
		if !s.off.Load() {
			func() {
				defer func() {
					if v := recover(); v != nil {
						g.reportPanic("breaker: candidate subscriber panicked", e.Name, v)
					}
				}()
				s.f(e)
			}()
		}
	}
}
