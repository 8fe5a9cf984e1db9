package breaker

import (
	"log/slog"
	"runtime/debug"
	"sync/atomic"
)

type subscriber struct {
	f   func(*Breaker, Event)
	off atomic.Bool // unsubscribed
}

// observed reports whether transitions have anyone to go to: a hook, or a
// group's subscribers.
func (o *options) observed() bool { return len(o.hooks) > 0 || o.group != nil }

// Subscribe adds f to the group's subscribers: it is called with every
// transition of every breaker in the group, and the breaker it comes from,
// outside any lock, in order for each breaker (see [OnTransition] for the
// full contract). The returned function removes f; once it has returned, f
// is not called again (a call already under way may still be running,
// unless unsubscribe was called from it). Calling it more than once does
// nothing. A nil f is ignored.
//
// A key that is removed or evicted and then used again gets a new
// *Breaker whose counters start from zero, so a subscriber that keeps
// something per breaker (a metrics adapter counting transitions, say) keys
// it by the *Breaker rather than the name, and starts afresh with the new
// one.
//
// A subscriber is an observer, and whatever goes wrong in it stays there:
// a panic in f is recovered, the other subscribers still see the event,
// and the panic is logged at Error level, with its value and stack, to
// the group's logger ([WithLogger]), or to [slog.Default] if it has none.
// It does not reach the caller that caused the transition, which may be
// any Do of the group's users, a metrics scrape, or a watcher of package
// ops.
//
// Once a breaker has been dropped (see [Group.Remove] and
// [GroupConfig.IdleAfter]), its transitions are no longer delivered, even
// one it made just before: the group's subscribers see the group's
// breakers only.
func (g *Group) Subscribe(f func(b *Breaker, e Event)) (unsubscribe func()) {
	if f == nil {
		return func() {}
	}
	s := &subscriber{f: f}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Copy on write: dispatch reads the list with one atomic load.
	g.subs.Store(ptr(append(append([]*subscriber{}, *g.subs.Load()...), s)))
	return func() {
		// Marked before it leaves the list: a delivery that read the
		// list before the removal checks the mark before each call.
		s.off.Store(true)
		g.mu.Lock()
		defer g.mu.Unlock()
		var next []*subscriber
		for _, x := range *g.subs.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		g.subs.Store(&next)
	}
}

func ptr[T any](v T) *T { return &v }

// dispatch delivers b's event to the subscribers. It runs after the
// breaker's own hooks, from Breaker.flush, so it inherits their order and
// their freedom from locks.
func (g *Group) dispatch(b *Breaker, e Event) {
	if b.dropped() {
		return
	}
	for _, s := range *g.subs.Load() {
		if !s.off.Load() {
			g.deliver(s, b, e)
		}
	}
}

// deliver calls one subscriber and contains its panic.
func (g *Group) deliver(s *subscriber, b *Breaker, e Event) {
	defer func() {
		if v := recover(); v != nil {
			g.reportPanic("breaker: subscriber panicked", e.Name, v)
		}
	}()
	s.f(b, e)
}

// reportPanic logs a panic recovered from user code that the library
// must survive. Run from the deferred function, debug.Stack still shows
// where the panic began.
func (g *Group) reportPanic(msg, name string, v any) {
	l := g.opt.logger
	if l == nil {
		l = slog.Default()
	}
	l.Error(msg, slog.Group("breaker", slog.String("name", name)), "panic", v, "stack", string(debug.Stack()))
}
