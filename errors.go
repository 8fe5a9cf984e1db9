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
	// Reason is why the breaker is open now: the trip rule, or what
	// reopened it (a failed probe, a probe timeout, a forced open).
	Reason Reason
	// TripReason is what began the outage: the rule that tripped the
	// closed breaker, or ReasonForcedOpen if it was forced open from
	// closed. It stays the same for the whole outage, through failed
	// probes and reopens, until the breaker closes.
	TripReason Reason
	// Snapshot is the window at the moment the breaker tripped, and like
	// TripReason stays for the whole outage.
	Snapshot Snapshot
	// Since is when the breaker opened.
	Since time.Time
	// Until is when the breaker will admit probes. It is zero in the
	// half-open state, where probes are in flight and the breaker may close
	// at any moment, and for a breaker forced open.
	Until time.Time
	// Cooldown is the length of the cooldown that ends at Until, jitter
	// included; zero when Until is.
	Cooldown time.Duration

	b *Breaker // the breaker that refused: its clock, and where FallbackResult counts
}

// RetryAfter is how long from now until the breaker admits probes: zero if
// that time has passed or is not known (half-open, forced open).
func (e *OpenError) RetryAfter() time.Duration {
	if e.Until.IsZero() || e.b == nil {
		return 0
	}
	tb := &e.b.opt.tb
	return max(0, e.Until.Sub(tb.Time(tb.Now())))
}

func (e *OpenError) Error() string {
	// The cause of the outage leads, with the window that tripped it; a
	// later reason (a failed probe) follows it, never mixed with it.
	cause := e.TripReason
	if cause == "" {
		cause = e.Reason
	}
	s := "breaker: " + e.Name + " is " + e.State.String() + " (" + string(cause)
	if e.Snapshot.Counted > 0 {
		s += ", " + strconv.FormatUint(e.Snapshot.Failures, 10) + "/" +
			strconv.FormatUint(e.Snapshot.Counted, 10) + " failed, " +
			strconv.FormatUint(e.Snapshot.Timeouts, 10) + " timeouts"
	}
	if e.Reason != cause {
		s += "; then " + string(e.Reason)
	}
	if d := e.RetryAfter(); d > 0 {
		s += ", retry in " + d.Round(time.Millisecond).String()
	}
	return s + ")"
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }
