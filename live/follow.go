package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/subscribers"
	// A followed document may carry a candidate: linking package
	// candidate is what lets the group run it.
	_ "github.com/govkit/breaker/candidate"
)

// A Follower is the goroutine started by [Follow]. It applies each
// document its source delivers until its context is done or Close is
// called, and keeps the count of what became of them ([Follower.Status]).
//
// A Follower is safe for concurrent use by multiple goroutines.
type Follower struct {
	g      *breaker.Group
	hold   *breaker.PolicyHold
	cancel context.CancelFunc
	done   chan struct{}
	err    error       // what Watch returned; written before done is closed
	over   atomic.Bool // Watch has returned: late deliveries are dropped
	origin atomic.Pointer[string]

	mu       sync.Mutex // guards the fields below
	reloads  Reloads
	last     *Change
	applied  *Change
	down     *Change // the source gone or unreadable since its last readable document
	rejected *Change // refused, with no valid document since
	subs     subscribers.List[func(Change)]
}

// An Option configures a [Follower] as [Follow] starts it.
type Option func(*options)

type options struct {
	observers []func(Change)
}

// OnChange subscribes f to the follower's records before its first
// document, as [Follower.Subscribe] does once it runs: f sees every
// record, the first included, for as long as the follower runs.
func OnChange(f func(Change)) Option {
	return func(o *options) { o.observers = append(o.observers, f) }
}

// unknownOrigin is a follower's origin before its source names one.
const unknownOrigin = "(unknown)"

// Follow starts a goroutine that applies every document src delivers to
// g, in order, until ctx is done or [Follower.Close] is called. A
// document is decoded strictly (see [breaker.ParseGroupPolicy]) and
// applied whole, as [breaker.Group.SetPolicies] applies a document, or
// refused whole; a document that is gone or cannot be read changes
// nothing. Either way it ends in exactly one [Change]: given to the
// subscribers ([Follower.Subscribe], [OnChange]), logged to the group's
// logger ([breaker.Group.Logger]), and counted in [Follower.Status].
//
// Calls are never held up by a reload: a breaker's policy is swapped with
// one atomic store, and each breaker keeps its state, its window (unless
// the window's width changes) and its counters, as with
// [breaker.Breaker.SetPolicy].
//
// The follower holds the group's policies while it runs
// ([breaker.Group.HoldPolicies]): a second Follow of the same group, and
// SetPolicies or LoadPolicies by code, return an error wrapping
// [breaker.ErrPoliciesHeld] that names the source, so that nothing can
// quietly replace what the source published. Once the follower has
// stopped (Close has returned, or ctx is done and [Follower.Done] is
// closed), the group keeps the last policy applied and may follow
// another source.
//
// Follow returns an error for a nil ctx, g or src.
func Follow(ctx context.Context, g *breaker.Group, src Source, opts ...Option) (*Follower, error) {
	switch {
	case ctx == nil:
		return nil, errors.New("live: nil context")
	case g == nil:
		return nil, errors.New("live: nil group")
	case src == nil:
		return nil, errors.New("live: nil policy source")
	}
	holder := unknownOrigin
	if o, ok := src.(interface{ Origin() string }); ok && o.Origin() != "" {
		holder = o.Origin()
	}
	hold, err := g.HoldPolicies(holder)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Follower{g: g, hold: hold, cancel: cancel, done: make(chan struct{})}
	if holder != unknownOrigin {
		f.setOrigin(holder)
	}
	var cfg options
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	for _, fn := range cfg.observers {
		f.Subscribe(fn)
	}
	go f.run(ctx, src)
	return f, nil
}

func (f *Follower) run(ctx context.Context, src Source) {
	defer close(f.done)
	defer func() {
		f.over.Store(true)
		f.hold.Release()
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
func (f *Follower) watch(ctx context.Context, src Source) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("live: policy source panicked: %v", v)
			f.reportPanic("live: policy source panicked", v)
		}
	}()
	return src.Watch(ctx, f.deliver)
}

// deliver applies one document. It is what the source calls.
func (f *Follower) deliver(doc Document) {
	if f.over.Load() {
		return // a source that broke its promise; the group has moved on
	}
	if doc.Origin != "" {
		f.setOrigin(doc.Origin)
	}
	f.apply(doc)
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
	return unknownOrigin
}

// Close stops the follower and returns once its goroutine has returned,
// with the error the source stopped with, if it stopped on its own
// before it was asked to (nil otherwise). Calling it again returns the
// same. The group keeps the policy in force.
//
// Close waits for the document being applied, and so for the
// subscribers, which run on the follower's goroutine: a subscriber must
// not call it. To stop the follower from a subscriber, cancel the
// context given to Follow; [Follower.Done] is closed once it has
// stopped.
func (f *Follower) Close() error {
	f.cancel()
	<-f.done
	return f.err
}

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

// Subscribe adds f to the subscribers of the follower's records: f is
// called with the [Change] of every document the source delivers from
// then on, once it has been dealt with, on the follower's goroutine,
// outside any lock, in the order the documents came. To see the first
// document's record too, give f to [Follow] with [OnChange]. The
// returned function removes f; once it has returned, f is not called
// again. Calling it more than once does nothing. A nil f is ignored.
//
// A subscriber is an observer, and whatever goes wrong in it stays
// there: a panic in f is recovered and logged at Error level, with its
// value and stack, to the group's logger, and the other subscribers
// still see the record.
func (f *Follower) Subscribe(fn func(Change)) (unsubscribe func()) {
	if fn == nil {
		return func() {}
	}
	return f.subs.Add(fn)
}

func (f *Follower) dispatch(rec Change) {
	f.subs.Each(func(fn func(Change)) { fn(rec) }, func(v any) {
		f.reportPanic("live: policy subscriber panicked", v)
	})
}

// reportPanic logs a panic recovered from user code that the follower
// must survive. Run from the deferred function, debug.Stack still shows
// where the panic began.
func (f *Follower) reportPanic(msg string, v any) {
	f.g.Logger().Error(msg, slog.Group(logGroup, slog.String("origin", f.Origin())),
		"panic", v, "stack", string(debug.Stack()))
}
