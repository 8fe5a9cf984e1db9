// Package shadowhook joins a breaker that runs a candidate policy in
// shadow to package candidate, which reports what the candidate does and
// which the breaker's package cannot import. Package breaker runs the
// candidate's calls and sets Of and StateOf; package candidate, when it
// is linked, registers the factory of the observers that compare the two
// and report. The values cross as any: a *breaker.Group, a
// *breaker.Breaker, a breaker.Event, asserted on the other side.
package shadowhook

import (
	"sync"
	"sync/atomic"
)

// Observer watches one breaker and its candidate.
type Observer interface {
	// Settled is called after each call, once the breaker and the
	// candidate have both settled it, and after each call the breaker
	// refused.
	Settled()
	// Transition is called with each transition (a breaker.Event) of the
	// candidate, before Settled.
	Transition(e any)
	// Update is called when a new document keeps the candidate.
	Update(version string)
}

// Factory makes the observer of breaker b of group g, whose candidate
// runs on shadow (a *breaker.Breaker in breaker.ModeShadow); wouldAdmit
// counts the calls b refused that the candidate would have admitted.
type Factory func(g, b, shadow any, wouldAdmit *atomic.Uint64, version string) Observer

var factory atomic.Pointer[Factory]

// Register makes f the factory of every observer made from now on.
func Register(f Factory) { factory.Store(&f) }

// Registered returns the factory, or nil if package candidate is not
// linked.
func Registered() Factory {
	if f := factory.Load(); f != nil {
		return *f
	}
	return nil
}

// Of returns the observer of a *breaker.Breaker, nil without a
// candidate. Set by package breaker.
var Of func(b any) Observer

// StateOf returns the state package candidate keeps on a *breaker.Group.
// Set by package breaker.
var StateOf func(g any) *GroupState

// GroupState is a value package candidate keeps on a group, made once.
type GroupState struct {
	once sync.Once
	v    any
}

// Get returns the value, made by make the first time.
func (s *GroupState) Get(make func() any) any {
	s.once.Do(func() { s.v = make() })
	return s.v
}
