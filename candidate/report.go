package candidate

import (
	"time"

	"github.com/govkit/breaker"
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
// It reads the breaker's candidate ([breaker.Breaker.Candidate]), with or
// without a Reporter.
func Of(b *breaker.Breaker) (st Status, ok bool) {
	if b == nil {
		return Status{}, false
	}
	c := b.Candidate()
	if c == nil {
		return Status{}, false
	}
	shadow := c.Shadow()
	cs := shadow.Status()
	st = Status{
		Version:     c.Version(),
		State:       cs.State,
		Window:      cs.Window,
		WouldRefuse: cs.Counters.ShadowRejected,
		WouldAdmit:  c.WouldAdmit(),
		Differences: c.Differences(),
		Transitions: shadow.Transitions(),
		Policy:      cs.Policy,
	}
	if st.State != breaker.Closed && cs.Outage != nil {
		st.Trip = cs.Outage.Trip.Window
	}
	return st, true
}
