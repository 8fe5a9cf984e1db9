package calltrace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/govkit/breaker"
)

// A Decoder reads a trace one record at a time.
type Decoder struct {
	sc   *bufio.Scanner
	line int
	keys map[string]string // interned keys: a trace repeats a few keys millions of times

	transitions []Transition
	origin      time.Time
	hasOrigin   bool
}

// Transitions returns the breakers' transitions read so far, in the
// order of the trace. Next returns calls only; a trace written by a
// Recorder that watches its breakers (Recorder.Watch,
// Recorder.RecordTransition) holds their transitions too.
func (d *Decoder) Transitions() []Transition { return d.transitions }

// Origin returns the instant the recorded breakers' time starts from, on
// which their windows' buckets are aligned, if the trace has read it (a
// Recorder writes it first, when it knows it: see Options.Origin).
func (d *Decoder) Origin() (time.Time, bool) { return d.origin, d.hasOrigin }

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	// Room for the line's end ("\r\n") as well: a line of MaxLine bytes
	// is read whatever ends it.
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine+2)
	return &Decoder{sc: sc, keys: map[string]string{}}
}

// Line returns the number of the line the last record came from.
func (d *Decoder) Line() int { return d.line }

// Next returns the next record, skipping blank lines, or io.EOF at the end
// of the trace. A line that cannot be read is a *[LineError].
func (d *Decoder) Next() (Record, error) {
	for d.sc.Scan() {
		d.line++
		if len(d.sc.Bytes()) > MaxLine {
			return Record{}, &LineError{Line: d.line, Problem: fmt.Sprintf("longer than %d bytes", MaxLine)}
		}
		b := trimSpace(d.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		r, err := parseLine(b, d.line, d.keys)
		if err != nil {
			return Record{}, err
		}
		switch r.kind {
		case kindTransition:
			d.transitions = append(d.transitions, r.tr)
			continue
		case kindOrigin:
			if d.hasOrigin && !d.origin.Equal(r.Time) {
				return Record{}, &LineError{Line: d.line, Field: "origin", Problem: fmt.Sprintf("a second origin, %d, where an earlier line gave %d", r.Time.UnixMicro(), d.origin.UnixMicro())}
			}
			d.origin, d.hasOrigin = r.Time, true
			continue
		}
		return r, nil
	}
	if err := d.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Record{}, &LineError{Line: d.line + 1, Problem: fmt.Sprintf("longer than %d bytes", MaxLine)}
		}
		return Record{}, err
	}
	return Record{}, io.EOF
}

// maxInterned bounds the keys a Decoder keeps, for a trace whose keys
// never repeat.
const maxInterned = 1 << 16

// MaxTime is the latest call time a trace holds, in Unix microseconds
// (2^52, in the year 2112): a call's start and end in nanoseconds then fit
// in an int64, whatever its duration.
const MaxTime = 1 << 52

// maxDuration is the longest call a trace holds (2^62 ns, 146 years).
const maxDuration = time.Duration(1 << 62)

// Field names, and bits marking which a line has.
const (
	hasT = 1 << iota
	hasK
	hasD
	hasO
	hasProbe
	hasRefused
	hasTo
	hasCooldown
	hasDoublings
	hasOrigin
	hasThrottled
)

// parseLine reads one line. The format is flat and fixed, so a small
// scanner does what encoding/json would at a tenth of the cost: a one-hour
// trace of a busy service has millions of lines.
func parseLine(b []byte, line int, keys map[string]string) (Record, error) {
	var r Record
	p := parser{b: b}
	bad := func(field, format string, args ...any) (Record, error) {
		return Record{}, &LineError{Line: line, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !p.eat('{') {
		return bad("", "want a JSON object, got %s", quoteShort(b))
	}
	seen := 0
	var micros, dur, cooldown, doublings int64
	var origin bool
	p.space()
	empty := p.eat('}')
	for !empty {
		p.space()
		name, ok := p.str()
		if !ok {
			return bad("", "want a field name at column %d", p.i+1)
		}
		p.space()
		if !p.eat(':') {
			return bad(string(name), "want ':' after the field name")
		}
		p.space()
		var bit int
		switch string(name) {
		case "t":
			bit = hasT
			v, ok := p.int()
			switch {
			case !ok:
				return bad("t", "want a non-negative integer (Unix microseconds), got %s", p.rest())
			case v < 0:
				return bad("t", "must not be negative (Unix microseconds, from 1970), got %d", v)
			case v > MaxTime:
				return bad("t", "must be at most %d (Unix microseconds, the year 2112), got %d", MaxTime, v)
			}
			micros = v
		case "k":
			bit = hasK
			s, ok := p.str()
			if !ok {
				return bad("k", "want a string, got %s", p.rest())
			}
			if len(s) == 0 {
				return bad("k", "must not be empty")
			}
			k, ok := keys[string(s)]
			if !ok && len(keys) < maxInterned {
				k = string(s)
				keys[k] = k
			} else if !ok {
				k = string(s)
			}
			r.Key = k
		case "d":
			bit = hasD
			v, ok := p.int()
			switch {
			case !ok:
				return bad("d", "want a non-negative integer (microseconds), got %s", p.rest())
			case v < 0:
				return bad("d", "must not be negative (microseconds), got %d", v)
			case v > maxDuration.Microseconds():
				return bad("d", "must be at most %d (microseconds, 146 years), got %d", maxDuration.Microseconds(), v)
			}
			dur = v
		case "o":
			bit = hasO
			s, ok := p.str()
			if !ok {
				return bad("o", "want a string, got %s", p.rest())
			}
			if r.Outcome, ok = parseOutcome(s); !ok {
				return bad("o", `want "success", "failure", "timeout" or "ignored", got %q`, s)
			}
		case "probe":
			bit = hasProbe
			if r.Probe, ok = p.boolean(); !ok {
				return bad("probe", "want true or false, got %s", p.rest())
			}
		case "refused":
			bit = hasRefused
			if r.Refused, ok = p.boolean(); !ok {
				return bad("refused", "want true or false, got %s", p.rest())
			}
		case "throttled":
			bit = hasThrottled
			if r.Throttled, ok = p.boolean(); !ok {
				return bad("throttled", "want true or false, got %s", p.rest())
			}
		case "to":
			bit = hasTo
			s, ok := p.str()
			if !ok {
				return bad("to", "want a string, got %s", p.rest())
			}
			if r.tr.To, ok = parseState(s); !ok {
				return bad("to", `want "closed", "open" or "half_open", got %q`, s)
			}
		case "cooldown":
			bit = hasCooldown
			v, ok := p.int()
			switch {
			case !ok:
				return bad("cooldown", "want a non-negative integer (microseconds), got %s", p.rest())
			case v < 0 || v > maxDuration.Microseconds():
				return bad("cooldown", "must be in [0, %d] (microseconds), got %d", maxDuration.Microseconds(), v)
			}
			cooldown = v
		case "doublings":
			bit = hasDoublings
			v, ok := p.int()
			switch {
			case !ok:
				return bad("doublings", "want a non-negative integer, got %s", p.rest())
			case v < 0 || v > maxDoublings:
				return bad("doublings", "must be in [0, %d], got %d", maxDoublings, v)
			}
			doublings = v
		case "origin":
			bit = hasOrigin
			if origin, ok = p.boolean(); !ok || !origin {
				return bad("origin", "want true, got %s", p.rest())
			}
		default:
			return bad(string(name), "unknown field")
		}
		if seen&bit != 0 {
			return bad(string(name), "appears twice")
		}
		seen |= bit
		p.space()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			break
		}
		return bad("", "want ',' or '}' at column %d, got %s", p.i+1, p.rest())
	}
	if p.space(); p.i != len(b) {
		return bad("", "unexpected text after the object at column %d", p.i+1)
	}
	const callFields = hasD | hasO | hasProbe | hasRefused | hasThrottled
	switch {
	case seen&hasT == 0:
		return bad("t", "required")
	case origin:
		if extra := seen &^ (hasT | hasOrigin); extra != 0 {
			return bad(fieldName(extra), "an origin line has \"t\" only")
		}
		r.kind = kindOrigin
		r.Time = time.UnixMicro(micros).UTC()
		return r, nil
	case seen&hasK == 0:
		return bad("k", "required")
	case seen&hasTo != 0:
		if extra := seen & callFields; extra != 0 {
			return bad(fieldName(extra), "a transition is not a call")
		}
		if r.tr.To != breaker.Open && seen&(hasCooldown|hasDoublings) != 0 {
			return bad(fieldName(seen&(hasCooldown|hasDoublings)), "only a transition to open has a cooldown")
		}
		r.kind = kindTransition
		r.tr.Time = time.UnixMicro(micros).UTC()
		r.tr.Key = r.Key
		r.tr.Cooldown = time.Duration(cooldown) * time.Microsecond
		r.tr.Doublings = int(doublings)
		r.Key = ""
		return r, nil
	case seen&(hasCooldown|hasDoublings) != 0:
		return bad(fieldName(seen&(hasCooldown|hasDoublings)), "a call has no cooldown; a transition has \"to\"")
	case r.Refused && seen&hasO != 0:
		return bad("o", "a refused call has no outcome")
	case r.Refused && seen&hasD != 0 && dur != 0:
		return bad("d", "a refused call has no duration")
	case r.Refused && r.Probe:
		return bad("probe", "a refused call is not a probe")
	case r.Throttled && !r.Refused:
		return bad("throttled", `a throttled call is refused: give "refused": true`)
	case !r.Refused && seen&hasD == 0:
		return bad("d", "required unless refused")
	case !r.Refused && seen&hasO == 0:
		return bad("o", "required unless refused")
	}
	r.Time = time.UnixMicro(micros).UTC()
	r.Duration = time.Duration(dur) * time.Microsecond
	return r, nil
}

// fieldName names the first field of bits, for an error.
func fieldName(bits int) string {
	for i, name := range []string{"t", "k", "d", "o", "probe", "refused", "to", "cooldown", "doublings", "origin", "throttled"} {
		if bits&(1<<i) != 0 {
			return name
		}
	}
	return ""
}

func parseState(s []byte) (breaker.State, bool) {
	switch string(s) {
	case "closed":
		return breaker.Closed, true
	case "open":
		return breaker.Open, true
	case "half_open":
		return breaker.HalfOpen, true
	}
	return 0, false
}

type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a JSON string. Strings without escapes, nearly all of them,
// are returned in place; the rest go through encoding/json. On failure the
// cursor is back on the opening quote, for the error message.
func (p *parser) str() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	escaped := false
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '\\':
			if p.i+1 == len(p.b) {
				// The line ends inside an escape: no string.
				p.i = start - 1
				return nil, false
			}
			escaped = true
			p.i += 2
			continue
		case c == '"':
			raw := p.b[start:p.i]
			p.i++
			if !escaped {
				if !utf8.Valid(raw) {
					p.i = start - 1
					return nil, false
				}
				return raw, true
			}
			var s string
			if err := json.Unmarshal(p.b[start-1:p.i], &s); err != nil {
				p.i = start - 1
				return nil, false
			}
			return []byte(s), true
		case c < 0x20:
			p.i = start - 1
			return nil, false
		}
		p.i++
	}
	p.i = start - 1
	return nil, false
}

func (p *parser) int() (int64, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		p.i = start
		return 0, false
	}
	return v, true
}

func (p *parser) boolean() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// rest quotes what follows the cursor, for an error message.
func (p *parser) rest() string {
	r := p.b[min(p.i, len(p.b)):]
	for i, c := range r {
		if c == ',' || c == '}' {
			r = r[:i]
			break
		}
	}
	if len(r) == 0 {
		return "nothing"
	}
	return quoteShort(r)
}

func quoteShort(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40]) + "...")
	}
	return strconv.Quote(string(b))
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
