package breaker

import (
	"math"
	"sync/atomic"
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

// processStart anchors the real clock. time.Since on a Time that carries a
// monotonic reading costs one monotonic clock read, about half of time.Now
// on the machines we measured, and is immune to wall-clock steps.
var processStart = time.Now()

// timebase converts between a Clock and the int64 nanosecond offsets the
// breaker works in internally. Offsets are relative to a base instant, so
// they stay small and differences never overflow in practice.
type timebase struct {
	clock Clock     // nil means the real monotonic clock
	base  time.Time // for the real clock, the instant offset 0 stands for
	user  *userTime // for a Clock; nil for the real clock
}

func newTimebase(c Clock) timebase {
	if c == nil {
		return timebase{base: processStart}
	}
	return timebase{clock: c, user: newUserTime(c)}
}

// now returns the current offset in nanoseconds. Offsets never decrease.
func (tb *timebase) now() int64 {
	if tb.user == nil {
		// The monotonic clock cannot step back: no bookkeeping here.
		return int64(time.Since(tb.base))
	}
	return tb.user.now()
}

// time converts an offset to the time.Time it stands for.
func (tb *timebase) time(off int64) time.Time {
	if tb.user == nil {
		return tb.base.Add(time.Duration(off))
	}
	return tb.user.origin.Load().base.Add(time.Duration(off))
}

// offset converts an instant read from the clock (not from the breaker)
// to the offset it stands for now: for a clock that stepped back, the
// offset of that reading had it been taken after the step. It saturates
// rather than overflows.
func (tb *timebase) offset(t time.Time) int64 {
	if tb.user == nil {
		return int64(t.Sub(tb.base))
	}
	o := tb.user.origin.Load()
	return addSat(o.off, int64(t.Sub(o.at)))
}

// maxReach is how far from the current origin a reading may be before it
// is taken as a pause rather than as time that passed. time.Time.Sub
// saturates at about 292 years; half of that leaves room for the offsets
// built on a reading (deadlines, window ends) without overflow.
const maxReach = 1 << 62

// userTime turns the readings of a Clock into offsets that never go
// backwards. A breaker's options hold one, shared by every breaker created
// with them (a Group's breakers all share the group's), so that all of
// them keep one time.
type userTime struct {
	clock  Clock
	origin atomic.Pointer[origin]
	latest atomic.Int64 // the latest offset handed out
}

// origin maps the clock's readings to offsets: reading r stands for offset
// off + r.Sub(at). It is replaced, never changed, when the clock steps
// back or jumps too far; the only allocation here, and a rare one.
type origin struct {
	at   time.Time
	off  int64
	base time.Time // the instant offset 0 stands for in reported times
}

func newUserTime(c Clock) *userTime {
	u := &userTime{clock: c}
	t := c.Now()
	u.origin.Store(&origin{at: t, base: t})
	return u
}

func (u *userTime) now() int64 {
	// The origin and the latest offset are loaded before the clock is
	// read. A reading that falls behind an offset published before it was
	// taken can only come from a clock that stepped back. One that falls
	// behind an offset published while it was being taken is merely
	// late, overtaken by another goroutine's reading, and is raised to the
	// latest offset without touching the origin. Taking those for steps
	// back too would move the breaker's time ahead of the clock's by a
	// little on every such race, under load by a lot.
	o := u.origin.Load()
	seen := u.latest.Load()
	r := u.clock.Now()
	d := int64(r.Sub(o.at))
	t := addSat(o.off, d)
	if d > maxReach || d < -maxReach || t < seen {
		// A step back, or a reading too far off to be a duration: r now
		// stands for seen, a pause of zero length. A jump too far off
		// also moves the base of reported times, so that they follow the
		// clock again. Losing the CAS means another goroutine moved the
		// origin for this same step; either origin will do.
		n := &origin{at: r, off: seen, base: o.base}
		if d > maxReach || d < -maxReach {
			n.base = r.Add(-time.Duration(seen))
		}
		u.origin.CompareAndSwap(o, n)
		t = seen
	}
	for {
		l := u.latest.Load()
		if t <= l {
			return l
		}
		if u.latest.CompareAndSwap(l, t) {
			return t
		}
	}
}

// addSat is a+b, saturated at the int64 limits.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
