package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// ScenarioError reports every problem found in a scenario document or
// value, each naming its field by its path in the document
// ("tiers[1].calls[0].timeout"). Nothing is run with a scenario that
// produced a ScenarioError.
type ScenarioError struct {
	Problems []breaker.FieldError
}

// maxListed is how many problems the message of a ScenarioError lists,
// and how many names a problem quotes: a document can have any number of
// them, and a message that grows with the document has no place in a log
// line.
const maxListed = 20

func (e *ScenarioError) Error() string {
	var sb strings.Builder
	sb.WriteString("replay: invalid scenario: ")
	for i, p := range e.Problems {
		if i == maxListed {
			fmt.Fprintf(&sb, "; and %d more problems", len(e.Problems)-i)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p.Error())
	}
	return sb.String()
}

// problems gathers the problems of one document, so that a user fixing a
// scenario sees all of them at once rather than one per attempt.
type problems struct{ list []breaker.FieldError }

func (p *problems) add(field, format string, args ...any) {
	if field == "" {
		field = "(document)"
	}
	p.list = append(p.list, breaker.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ScenarioError{Problems: p.list}
}

// object is one JSON object of the document being decoded. Its fields are
// taken one by one by name; whatever is left over is an unknown field.
// encoding/json's DisallowUnknownFields was the alternative, but its error
// names neither the path of the field nor any other problem in the document.
type object struct {
	p      *problems
	path   string
	fields map[string]json.RawMessage
}

// newObject decodes raw as an object at path. ok is false, and a problem
// recorded, if raw is not a JSON object.
func newObject(p *problems, path string, raw []byte) (object, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.add(path, "want a JSON object, got %s", describe(raw, err))
		return object{}, false
	}
	return object{p: p, path: path, fields: m}, true
}

func (o object) field(name string) string {
	if o.path == "" {
		return name
	}
	return o.path + "." + name
}

// take removes field name and returns its raw value, or nil if absent.
// An explicit null counts as absent, as it would in encoding/json.
func (o object) take(name string) json.RawMessage {
	raw, ok := o.fields[name]
	if !ok {
		return nil
	}
	delete(o.fields, name)
	if isNull(raw) {
		return nil
	}
	return raw
}

// has reports whether field name is present and not yet taken.
func (o object) has(name string) bool {
	raw, ok := o.fields[name]
	return ok && !isNull(raw)
}

// done reports every field that was not taken, in a stable order.
func (o object) done() {
	names := make([]string, 0, len(o.fields))
	for name := range o.fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		o.p.add(o.field(name), "unknown field")
	}
}

func (o object) str(name string, dst *string) bool { return plain(o, name, dst, "a string") }

func (o object) boolean(name string, dst *bool) bool { return plain(o, name, dst, "true or false") }

// plain decodes a field whose JSON form is its Go form, naming what was
// wanted if it is not.
func plain[T any](o object, name string, dst *T, want string) bool {
	raw := o.take(name)
	if raw == nil {
		return false
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		o.p.add(o.field(name), "want %s, got %s", want, short(raw))
		return false
	}
	return true
}

func (o object) number(name string, dst *float64) bool { return plain(o, name, dst, "a number") }

func (o object) integer(name string, dst *int) bool {
	return o.numeral(name, "an integer", func(n json.Number) bool {
		i, err := n.Int64()
		if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			return false
		}
		*dst = int(i)
		return true
	})
}

func (o object) uint64(name string, dst *uint64) bool {
	return o.numeral(name, "a non-negative integer", func(n json.Number) bool {
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil {
			return false
		}
		*dst = u
		return true
	})
}

// numeral decodes field name as a JSON number kept as written and hands
// it to set, which stores it and reports whether it fits; if it is not a
// number or does not fit, the problem says what was wanted.
func (o object) numeral(name, want string, set func(json.Number) bool) bool {
	raw := o.take(name)
	if raw == nil {
		return false
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) != nil || !set(n) {
		o.p.add(o.field(name), "want %s, got %s", want, short(raw))
		return false
	}
	return true
}

func (o object) duration(name string, dst *time.Duration) bool {
	raw := o.take(name)
	if raw == nil {
		return false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		o.p.add(o.field(name), `want a duration string such as "500ms" or "1m30s", got %s`, short(raw))
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		o.p.add(o.field(name), `want a duration string such as "500ms" or "1m30s", got %q`, s)
		return false
	}
	*dst = d
	return true
}

// array returns the elements of field name, or nil (with a problem) if it
// is not an array.
func (o object) array(name string) ([]json.RawMessage, bool) {
	raw := o.take(name)
	if raw == nil {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		o.p.add(o.field(name), "want a JSON array, got %s", short(raw))
		return nil, false
	}
	return items, true
}

// policy overlays the policy document in field name onto *dst, the way
// [breaker.Policy.UnmarshalJSON] does, and validates the result. Problems
// name the field by its full path.
func (o object) policy(name string, dst *breaker.Policy) bool {
	raw := o.take(name)
	if raw == nil {
		return false
	}
	prefix := o.field(name)
	q := *dst
	if err := q.UnmarshalJSON(raw); err != nil {
		o.policyProblems(prefix, err)
		return false
	}
	if err := q.Validate(); err != nil {
		o.policyProblems(prefix, err)
		return false
	}
	*dst = q
	return true
}

func (o object) policyProblems(prefix string, err error) {
	var pe *breaker.PolicyError
	if !errors.As(err, &pe) {
		o.p.add(prefix, "%v", err)
		return
	}
	for _, fe := range pe.Problems {
		field := prefix
		if fe.Field != "(document)" {
			field = prefix + "." + fe.Field
		}
		o.p.add(field, "%s", fe.Problem)
	}
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// short quotes at most 40 bytes of a raw value for an error message.
func short(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func describe(raw []byte, err error) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "nothing"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included.
		line, col := position(raw, se.Offset-1)
		return fmt.Sprintf("malformed JSON at line %d, column %d: %v", line, col, err)
	}
	return short(raw)
}

// position turns a byte offset into a 1-based line and column, so that a
// syntax error in a hand-written file can be found.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	line, col = 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
