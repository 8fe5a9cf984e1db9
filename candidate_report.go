package breaker

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// CandidateEvent reports that a breaker's candidate policy (see
// [GroupPolicy.Candidate]) and its policy in force are in different
// states, each time the pair of states changes to one that differs.
type CandidateEvent struct {
	// Version is that of the document that carries the candidate.
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	// The states of the candidate and of the policy in force.
	Candidate State `json:"candidate"`
	Active    State `json:"active"`
	// Moved is "candidate" or "active": whose transition made it.
	Moved string `json:"moved"`
	// The reason of that transition and, for a trip, its window.
	Reason Reason   `json:"reason,omitempty"`
	Window Snapshot `json:"window"`
	// Calls, since the candidate began, that the candidate would have
	// refused where the policy in force admitted them, and the reverse.
	WouldRefuse uint64 `json:"would_refuse"`
	WouldAdmit  uint64 `json:"would_admit"`
}

// CandidateStatus is what a breaker's candidate policy has done.
type CandidateStatus struct {
	Version string   `json:"version"`
	State   State    `json:"state"`
	Window  Snapshot `json:"window"`
	// Trip is the candidate's tripping window, while not closed.
	Trip        Snapshot          `json:"trip"`
	WouldRefuse uint64            `json:"would_refuse"`
	WouldAdmit  uint64            `json:"would_admit"`
	Differences uint64            `json:"differences"`
	Transitions []TransitionCount `json:"transitions,omitempty"`
	Policy      Policy            `json:"policy"`
}

// Candidate returns what the breaker's candidate policy has done; ok is
// false without one.
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

// reconcile reports a new difference between the breaker and its
// candidate, once both have settled the call.
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

// SubscribeCandidate calls f with every [CandidateEvent] of the group, on
// the goroutine of the call that revealed it, outside any lock. The
// returned function removes f; once it has returned, f is not called
// again. A panic in f is recovered and logged; a nil f is ignored. Every
// report is also logged at Info (docs/live-policies.md).
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
