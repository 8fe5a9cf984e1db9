package jsondoc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func path(name string) string { return "doc." + FieldName(name) }

func members(data string) (map[string]json.RawMessage, []Problem) {
	var v Problems
	m := Members(&v, []byte(data), "doc", "an object", path)
	return m, v.List
}

func TestMembers_ReadsAnObjectMemberByMember(t *testing.T) {
	m, problems := members(` {"a": 1, "b": {"c": [true]}}` + "\n")
	require.Empty(t, problems)
	assert.Equal(t, map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`{"c": [true]}`)}, m)
}

// A name given twice is a problem at its path, once however often it
// repeats, and neither value is kept.
func TestMembers_ANameGivenTwiceIsAProblem(t *testing.T) {
	m, problems := members(`{"a": 1, "b": 2, "a": 3, "a": 4}`)
	assert.Equal(t, []Problem{{"doc.a", "duplicate key"}}, problems)
	assert.Equal(t, map[string]json.RawMessage{"b": json.RawMessage(`2`)}, m)
}

func TestMembers_ProblemsOfTheWholeDocument(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"", "want an object, got an empty document"},
		{"[1]", "want an object, got [1]"},
		{`{"a": 1} {}`, "want an object and nothing after it, got more at byte 9: \"{}\""},
		{"{\n  \"a\": ", "the document ends early at byte 8 (line 2, column 7), in the value of doc.a"},
		{`{"a" 1}`, "want an object: expected colon after object key at byte 5 (line 1, column 5)"},
	} {
		m, problems := members(c.data)
		assert.Nil(t, m, "%q", c.data)
		assert.Equal(t, []Problem{{"doc", c.want}}, problems, "%q", c.data)
	}
}

func TestDecoders_RefuseWhatDoesNotFitTheField(t *testing.T) {
	var v Problems
	var d time.Duration
	var n int
	var f float64
	var b bool
	Duration(&v, "d", json.RawMessage(`"1m30s"`), &d)
	Int(&v, "n", json.RawMessage(` 42 `), &n)
	Float(&v, "f", json.RawMessage(`0.5`), &f)
	Bool(&v, "b", json.RawMessage(`true`), &b)
	require.Empty(t, v.List)
	assert.Equal(t, 90*time.Second, d)
	assert.Equal(t, 42, n)
	assert.Equal(t, 0.5, f)
	assert.True(t, b)

	Duration(&v, "d", json.RawMessage(`90`), &d)
	Duration(&v, "d", json.RawMessage(`null`), &d)
	Int(&v, "n", json.RawMessage(`"7"`), &n)
	Int(&v, "n", json.RawMessage(`4294967296`), &n)
	Int(&v, "n", json.RawMessage(`1.5`), &n)
	Float(&v, "f", json.RawMessage(`"x"`), &f)
	Bool(&v, "b", json.RawMessage(`1`), &b)
	assert.Equal(t, []Problem{
		{"d", `want a duration string such as "5s" or "1m30s", got 90`},
		{"d", `want a duration string such as "5s" or "1m30s", got null`},
		{"n", `want an integer, got "7"`},
		{"n", `want an integer, got 4294967296`},
		{"n", `want an integer, got 1.5`},
		{"f", `want a number, got "x"`},
		{"b", `want true or false, got 1`},
	}, v.List)
	assert.Equal(t, 90*time.Second, d, "a refused value leaves the field alone")
	assert.Equal(t, 42, n)
}

// What a problem quotes of the document is bounded and cannot hold a
// line break or a forged path, whatever the document holds.
func TestQuoting_IsBounded(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	assert.Equal(t, `"`+strings.Repeat("é", 31)+`…(202 bytes)`, Short([]byte(`"`+long+`"`)))
	assert.Equal(t, "[1]", Short([]byte(" [1] ")))
	assert.Equal(t, `"`+strings.Repeat("é", 32)+`"…(200 bytes)`, QuoteKey(long))
	assert.Equal(t, `"a\nb"`, QuoteKey("a\nb"))
	assert.Equal(t, "call_timeout", FieldName("call_timeout"))
	assert.Equal(t, `"x]. forged"`, FieldName("x]. forged"))
	assert.Equal(t, `""`, FieldName(""))
	assert.Equal(t, QuoteKey(strings.Repeat("a", 65)), FieldName(strings.Repeat("a", 65)))
}

// A problem added with no field concerns the whole document and is named
// so, rather than printed with an empty path.
func TestProblems_NoFieldIsTheDocument(t *testing.T) {
	var v Problems
	v.Add("", "empty")
	v.Add("a.b", "want %d", 1)
	assert.Equal(t, []Problem{{Field: Document, Problem: "empty"}, {Field: "a.b", Problem: "want 1"}}, v.List)
}

// An error's message lists the first Listed problems and counts the rest,
// however many a document has; a short list is given whole.
func TestMessage_ListsABoundedNumber(t *testing.T) {
	text := func(s string) string { return s }
	assert.Equal(t, "bad: ", Message("bad: ", []string(nil), text))
	assert.Equal(t, "bad: a; b", Message("bad: ", []string{"a", "b"}, text))
	long := make([]string, Listed+5)
	for i := range long {
		long[i] = "p"
	}
	msg := Message("bad: ", long, text)
	assert.Equal(t, "bad: "+strings.Repeat("p; ", Listed-1)+"p; and 5 more problems", msg)
}
