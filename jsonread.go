package breaker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The strict JSON reading that policy and group documents share: objects
// read member by member, numbers and durations checked by field, and the
// problems quoted in bounded form.

// members reads data as one JSON object and returns its members by name,
// or nil if data is not one JSON object. where names the object in
// problems, want says what it should be, and path names a member.
//
// It reads the object token by token rather than with json.Unmarshal into
// a map, because Unmarshal keeps the last of two members with the same
// name: a document that sets a field twice would say two things and be
// read as the second. Here a name that appears twice is a problem at its
// path, and the name is left out of the result so that neither value is
// decoded. Only the object's own members are read this way; each value is
// taken whole (encoding/json bounds its nesting depth) for the caller to
// decode, with members again if it is an object in its turn. Data after
// the object is a problem too.
func members(v *validator, data []byte, where, want string, path func(name string) string) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a huge number is "not an object", not a float overflow
	// in names the member whose value was being read, if any.
	syntax := func(err error, in string) map[string]json.RawMessage {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			v.add(where, "%s", endsEarly(data, in))
		} else {
			v.add(where, "want %s: %s", want, syntaxProblem(data, err))
		}
		return nil
	}
	tok, err := dec.Token()
	if err == io.EOF {
		v.add(where, "want %s, got an empty document", want)
		return nil
	}
	if err != nil {
		return syntax(err, "")
	}
	if tok != json.Delim('{') {
		v.add(where, "want %s, got %s", want, short(data))
		return nil
	}
	m := make(map[string]json.RawMessage)
	var dup map[string]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err, "")
		}
		name, ok := tok.(string)
		if !ok { // Token only returns strings in a key's place; be sure
			return syntax(fmt.Errorf("want a member name, got %v", tok), "")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntax(err, path(name))
		}
		if _, seen := m[name]; !seen {
			m[name] = raw
			continue
		}
		if !dup[name] {
			if dup == nil {
				dup = make(map[string]bool)
			}
			dup[name] = true
			v.add(path(name), "duplicate key")
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return syntax(err, "")
	}
	// JSON's whitespace only: bytes.TrimSpace would let \v or U+00A0
	// through, which no JSON parser accepts.
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		at := int64(len(data) - len(rest))
		v.add(where, "want %s and nothing after it, got more at byte %d: %s", want, at, quoteKey(string(rest)))
		return nil
	}
	for name := range dup {
		delete(m, name)
	}
	return m
}

// syntaxProblem describes a JSON syntax error in data without quoting
// the input.
func syntaxProblem(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the bad one included.
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10) + position(data, se.Offset-1)
	}
	return err.Error()
}

// endsEarly describes a document cut short: where its last byte is, and
// in names the member whose value was being read, if any. It never says
// what the document should hold, as a cut document may well hold it.
func endsEarly(data []byte, in string) string {
	end := int64(len(bytes.TrimRight(data, " \t\r\n")))
	msg := "the document ends early at byte " + strconv.FormatInt(end, 10) + position(data, end)
	if in != "" {
		msg += ", in the value of " + in
	}
	return msg
}

// position writes where byte i of data is, as " (line L, column C)",
// both counted from 1; i may be len(data), just after its last byte.
func position(data []byte, i int64) string {
	i = max(0, min(i, int64(len(data))))
	line := 1 + bytes.Count(data[:i], []byte{'\n'})
	col := i - int64(bytes.LastIndexByte(data[:i], '\n'))
	return " (line " + strconv.Itoa(line) + ", column " + strconv.FormatInt(col, 10) + ")"
}

func decodeDuration(v *validator, field string, raw json.RawMessage, dst *time.Duration) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || isNull(raw) {
		v.add(field, `want a duration string such as "5s" or "1m30s", got %s`, short(raw))
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.add(field, `want a duration string such as "5s" or "1m30s", got %s`, short(raw))
		return
	}
	*dst = d
}

func decodeInt(v *validator, field string, raw json.RawMessage, dst *int) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// A json.Number also accepts a quoted number; a policy field does not.
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' || dec.Decode(&n) != nil || isNull(raw) {
		v.add(field, "want an integer, got %s", short(raw))
		return
	}
	i, err := n.Int64()
	if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
		v.add(field, "want an integer, got %s", short(raw))
		return
	}
	*dst = int(i)
}

func decodeFloat(v *validator, field string, raw json.RawMessage, dst *float64) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || isNull(raw) {
		v.add(field, "want a number, got %s", short(raw))
		return
	}
	*dst = f
}

func decodeBool(v *validator, field string, raw json.RawMessage, dst *bool) {
	if err := json.Unmarshal(raw, dst); err != nil || isNull(raw) {
		v.add(field, "want true or false, got %s", short(raw))
	}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// maxQuote is how many bytes of a bad value, or of a key, a problem
// quotes. An error ends up in a log line or an HTTP answer, so it must stay
// short whatever the document holds (a 10 MB duration string, say).
const maxQuote = 64

// short quotes a raw JSON value for a problem: whole if it is short, else
// its first maxQuote bytes and its length.
func short(raw []byte) string {
	s := bytes.TrimSpace(raw)
	if len(s) <= maxQuote {
		return string(s)
	}
	return string(s[:cut(s)]) + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// cut returns where to cut s to keep at most maxQuote bytes without
// splitting a UTF-8 sequence.
func cut[S string | []byte](s S) int {
	n := maxQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// quoteKey quotes a key of a document (a field name, an override key) for
// a path: as a Go string literal, cut to maxQuote bytes with its length if
// it is longer.
func quoteKey(key string) string {
	if len(key) <= maxQuote {
		return strconv.Quote(key)
	}
	return strconv.Quote(key[:cut(key)]) + "…(" + strconv.Itoa(len(key)) + " bytes)"
}

// fieldName is a member name as it appears in a path: as it is when it is
// a plain name (letters, digits, '_', '-', '.') short enough to quote, and
// quoted otherwise, so that a name holding a newline or 10 MB of text
// cannot forge or flood an error message.
func fieldName(name string) string {
	if len(name) == 0 || len(name) > maxQuote {
		return quoteKey(name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return quoteKey(name)
		}
	}
	return name
}
