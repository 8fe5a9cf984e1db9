// Package subscribers is a list of the functions subscribed to a source
// of values (a group's transitions, a follower's records, a candidate's
// events): added and removed at any time, called without a lock.
package subscribers

import (
	"sync"
	"sync/atomic"
)

// List is a copy-on-write list of subscribers of type F. The zero value
// is empty and ready to use; a List must not be copied after first use.
//
// Each reads the list with one atomic load and takes no lock, so a
// subscriber may subscribe or unsubscribe from inside a call. Once the
// function Add returned has returned, its subscriber is not called again,
// even by an Each already under way.
type List[F any] struct {
	mu   sync.Mutex // serializes Add and removals
	list atomic.Pointer[[]*entry[F]]
}

type entry[F any] struct {
	f   F
	off atomic.Bool // removed
}

// Add appends f to the list and returns the function that removes it;
// calling that more than once does nothing.
func (l *List[F]) Add(f F) (remove func()) {
	e := &entry[F]{f: f}
	l.mu.Lock()
	defer l.mu.Unlock()
	var next []*entry[F]
	if cur := l.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, e)
	l.list.Store(&next)
	return func() {
		// Marked before it leaves the list, which an Each under way may
		// have read.
		e.off.Store(true)
		l.mu.Lock()
		defer l.mu.Unlock()
		var next []*entry[F]
		for _, x := range *l.list.Load() {
			if x != e {
				next = append(next, x)
			}
		}
		l.list.Store(&next)
	}
}

// Each calls call with every subscriber in the order they were added,
// skipping those removed. If a call panics, recovered receives the value
// and Each goes on with the next subscriber; a nil recovered lets the
// panic through.
func (l *List[F]) Each(call func(F), recovered func(v any)) {
	cur := l.list.Load()
	if cur == nil {
		return
	}
	for _, e := range *cur {
		if !e.off.Load() {
			one(e.f, call, recovered)
		}
	}
}

// Len returns how many subscribers the list holds.
func (l *List[F]) Len() int {
	if cur := l.list.Load(); cur != nil {
		return len(*cur)
	}
	return 0
}

func one[F any](f F, call func(F), recovered func(v any)) {
	if recovered != nil {
		defer func() {
			if v := recover(); v != nil {
				recovered(v)
			}
		}()
	}
	call(f)
}
