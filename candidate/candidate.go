// Package candidate reports on a group's candidate policy: a policy
// document may carry one ([breaker.GroupPolicy] Candidate), to try on
// real traffic before it is published. Every breaker whose policy in the
// candidate differs from its own also runs the candidate's in shadow, on
// the same calls, refusing none; this package compares the two after
// each call and reports each place where they come to differ: as an
// [Event] to [Subscribe]rs, in a log record, and in [Of].
//
// A group runs a document's candidate only in a program that links this
// package, as package live does; elsewhere a document with a candidate is
// refused.
package candidate

import (
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/shadowhook"
)

func init() { shadowhook.Register(newObserver) }

// observer compares one breaker with its candidate, which the breaker
// runs on shadow, a breaker in breaker.ModeShadow.
type observer struct {
	g          *breaker.Group
	b          *breaker.Breaker
	shadow     *breaker.Breaker
	wouldAdmit *atomic.Uint64 // counted by the breaker
	diffs      atomic.Uint64  // differences reported

	// seen packs the states last compared, so that a call that changed
	// neither costs two state reads. Written under mu.
	seen atomic.Uint32

	mu      sync.Mutex
	version string
	last    *breaker.Event // the candidate's last transition
}

func newObserver(g, b, shadow any, wouldAdmit *atomic.Uint64, version string) shadowhook.Observer {
	o := &observer{g: g.(*breaker.Group), b: b.(*breaker.Breaker), shadow: shadow.(*breaker.Breaker),
		wouldAdmit: wouldAdmit, version: version}
	o.seen.Store(statePair(o.b.State(), breaker.Closed))
	return o
}

// Transition keeps the candidate's last transition, for Settled.
func (o *observer) Transition(e any) {
	ev := e.(breaker.Event)
	o.mu.Lock()
	o.last = &ev
	o.mu.Unlock()
}

// Update records the version of a document that keeps the candidate.
func (o *observer) Update(version string) {
	o.mu.Lock()
	o.version = version
	o.mu.Unlock()
}

func statePair(active, cand breaker.State) uint32 { return uint32(active)<<8 | uint32(cand) }

// Settled reports a new difference between the breaker and its
// candidate, once both have settled a call.
func (o *observer) Settled() {
	active, cand := o.b.State(), o.shadow.State()
	pair := statePair(active, cand)
	if o.seen.Load() == pair {
		return
	}
	o.mu.Lock()
	prev := o.seen.Load()
	if prev == pair {
		o.mu.Unlock()
		return
	}
	o.seen.Store(pair)
	if active == cand {
		o.mu.Unlock()
		return
	}
	e := Event{Name: o.b.Name(), Version: o.version, Candidate: cand, Active: active}
	if cand != breaker.State(prev&0xff) && o.last != nil {
		e.Moved, e.Reason, e.Time = "candidate", o.last.Reason, o.last.Time
		if cand != breaker.Closed {
			e.Window = o.last.Snapshot
		} else {
			e.Window = o.shadow.Snapshot()
		}
	} else {
		e.Moved, e.Time = "active", o.g.Now()
		if st := o.b.Status(); active != breaker.Closed {
			e.Reason = st.Reason
			if st.Outage != nil {
				e.Window = st.Outage.Trip.Window
			}
		} else {
			e.Window = st.Window
		}
	}
	o.mu.Unlock()
	e.WouldRefuse = o.shadow.Counters().ShadowRejected
	e.WouldAdmit = o.wouldAdmit.Load()
	o.diffs.Add(1)
	report(o.g, e)
}
