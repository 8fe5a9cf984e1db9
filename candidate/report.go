package candidate

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/shadowhook"
)

// Event reports that a breaker's candidate policy and its policy in
// force are in different states, each time the pair of states changes to
// one that differs.
type Event struct {
	// Version is that of the document that carries the candidate.
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	// The states of the candidate and of the policy in force.
	Candidate breaker.State `json:"candidate"`
	Active    breaker.State `json:"active"`
	// Moved is "candidate" or "active": whose transition made it.
	Moved string `json:"moved"`
	// The reason of that transition and, for a trip, its window.
	Reason breaker.Reason   `json:"reason,omitempty"`
	Window breaker.Snapshot `json:"window"`
	// Calls, since the candidate began, that the candidate would have
	// refused where the policy in force admitted them, and the reverse.
	WouldRefuse uint64 `json:"would_refuse"`
	WouldAdmit  uint64 `json:"would_admit"`
}

// Status is what a breaker's candidate policy has done.
type Status struct {
	Version string           `json:"version"`
	State   breaker.State    `json:"state"`
	Window  breaker.Snapshot `json:"window"`
	// Trip is the candidate's tripping window, while not closed.
	Trip        breaker.Snapshot          `json:"trip"`
	WouldRefuse uint64                    `json:"would_refuse"`
	WouldAdmit  uint64                    `json:"would_admit"`
	Differences uint64                    `json:"differences"`
	Transitions []breaker.TransitionCount `json:"transitions,omitempty"`
	Policy      breaker.Policy            `json:"policy"`
}

// Of returns what b's candidate policy has done; ok is false without one.
func Of(b *breaker.Breaker) (st Status, ok bool) {
	if b == nil {
		return Status{}, false
	}
	o, ok := shadowhook.Of(b).(*observer)
	if !ok {
		return Status{}, false
	}
	o.mu.Lock()
	version := o.version
	o.mu.Unlock()
	cs := o.shadow.Status()
	st = Status{
		Version:     version,
		State:       cs.State,
		Window:      cs.Window,
		WouldRefuse: cs.Counters.ShadowRejected,
		WouldAdmit:  o.wouldAdmit.Load(),
		Differences: o.diffs.Load(),
		Transitions: o.shadow.Transitions(),
		Policy:      cs.Policy,
	}
	if st.State != breaker.Closed && cs.Outage != nil {
		st.Trip = cs.Outage.Trip.Window
	}
	return st, true
}

// subscribers is a group's list of subscribers, copied on write.
type subscribers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*subscriber]
}

type subscriber struct {
	f   func(Event)
	off atomic.Bool
}

func subscribersOf(g *breaker.Group) *subscribers {
	return shadowhook.StateOf(g).Get(func() any { return new(subscribers) }).(*subscribers)
}

// Subscribe calls f with every [Event] of g's breakers, on the goroutine
// of the call that revealed it, outside any lock. The returned function
// removes f; once it has returned, f is not called again. A panic in f is
// recovered and logged; a nil f or g is ignored. Every event is also
// logged at Info, subscribed to or not.
func Subscribe(g *breaker.Group, f func(Event)) (unsubscribe func()) {
	if g == nil || f == nil {
		return func() {}
	}
	subs := subscribersOf(g)
	s := &subscriber{f: f}
	subs.mu.Lock()
	defer subs.mu.Unlock()
	var next []*subscriber
	if l := subs.list.Load(); l != nil {
		next = append(next, *l...)
	}
	next = append(next, s)
	subs.list.Store(&next)
	return func() {
		s.off.Store(true)
		subs.mu.Lock()
		defer subs.mu.Unlock()
		var next []*subscriber
		for _, x := range *subs.list.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		subs.list.Store(&next)
	}
}

// report logs e and hands it to g's subscribers.
func report(g *breaker.Group, e Event) {
	log := g.Logger()
	log.LogAttrs(context.Background(), slog.LevelInfo, "breaker candidate differs",
		slog.Attr{Key: "breaker", Value: slog.GroupValue(
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
	l := subscribersOf(g).list.Load()
	if l == nil {
		return
	}
	for _, s := range *l {
		if !s.off.Load() {
			func() {
				defer func() {
					if v := recover(); v != nil {
						log.Error("breaker: candidate subscriber panicked", slog.Group("breaker", slog.String("name", e.Name)),
							"panic", v, "stack", string(debug.Stack()))
					}
				}()
				s.f(e)
			}()
		}
	}
}
