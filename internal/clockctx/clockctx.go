// Package clockctx makes contexts that expire on a clock of one's own (a
// mock clock, usually) but report their deadline in real time, as
// anything that leaves the process needs.
package clockctx

import (
	"context"
	"time"
)

// TimeoutClock is a clock that can make a context expire on its own time,
// as *clock.Mock from github.com/benbjohnson/clock does.
type TimeoutClock interface {
	WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc)
}

// WithTimeout is context.WithTimeout on a clock that makes its own
// timeouts. The context expires when the clock's timer fires, so a test
// that advances a mock decides when a call times out; its Deadline is in
// real time, the earlier of ctx's deadline and time.Now()+d, because a
// deadline leaves the process (grpc-go sends it, net/http sets socket
// deadlines from it). The clock sees a parent without a deadline (see
// noDeadline); ctx's deadline and cancellation still end the context,
// through the parent's Done.
func WithTimeout(c TimeoutClock, ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	real := time.Now().Add(d)
	if cur, ok := ctx.Deadline(); ok && cur.Before(real) {
		real = cur
	}
	expiry, cancel := c.WithTimeout(noDeadline{ctx}, d)
	return realDeadline{expiry, real}, cancel
}

// noDeadline is a context that reports no deadline; everything else is its
// parent's. *clock.Mock starts no timer for a parent whose deadline (real
// time) looks sooner than its own (the mock's).
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// realDeadline is a context that expires as its parent does but reports a
// deadline of its own, in real time.
type realDeadline struct {
	context.Context
	deadline time.Time
}

func (c realDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// Err reads the parent's error only once its Done channel is closed. A
// clock's context may set its error from a timer goroutine and read it in
// Err without a lock (*clock.Mock's does); the close of Done orders that
// write before this read, so a call polling ctx.Err() is race-free.
func (c realDeadline) Err() error {
	select {
	case <-c.Context.Done():
		return c.Context.Err()
	default:
		return nil
	}
}
