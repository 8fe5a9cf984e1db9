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

// observed reports whether transitions have a hook or a group to go to.
func (o *options) observed() bool { return len(o.hooks) > 0 || o.group != nil }

// Subscribe calls f with every transition of every breaker the group
// holds, and that breaker, outside any lock, in order for each breaker (as
// [OnTransition]); a dropped breaker's are not delivered. The returned
// function removes f; once it has returned, f is not called again, and
// calling it twice does nothing. A panic in f is recovered and logged at
// Error, never reaching the caller. A nil f is ignored. Key per-breaker
// state by *Breaker: a key made again gets a new one
// (docs/observability.md).
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
		// Marked before it leaves the list, which a delivery under way
		// may have read.
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

// dispatch delivers b's event to the subscribers, after its hooks, from
// Breaker.flush.
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

// reportPanic logs a panic recovered from user code; run from the
// deferred function, debug.Stack shows where it began.
func (g *Group) reportPanic(msg, name string, v any) {
	l := g.opt.logger
	if l == nil {
		l = slog.Default()
	}
	l.Error(msg, slog.Group("breaker", slog.String("name", name)), "panic", v, "stack", string(debug.Stack()))
}
