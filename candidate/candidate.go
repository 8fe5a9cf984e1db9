// Package candidate reports on a group's candidate policy: a policy
// document may carry one ([breaker.GroupPolicy] Candidate), to try on
// real traffic before it is published. Every breaker whose policy in the
// candidate differs from its own also runs the candidate's in shadow, on
// the same calls, refusing none ([breaker.Breaker.Candidate]); a
// [Reporter], given to the group as its [breaker.Observer], reports each
// place where the two come to differ, as an [Event] to its subscribers and
// in a log record, and [Of] tells what a breaker's candidate has done.
//
// The group runs the candidate whether or not this package is linked: the
// shadow is the breaker's own. Without a Reporter, nothing is reported,
// and Of still reads the candidate.
package candidate

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker"
)

// A Reporter reports on the candidate policies of the breakers it
// observes: pass it to [breaker.NewGroup] with [breaker.WithObserver].
// Each [Event] is logged at Info to its logger and handed to its
// subscribers. A Reporter is safe for concurrent use; one may observe
// several groups.
type Reporter struct {
	log  *slog.Logger
	mu   sync.Mutex
	list atomic.Pointer[[]*subscriber]
}

type subscriber struct {
	f   func(Event)
	off atomic.Bool
}

// NewReporter returns a Reporter that logs to log (nil: slog.Default()).
// Give it the group's logger ([breaker.WithLogger]) to log beside the
// group's records.
func NewReporter(log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{log: log}
}

// Observe reports the difference an observation reveals, if any: the
// [breaker.Observer] of a group whose breakers run candidates.
func (r *Reporter) Observe(o breaker.Observation) {
	c := o.Candidate
	if c == nil || o.Difference == "" {
		return
	}
	shadow := c.Shadow()
	e := Event{Name: o.Name, Version: c.Version(), Candidate: shadow.State(), Active: o.State, Moved: o.Difference}
	if last, ok := c.LastTransition(); ok && o.Difference == "candidate" {
		e.Reason, e.Time = last.Reason, last.Time
		if e.Candidate != breaker.Closed {
			e.Window = last.Snapshot
		} else {
			e.Window = shadow.Snapshot()
		}
	} else {
		e.Time = o.Start.Add(o.Duration)
		if st := o.Breaker.Status(); e.Active != breaker.Closed {
			e.Reason = st.Reason
			if st.Outage != nil {
				e.Window = st.Outage.Trip.Window
			}
		} else {
			e.Window = st.Window
		}
	}
	e.WouldRefuse = shadow.Counters().ShadowRejected
	e.WouldAdmit = c.WouldAdmit()
	r.report(e)
}

// Subscribe calls f with every [Event] r reports, on the goroutine of the
// call that revealed it, outside any lock. The returned function removes
// f; once it has returned, f is not called again. A panic in f is
// recovered and logged; a nil f is ignored.
func (r *Reporter) Subscribe(f func(Event)) (unsubscribe func()) {
	if r == nil || f == nil {
		return func() {}
	}
	s := &subscriber{f: f}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next []*subscriber
	if l := r.list.Load(); l != nil {
		next = append(next, *l...)
	}
	next = append(next, s)
	r.list.Store(&next)
	return func() {
		s.off.Store(true)
		r.mu.Lock()
		defer r.mu.Unlock()
		var next []*subscriber
		for _, x := range *r.list.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		r.list.Store(&next)
	}
}

// report logs e and hands it to the subscribers.
func (r *Reporter) report(e Event) {
	log := r.log
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
	l := r.list.Load()
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
