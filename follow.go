package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrFollowing is returned, wrapped with the origin of the source in
// force, by [Group.Follow] for a group that already follows a source, and
// by [Group.SetPolicies] and [Group.LoadPolicies] while it does. A group
// takes its policy from one place at a time, so that a second source
// can never quietly replace what the first one published: close the
// [Follower] first.
var ErrFollowing = errors.New("breaker: the group follows a policy source")

// A Follower is the goroutine started by [Group.Follow]. It applies each
// document its source delivers until its context is done or Close is
// called.
//
// A Follower is safe for concurrent use by multiple goroutines.
type Follower struct {
	g      *Group
	cancel context.CancelFunc
	done   chan struct{}
	err    error       // what Watch returned; written before done is closed
	over   atomic.Bool // Watch has returned: late deliveries are dropped
	origin atomic.Pointer[string]
}

// Follow starts a goroutine that applies every document src delivers, in
// order, until ctx is done or [Follower.Close] is called. A document is
// decoded strictly (see [GroupPolicy] and [MaxPolicyDocumentSize]) and
// applied whole with what [Group.SetPolicies] does, or refused whole; a
// document that is gone or cannot be read changes nothing. Either way it
// ends in exactly one [PolicyChange]: given to the subscribers of
// [Group.SubscribePolicy], logged (see [PolicyChange]), and counted in
// [Group.PolicyStatus].
//
// Calls are never held up by a reload: a breaker's policy is swapped with
// one atomic store, and each breaker keeps its state, its window (unless
// the window's width changes) and its counters, as with
// [Breaker.SetPolicy].
//
// A group follows one source at a time: while it does, Follow returns an
// error wrapping [ErrFollowing], and so do SetPolicies and LoadPolicies.
// Once the follower has stopped (Close has returned, or ctx is done and
// [Follower.Done] is closed), the group keeps the last policy applied and
// may follow another source.
//
// Follow returns an error for a nil ctx or src.
func (g *Group) Follow(ctx context.Context, src PolicySource) (*Follower, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext
	case src == nil:
		return nil, errors.New("breaker: nil policy source")
	}
	g.pmu.Lock()
	if cur := g.follower; cur != nil {
		g.pmu.Unlock()
		return nil, fmt.Errorf("%w (%s): close its Follower first", ErrFollowing, cur.Origin())
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Follower{g: g, cancel: cancel, done: make(chan struct{})}
	if o, ok := src.(interface{ Origin() string }); ok {
		f.setOrigin(o.Origin())
	}
	g.follower = f
	g.pmu.Unlock()
	go f.run(ctx, src)
	return f, nil
}

func (f *Follower) run(ctx context.Context, src PolicySource) {
	defer close(f.done)
	defer func() {
		f.over.Store(true)
		f.g.pmu.Lock()
		if f.g.follower == f {
			f.g.follower = nil
		}
		f.g.pmu.Unlock()
		f.cancel()
	}()
	err := f.watch(ctx, src)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // stopped as asked
	}
	f.err = err
}

// watch runs the source, which is user code: a panic in it stops the
// follower with an error instead of the program.
func (f *Follower) watch(ctx context.Context, src PolicySource) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("breaker: policy source panicked: %v", v)
			f.g.reportPanic("breaker: policy source panicked", f.Origin(), v)
		}
	}()
	return src.Watch(ctx, f.deliver)
}

// deliver applies one document. It is what the source calls.
func (f *Follower) deliver(doc PolicyDocument) {
	if f.over.Load() {
		return // a source that broke its promise; the group has moved on
	}
	if doc.Origin != "" {
		f.setOrigin(doc.Origin)
	}
	f.g.applyDocument(doc)
}

func (f *Follower) setOrigin(o string) {
	if p := f.origin.Load(); p == nil || *p != o {
		f.origin.Store(&o)
	}
}

// Origin returns the origin of the source the follower follows, as its
// documents give it, or "(unknown)" before the first one.
func (f *Follower) Origin() string {
	if p := f.origin.Load(); p != nil {
		return *p
	}
	return "(unknown)"
}

// Close stops the follower and returns once its goroutine has returned,
// with the error the source stopped with, if it stopped on its own
// before it was asked to (nil otherwise). Calling it again returns the
// same. The group keeps the policy in force.
//
// Close waits for the document being applied, and for the subscribers of
// [Group.SubscribePolicy] that run on the follower's goroutine: it must
// not be called from one of them, which should call [Follower.Stop].
func (f *Follower) Close() error {
	f.cancel()
	<-f.done
	return f.err
}

// Stop asks the follower to stop and returns at once; [Follower.Done] is
// closed once it has.
func (f *Follower) Stop() { f.cancel() }

// Done returns a channel closed when the follower has stopped: after
// Close, when the ctx given to Follow is done, or when the source gave
// up (see [Follower.Err]).
func (f *Follower) Done() <-chan struct{} { return f.done }

// Err returns, once Done is closed, the error the source stopped with if
// it stopped on its own, and nil otherwise.
func (f *Follower) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// policyState is a group's record of where its policy comes from.
// Guarded by Group.pmu.
type policyState struct {
	origin    string
	version   string
	appliedAt int64 // group offset; never until a document is applied
	changes   []PolicyFieldChange
	reloads   PolicyReloads
	last      *PolicyChange
}
