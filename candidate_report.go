package breaker

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

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

func statePair(active, cand State) uint32 { return uint32(active)<<8 | uint32(cand) }

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
