package breaker

import "time"

// Clock is the breaker's source of time. Every time-dependent decision
// (which bucket a call lands in, whether a cooldown has ended, whether a
// target is still warming up) reads it, so a test can drive a breaker through
// all its states without sleeping.
//
// *clock.Mock from github.com/benbjohnson/clock satisfies Clock directly, as
// does any type with a Now method. A clock may move backwards; the breaker
// then treats the call as belonging to the newest bucket it has seen rather
// than rewriting history.
type Clock interface {
	Now() time.Time
}

// processStart anchors the real clock. time.Since on a Time that carries a
// monotonic reading costs one monotonic clock read, about half of time.Now
// on the machines we measured, and is immune to wall-clock steps.
var processStart = time.Now()

// timebase converts between a Clock and the int64 nanosecond offsets the
// breaker works in internally. Offsets are relative to base, so they stay
// small and differences never overflow in practice.
type timebase struct {
	clock Clock     // nil means the real monotonic clock
	base  time.Time // instant that offset 0 stands for
}

func newTimebase(c Clock) timebase {
	if c == nil {
		return timebase{base: processStart}
	}
	return timebase{clock: c, base: c.Now()}
}

// now returns the current offset in nanoseconds.
func (tb *timebase) now() int64 {
	if tb.clock == nil {
		return int64(time.Since(tb.base))
	}
	// Sub saturates instead of overflowing, so a wild clock gives a huge
	// offset, never a wrapped one.
	return int64(tb.clock.Now().Sub(tb.base))
}

// time converts an offset back to a time.Time.
func (tb *timebase) time(off int64) time.Time {
	return tb.base.Add(time.Duration(off))
}
