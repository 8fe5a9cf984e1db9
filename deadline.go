package breaker

import (
	"context"
	"time"
)

// timeoutClock is a Clock that can make a context expire on its own time,
// as *clock.Mock does.
type timeoutClock interface {
	WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc)
}

// withClockTimeout is context.WithTimeout for a call on a breaker whose
// clock makes its own timeouts (a mock clock, usually). The context expires
// when the clock's timer fires, so a test that advances the mock decides
// when a call times out; but its Deadline is in real time, the earlier of
// the caller's deadline and time.Now()+d.
//
// Deadline must be real because it leaves the process: grpc-go compares it
// with the real clock before sending and sends the rest as grpc-timeout,
// net.Dialer and net/http set socket deadlines from it. A deadline taken
// from a mock that reads 1970 is long past, and such a call failed at once
// with DeadlineExceeded; one from a mock set in the future gave the server
// a timeout of years.
//
// The clock sees a parent without a deadline: *clock.Mock compares the
// parent's deadline (real time) with its own (the mock's) and, when the
// first looks sooner, starts no timer at all. The caller's deadline and
// cancellation still end the call, through the parent's Done.
func withClockTimeout(c timeoutClock, ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	real := time.Now().Add(d)
	if cur, ok := ctx.Deadline(); ok && cur.Before(real) {
		real = cur
	}
	expiry, cancel := c.WithTimeout(noDeadline{ctx}, d)
	return realDeadline{expiry, real}, cancel
}

// noDeadline is a context that reports no deadline; everything else is its
// parent's.
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
