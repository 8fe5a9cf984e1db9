package breaker

import (
	"errors"
	"time"
)

// ErrOpen is matched, through an *[OpenError], by every call the breaker
// refuses without calling the function. Test for it with errors.Is.
var ErrOpen = errors.New("breaker: open")

// errNilFunc and errNilContext are returned, with nothing counted, for a
// nil function or context: programming errors, so not exported.
var (
	errNilFunc    = errors.New("breaker: nil function")
	errNilContext = errors.New("breaker: nil context")
)

// OpenError is the error of a refused call; errors.Is(err, ErrOpen) holds
// for it. It says which breaker refused, why, what tripped it and when it
// will admit probes. One OpenError is shared by every call refused in the
// same episode: treat it as read-only.
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// State is Open, or HalfOpen when the probes are already in flight.
	State State
	// Reason is why it is open now: the trip rule, or what reopened it.
	Reason Reason
	// Trip is the trip that began the outage (see [Outage]), with the
	// evidence of its rule, the same for the whole outage.
	Trip Trip
	// Since is when the outage began.
	Since time.Time
	// Until is when the breaker will admit probes; zero when half-open or
	// forced open. Cooldown is the length, jittered, of that cooldown.
	Until    time.Time
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
	// The cause of the outage leads, with the evidence of its rule; a
	// later reason follows it.
	t := e.Trip
	if t.Reason == "" {
		t.Reason = e.Reason
	}
	s := "breaker: " + e.Name + " is " + e.State.String() + " (" + string(t.Reason) + t.brief()
	if e.Reason != t.Reason {
		s += "; then " + string(e.Reason)
	}
	if d := e.RetryAfter(); d > 0 {
		s += ", retry in " + d.Round(time.Millisecond).String()
	}
	return s + ")"
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }
