package calltrace

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/govkit/breaker"
)

// Record is one call as a trace holds it.
type Record struct {
	// Time is when the call was made; a trace keeps microseconds, from
	// the Unix epoch to MaxTime.
	Time time.Time
	// Key is the breaker's key in its group, or its name; not empty.
	Key string
	// Duration is how long the call took; zero for a refused call. A
	// trace keeps microseconds, from 0 to 2^62 ns (146 years).
	Duration time.Duration
	// Outcome is what the breaker counted; meaningless for a refused call.
	// A value outside the four outcomes is a Failure, as the breaker
	// counts it.
	Outcome breaker.Outcome
	// Probe is true for a half-open probe.
	Probe bool
	// Refused is true if the breaker refused the call.
	Refused bool
	// Throttled is true, with Refused, if the refusal was the throttle's
	// (Policy.Throttle): the breaker was closed and refused the call at
	// random (an *breaker.OpenError with State Closed and Reason
	// breaker.ReasonThrottled; see IsThrottled), rather than open.
	Throttled bool

	// kind marks a record that is not a call: a transition (tr) or the
	// breakers' time origin, written by the Recorder.
	kind recordKind
	tr   Transition
}

type recordKind uint8

const (
	kindCall recordKind = iota
	kindTransition
	kindOrigin
)

// A Transition is a state change of a recorded breaker, as a trace holds
// it: what a replay needs to reproduce the recorded breaker's refusals.
// The cooldown jitter is drawn at random by the breaker, and an opening
// records the cooldown it drew.
type Transition struct {
	// Time is when the breaker moved, on its own clock; Key is its key.
	Time time.Time
	Key  string
	// To is the state it moved to.
	To breaker.State
	// Cooldown is how long it stays open, for a move to Open (a trace
	// keeps microseconds); Doublings how many times in a row the cooldown
	// has doubled (breaker.Event.Doublings).
	Cooldown  time.Duration
	Doublings int
}

// AppendJSON appends r's line, without the newline, to dst. The line is
// one a [Decoder] reads whatever r holds, but for an empty Key or a line
// longer than MaxLine: a Time before the Unix epoch or after MaxTime is
// written as the nearer of the two, a Duration below 0 or above the
// format's bound likewise, and an Outcome outside the four as "failure".
func (r Record) AppendJSON(dst []byte) []byte {
	switch r.kind {
	case kindTransition:
		return r.tr.appendJSON(dst)
	case kindOrigin:
		dst = append(dst, `{"t":`...)
		dst = strconv.AppendInt(dst, unixMicro(r.Time), 10)
		return append(dst, `,"origin":true}`...)
	}
	dst = append(dst, `{"t":`...)
	dst = strconv.AppendInt(dst, unixMicro(r.Time), 10)
	dst = append(dst, `,"k":`...)
	dst = appendString(dst, r.Key)
	if r.Refused {
		if r.Throttled {
			return append(dst, `,"refused":true,"throttled":true}`...)
		}
		return append(dst, `,"refused":true}`...)
	}
	dst = append(dst, `,"d":`...)
	dst = strconv.AppendInt(dst, min(max(r.Duration, 0), maxDuration).Microseconds(), 10)
	dst = append(dst, `,"o":"`...)
	o := r.Outcome
	if o > breaker.Timeout {
		o = breaker.Failure
	}
	dst = append(dst, o.String()...)
	dst = append(dst, '"')
	if r.Probe {
		dst = append(dst, `,"probe":true`...)
	}
	return append(dst, '}')
}

// IsThrottled reports whether err, the error of a call a breaker refused,
// is the throttle's refusal: an *breaker.OpenError with State Closed and
// Reason breaker.ReasonThrottled. A recorder sets Record.Throttled with
// it.
func IsThrottled(err error) bool {
	var oe *breaker.OpenError
	return errors.As(err, &oe) && oe.State == breaker.Closed && oe.Reason == breaker.ReasonThrottled
}

// appendJSON appends the transition's line:
// {"t":...,"k":...,"to":"open","cooldown":...,"doublings":...}, the last two
// for a move to Open only.
func (tr Transition) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"t":`...)
	dst = strconv.AppendInt(dst, unixMicro(tr.Time), 10)
	dst = append(dst, `,"k":`...)
	dst = appendString(dst, tr.Key)
	dst = append(dst, `,"to":"`...)
	dst = append(dst, tr.To.String()...)
	dst = append(dst, '"')
	if tr.To == breaker.Open {
		dst = append(dst, `,"cooldown":`...)
		dst = strconv.AppendInt(dst, min(max(tr.Cooldown, 0), maxDuration).Microseconds(), 10)
		dst = append(dst, `,"doublings":`...)
		dst = strconv.AppendInt(dst, int64(min(max(tr.Doublings, 0), maxDoublings)), 10)
	}
	return append(dst, '}')
}

// maxDoublings bounds the doublings a trace holds, as the breaker does.
const maxDoublings = 62

// unixMicro is t in Unix microseconds, within [0, MaxTime]. The bounds are
// compared as instants: UnixMicro itself overflows for a time beyond
// ±292,000 years.
func unixMicro(t time.Time) int64 {
	switch {
	case t.Before(epoch):
		return 0
	case t.After(latest):
		return MaxTime
	}
	return t.UnixMicro()
}

var (
	epoch  = time.Unix(0, 0)
	latest = time.UnixMicro(MaxTime)
)

// appendString appends s as a JSON string. strconv.Quote is not one: it
// writes Go escapes (\a, \x00, \U0001F600) that JSON readers refuse. Bytes
// that are not UTF-8 become U+FFFD, as encoding/json writes them.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// A LineError is a line of a trace that cannot be read: its number
// (from 1), the field at fault ("" for the line as a whole) and what is
// wrong.
type LineError struct {
	Line    int
	Field   string
	Problem string
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("trace: line %d: %s", e.Line, e.Problem)
	}
	return fmt.Sprintf("trace: line %d: field %q: %s", e.Line, e.Field, e.Problem)
}

// MaxLine is the longest line a Decoder reads, and a Recorder writes,
// without the line's end.
const MaxLine = 64 << 10

func parseOutcome(s []byte) (breaker.Outcome, bool) {
	switch string(s) {
	case "success":
		return breaker.Success, true
	case "failure":
		return breaker.Failure, true
	case "timeout":
		return breaker.Timeout, true
	case "ignored":
		return breaker.Ignored, true
	}
	return 0, false
}
