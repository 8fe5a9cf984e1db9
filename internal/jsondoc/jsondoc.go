// Package jsondoc reads JSON documents strictly: objects member by member,
// so that a name given twice is a problem rather than the second value;
// numbers, durations and flags checked by field; and problems gathered
// with the path of the member they concern, quoting what they show of the
// document in bounded form, so that an error message can neither be forged
// nor flooded by the document.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Problem is one problem with one member of a document, at its path.
type Problem struct {
	Field   string
	Problem string
}

// Problems gathers the problems of a document, in the order found. The
// zero value is empty and ready to use.
type Problems struct {
	List []Problem
}

// Document is the field of a problem with the document as a whole.
const Document = "(document)"

// Add records a problem at field, its words formatted as by fmt.Sprintf.
// An empty field is [Document].
func (v *Problems) Add(field, format string, args ...any) {
	if field == "" {
		field = Document
	}
	v.List = append(v.List, Problem{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// Listed is how many problems the message of an error lists: a document
// can have any number of them, and a message that grows with the document
// has no place in a log line.
const Listed = 20

// Message is the message of an error that lists problems: head, then the
// text of each problem of list joined by "; ", the first [Listed] of them
// and then how many more there are.
func Message[P any](head string, list []P, text func(P) string) string {
	var sb strings.Builder
	sb.WriteString(head)
	for i, p := range list {
		if i == Listed {
			fmt.Fprintf(&sb, "; and %d more problems", len(list)-i)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(text(p))
	}
	return sb.String()
}

// Members reads data as one JSON object and returns its members by name,
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
// decode, with Members again if it is an object in its turn. Data after
// the object is a problem too.
func Members(v *Problems, data []byte, where, want string, path func(name string) string) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a huge number is "not an object", not a float overflow
	// in names the member whose value was being read, if any.
	syntax := func(err error, in string) map[string]json.RawMessage {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			v.Add(where, "%s", endsEarly(data, in))
		} else {
			v.Add(where, "want %s: %s", want, syntaxProblem(data, err))
		}
		return nil
	}
	tok, err := dec.Token()
	if err == io.EOF {
		v.Add(where, "want %s, got an empty document", want)
		return nil
	}
	if err != nil {
		return syntax(err, "")
	}
	if tok != json.Delim('{') {
		v.Add(where, "want %s, got %s", want, Short(data))
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
			v.Add(path(name), "duplicate key")
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
		v.Add(where, "want %s and nothing after it, got more at byte %d: %s", want, at, QuoteKey(string(rest)))
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

// Duration decodes raw, the value at field, as a duration string such as
// "1m30s" onto dst, or records a problem and leaves dst alone.
func Duration(v *Problems, field string, raw json.RawMessage, dst *time.Duration) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || IsNull(raw) {
		v.Add(field, `want a duration string such as "5s" or "1m30s", got %s`, Short(raw))
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.Add(field, `want a duration string such as "5s" or "1m30s", got %s`, Short(raw))
		return
	}
	*dst = d
}

// Int decodes raw as an integer that fits in 32 bits onto dst, or records
// a problem. A quoted number is a problem.
func Int(v *Problems, field string, raw json.RawMessage, dst *int) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// A json.Number also accepts a quoted number; a field here does not.
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' || dec.Decode(&n) != nil || IsNull(raw) {
		v.Add(field, "want an integer, got %s", Short(raw))
		return
	}
	i, err := n.Int64()
	if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
		v.Add(field, "want an integer, got %s", Short(raw))
		return
	}
	*dst = int(i)
}

// Float decodes raw as a number onto dst, or records a problem.
func Float(v *Problems, field string, raw json.RawMessage, dst *float64) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || IsNull(raw) {
		v.Add(field, "want a number, got %s", Short(raw))
		return
	}
	*dst = f
}

// Bool decodes raw as true or false onto dst, or records a problem.
func Bool(v *Problems, field string, raw json.RawMessage, dst *bool) {
	if err := json.Unmarshal(raw, dst); err != nil || IsNull(raw) {
		v.Add(field, "want true or false, got %s", Short(raw))
	}
}

// IsNull reports whether raw is the JSON null.
func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// maxQuote is how many bytes of a bad value, or of a key, a problem
// quotes. An error ends up in a log line or an HTTP answer, so it must stay
// short whatever the document holds (a 10 MB duration string, say).
const maxQuote = 64

// Short quotes a raw JSON value for a problem: whole if it is short, else
// its first maxQuote bytes and its length.
func Short(raw []byte) string {
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

// QuoteKey quotes a key of a document (a field name, an override key) for
// a path: as a Go string literal, cut to maxQuote bytes with its length if
// it is longer.
func QuoteKey(key string) string {
	if len(key) <= maxQuote {
		return strconv.Quote(key)
	}
	return strconv.Quote(key[:cut(key)]) + "…(" + strconv.Itoa(len(key)) + " bytes)"
}

// FieldName is a member name as it appears in a path: as it is when it is
// a plain name (letters, digits, '_', '-', '.') short enough to quote, and
// quoted otherwise, so that a name holding a newline or 10 MB of text
// cannot forge or flood an error message.
func FieldName(name string) string {
	if len(name) == 0 || len(name) > maxQuote {
		return QuoteKey(name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return QuoteKey(name)
		}
	}
	return name
}
