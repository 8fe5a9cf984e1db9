// Package timebase turns a clock's readings into the int64 nanosecond
// offsets a breaker works in: offsets that never go backwards, whatever
// the clock does, and that convert back to the times the breaker reports.
//
// A Base is safe for concurrent use; Now never blocks and allocates only
// when the clock steps back or jumps too far.
package timebase

import (
	"math"
	"sync/atomic"
	"time"
)

// Clock is a source of time: anything with a Now method, as
// *clock.Mock from github.com/benbjohnson/clock is.
type Clock interface {
	Now() time.Time
}

// processStart anchors the real clock. time.Since on a Time that carries a
// monotonic reading costs one monotonic clock read and is immune to
// wall-clock steps.
var processStart = time.Now()

// Base converts between a Clock and offsets in nanoseconds relative to a
// base instant, so they stay small and differences never overflow in
// practice. Copies of a Base share its time.
type Base struct {
	clock Clock     // nil means the real monotonic clock
	base  time.Time // for the real clock, the instant offset 0 stands for
	user  *userTime // for a Clock; nil for the real clock
}

// New returns the time base of c; a nil c is the real clock, which never
// steps back.
func New(c Clock) Base {
	if c == nil {
		return Base{base: processStart}
	}
	return Base{clock: c, user: newUserTime(c)}
}

// Clock returns the clock the base reads, nil for the real clock.
func (tb *Base) Clock() Clock { return tb.clock }

// Now returns the current offset in nanoseconds. Offsets never decrease.
func (tb *Base) Now() int64 {
	if tb.user == nil {
		// The monotonic clock cannot step back: no bookkeeping here.
		return int64(time.Since(tb.base))
	}
	return tb.user.now()
}

// Time converts an offset to the time.Time it stands for: the clock's
// first reading plus the offset.
func (tb *Base) Time(off int64) time.Time {
	if tb.user == nil {
		return tb.base.Add(time.Duration(off))
	}
	return tb.user.origin.Load().base.Add(time.Duration(off))
}

// Offset converts an instant read from the clock (not from the base)
// to the offset it stands for now: for a clock that stepped back, the
// offset of that reading had it been taken after the step. It saturates
// rather than overflows.
func (tb *Base) Offset(t time.Time) int64 {
	if tb.user == nil {
		return int64(t.Sub(tb.base))
	}
	o := tb.user.origin.Load()
	return AddSat(o.off, int64(t.Sub(o.at)))
}

// maxReach is how far from the current origin a reading may be before it
// is taken as a pause rather than as time that passed. time.Time.Sub
// saturates at about 292 years; half of that leaves room for the offsets
// built on a reading (deadlines, window ends) without overflow.
const maxReach = 1 << 62

// userTime turns the readings of a Clock into offsets that never go
// backwards. Every copy of a Base made by one New shares it, so that all
// the breakers built on it keep one time.
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
	// back too would move the time ahead of the clock's by a little on
	// every such race, under load by a lot.
	o := u.origin.Load()
	seen := u.latest.Load()
	r := u.clock.Now()
	d := int64(r.Sub(o.at))
	t := AddSat(o.off, d)
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

// AddSat is a+b, saturated at the int64 limits.
func AddSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// FloorDiv is a/b rounded toward negative infinity (b > 0): the index of
// the bucket of width b that holds offset a, for offsets before 0 too.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// FloorMod is a modulo b in [0, b) (b > 0): the slot of bucket a in a ring
// of b slots, for negative indices too.
func FloorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
