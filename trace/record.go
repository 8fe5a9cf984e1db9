package trace

import (
	"fmt"
	"strconv"
	"time"

	"github.com/govkit/breaker"
)

// Record is one call as a trace holds it.
type Record struct {
	// Time is when the call was made; a trace keeps microseconds.
	Time time.Time
	// Key is the breaker's key in its group, or its name.
	Key string
	// Duration is how long the call took; zero for a refused call. A
	// trace keeps microseconds.
	Duration time.Duration
	// Outcome is what the breaker counted; meaningless for a refused call.
	Outcome breaker.Outcome
	// Probe is true for a half-open probe.
	Probe bool
	// Refused is true if the breaker refused the call.
	Refused bool
}

// AppendJSON appends r's line, without the newline, to dst.
func (r Record) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"t":`...)
	dst = strconv.AppendInt(dst, r.Time.UnixMicro(), 10)
	dst = append(dst, `,"k":`...)
	dst = strconv.AppendQuote(dst, r.Key)
	if r.Refused {
		return append(dst, `,"refused":true}`...)
	}
	dst = append(dst, `,"d":`...)
	dst = strconv.AppendInt(dst, r.Duration.Microseconds(), 10)
	dst = append(dst, `,"o":"`...)
	dst = append(dst, r.Outcome.String()...)
	dst = append(dst, '"')
	if r.Probe {
		dst = append(dst, `,"probe":true`...)
	}
	return append(dst, '}')
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

// MaxLine is the longest line a Decoder reads.
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
