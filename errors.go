package breaker

import (
	"errors"
	"strconv"
	"time"
)

// ErrOpen is returned, wrapped in an *[OpenError], for every call the
// breaker refuses without calling the function: while it is open, and in
// half-open for calls beyond the probes. Test for it with errors.Is.
var ErrOpen = errors.New("breaker: open")

// errNilFunc and errNilContext are returned, with nothing counted, for a
// nil function or context. They are programming errors, not conditions a
// caller branches on, so they are not exported: the message names what is
// wrong, and the library does not panic on input it can refuse.
var (
	errNilFunc    = errors.New("breaker: nil function")
	errNilContext = errors.New("breaker: nil context")
)

// OpenError is the error of a refused call. errors.Is(err, ErrOpen) holds
// for it. It says which breaker refused, why it opened, what its window
// held when it tripped, and when it will let a call through again, so that
// an HTTP handler can answer 503 with a Retry-After header and an alert can
// say what to look at.
//
// One OpenError is shared by every call refused in the same open episode;
// treat it as read-only.
type OpenError struct {
	// Name is the breaker's name, such as "inventory.GetStock".
	Name string
	// State is Open, or HalfOpen when the probes are already in flight.
	State State
	// Reason is why the breaker opened: the trip rule, or what reopened it.
	Reason Reason
	// Snapshot is the window at the moment the breaker tripped.
	Snapshot Snapshot
	// Since is when the breaker opened.
	Since time.Time
	// Until is when the breaker will admit probes. It is zero in the
	// half-open state, where probes are in flight and the breaker may close
	// at any moment, and for a breaker forced open.
	Until time.Time

	b *Breaker // the breaker that refused: its clock, and where Recover counts
}

// RetryAfter is how long from now until the breaker admits probes: zero if
// that time has passed or is not known (half-open, forced open).
func (e *OpenError) RetryAfter() time.Duration {
	if e.Until.IsZero() || e.b == nil {
		return 0
	}
	tb := &e.b.opt.tb
	return max(0, e.Until.Sub(tb.time(tb.now())))
}

func (e *OpenError) Error() string {
	s := "breaker: " + e.Name + " is " + e.State.String() + " (" + string(e.Reason)
	if e.Snapshot.Counted > 0 {
		s += ", " + strconv.FormatUint(e.Snapshot.Failures, 10) + "/" +
			strconv.FormatUint(e.Snapshot.Counted, 10) + " failed, " +
			strconv.FormatUint(e.Snapshot.Timeouts, 10) + " timeouts"
	}
	if d := e.RetryAfter(); d > 0 {
		s += ", retry in " + d.Round(time.Millisecond).String()
	}
	return s + ")"
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }
