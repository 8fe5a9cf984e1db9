package breaker

import (
	"context"
	"time"
)

// Clock is the breaker's source of time. Every time-dependent decision
// (which bucket a call lands in, whether a cooldown has ended, whether a
// target is still warming up) reads it, so a test can drive a breaker through
// all its states without sleeping.
//
// *clock.Mock from github.com/benbjohnson/clock satisfies Clock directly, as
// does any type with a Now method. A Clock that also has a WithTimeout
// method, as *clock.Mock does, times Policy.CallTimeout: the call's context
// expires when that clock's timer fires, but its Deadline reads in real
// time, since real I/O (grpc-go, net/http) compares it with the real clock.
//
// The breaker's own time never goes backwards. It follows the clock's
// readings at the clock's rate, but a reading earlier than one the breaker
// has already seen (a clock that stepped back, such as a wall clock without
// a monotonic reading being set, or a mock set to an earlier time) is taken
// as a pause of zero length: the breaker's time stays where it was, and
// later readings carry on from there. So a step back neither freezes the
// window nor stretches a cooldown past its length. A reading more than
// about 146 years from the previous ones (a clock that read the zero time
// before it was set) is taken as a pause too. Every duration (buckets,
// window, cooldowns, warmup, call durations) is measured on the breaker's
// time, and the times it reports (Event.Time, OpenError.Since and Until,
// OpenSince) are the clock's first reading plus the breaker's time since
// then: the clock's own readings for as long as it has not stepped back.
//
// A nil Clock is the real clock, which never steps back; the breaker reads
// it through the monotonic clock at the cost of one time.Since.
type Clock interface {
	Now() time.Time
}

// timeoutClock is a clock that can make a context expire on its own time,
// as *clock.Mock from github.com/benbjohnson/clock does.
type timeoutClock interface {
	WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc)
}

// withClockTimeout is context.WithTimeout on a clock that makes its own
// timeouts. The context expires when the clock's timer fires, so a test
// that advances a mock decides when a call times out; its Deadline is in
// real time, the earlier of ctx's deadline and time.Now()+d, because a
// deadline leaves the process (grpc-go sends it, net/http sets socket
// deadlines from it). The clock sees a parent without a deadline (see
// noDeadline); ctx's deadline and cancellation still end the context,
// through the parent's Done.
func withClockTimeout(c timeoutClock, ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
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
