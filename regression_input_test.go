package breaker

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// problemsOf requires err to be a *PolicyError and returns its problems.
func problemsOf(t *testing.T, err error, msgAndArgs ...any) []FieldError {
	t.Helper()
	var pe *PolicyError
	require.ErrorAs(t, err, &pe, msgAndArgs...)
	require.NotEmpty(t, pe.Problems, msgAndArgs...)
	return pe.Problems
}

// hasProblem reports whether problems name field with a problem containing
// text.
func hasProblem(problems []FieldError, field, text string) bool {
	for _, p := range problems {
		if p.Field == field && strings.Contains(p.Problem, text) {
			return true
		}
	}
	return false
}

// Scenario: a policy document that names a field twice,
// {"max_open_for": "1m", "max_open_for": "3m"}, was accepted with the last
// value winning, because encoding/json keeps the last of two equal names
// when it decodes into a map. A document edited by hand (or merged by a
// tool) then says two things and the breaker silently runs on one of them.
// The same held for an override key, for a field inside an override, and
// for the group document's "default". Every duplicate must be refused with
// its path, and nothing of the document applied.
func TestRegression_DuplicateKeysAreRefusedWithTheirPath(t *testing.T) {
	policyDocs := []struct{ doc, field string }{
		{`{"max_open_for": "1m", "max_open_for": "3m"}`, "max_open_for"},
		{`{"window": "5s", "probes": 2, "probes": 2}`, "probes"},
		// The same name spelled with an escape is the same name.
		{`{"window": "5s", "wind\u006fw": "10s"}`, "window"},
	}
	for _, c := range policyDocs {
		_, err := ParsePolicy([]byte(c.doc))
		problems := problemsOf(t, err, c.doc)
		assert.True(t, hasProblem(problems, c.field, "duplicate key"), "%s: %v", c.doc, err)

		p := DefaultPolicy()
		err = json.Unmarshal([]byte(c.doc), &p)
		problems = problemsOf(t, err, c.doc)
		assert.True(t, hasProblem(problems, c.field, "duplicate key"), "%s: %v", c.doc, err)
		assert.Equal(t, DefaultPolicy(), p, "%s: nothing applied", c.doc)
	}

	groupDocs := []struct{ doc, field string }{
		{`{"default": {"error_ratio": 0.6}, "default": {"error_ratio": 0.7}}`, "default"},
		{`{"overrides": {"payment.Charge": {"open_for": "45s"}, "payment.Charge": {"open_for": "50s"}}}`, `overrides["payment.Charge"]`},
		{`{"overrides": {"a": {"open_for": "45s", "open_for": "50s"}}}`, `overrides["a"].open_for`},
		{`{"default": {"probes": 2, "probes": 3}}`, "default.probes"},
		{`{"overrides": {}, "overrides": {"a": {}}}`, "overrides"},
	}
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("payment.Charge", 1, nil)
	gh.calls("a", 1, nil)
	for _, c := range groupDocs {
		_, err := ParseGroupPolicy([]byte(c.doc))
		problems := problemsOf(t, err, c.doc)
		assert.True(t, hasProblem(problems, c.field, "duplicate key"), "%s: %v", c.doc, err)

		err = gh.g.LoadPolicies([]byte(c.doc))
		problems = problemsOf(t, err, c.doc)
		assert.True(t, hasProblem(problems, c.field, "duplicate key"), "%s: %v", c.doc, err)
		assert.Equal(t, GroupPolicy{Default: DefaultPolicy()}, gh.g.Policies(), c.doc)
		for _, k := range []string{"payment.Charge", "a"} {
			b, _ := gh.g.Get(k)
			assert.Equal(t, DefaultPolicy(), b.Policy(), "%s: %s keeps its policy", c.doc, k)
		}
	}
}

// Scenario: a policy document with a 10 MB duration string gave a 10 MB
// error message, because the message quoted the bad value in full; the
// same for a 10 MB unknown field name or override key. An error that ends
// up in a log line or an HTTP answer must stay small whatever the input:
// it quotes a short prefix of the value and says how long it was.
func TestRegression_ErrorsQuoteOnlyAPrefixOfABadValue(t *testing.T) {
	const n = 10 << 20
	big := strings.Repeat("x", n)
	docs := []struct {
		name  string
		parse func([]byte) error
		doc   string
	}{
		{"duration", parsePolicyErr, `{"window": "` + big + `"}`},
		{"integer", parsePolicyErr, `{"buckets": "` + big + `"}`},
		{"number", parsePolicyErr, `{"error_ratio": ` + strings.Repeat("9", n) + `}`},
		{"unknown field", parsePolicyErr, `{"` + big + `": 1}`},
		{"not an object", parsePolicyErr, `"` + big + `"`},
		{"trailing data", parsePolicyErr, `{} "` + big + `"`},
		{"override key", parseGroupErr, `{"overrides": {"` + big + `": {"windw": "1s"}}}`},
		{"group field", parseGroupErr, `{"` + big + `": {}}`},
		{"override duration", parseGroupErr, `{"overrides": {"a": {"open_for": "` + big + `"}}}`},
	}
	for _, c := range docs {
		err := c.parse([]byte(c.doc))
		require.Error(t, err, c.name)
		msg := err.Error()
		assert.Less(t, len(msg), 512, "%s: a %d-byte message", c.name, len(msg))
		for _, p := range problemsOf(t, err, c.name) {
			assert.Less(t, len(p.Field), 128, "%s: field of %d bytes", c.name, len(p.Field))
		}
	}
	_, err := ParsePolicy([]byte(`{"window": "` + big + `"}`))
	msg := err.Error()
	assert.True(t, strings.Contains(msg, `"xxxxxxxx`), "a prefix of the value is quoted: %.200s", msg)
	assert.True(t, strings.Contains(msg, "(10485762 bytes)"), "with the value's length: %.200s", msg)
}

func parsePolicyErr(doc []byte) error { _, err := ParsePolicy(doc); return err }
func parseGroupErr(doc []byte) error  { _, err := ParseGroupPolicy(doc); return err }

// Scenario: a document that is not a JSON object ([1, 2], "x", 42) was
// refused with encoding/json's words, "cannot unmarshal array into Go
// value of type map[string]json.RawMessage": the operator who wrote the
// document is told about a Go type of the library's internals instead of
// what the document should be.
func TestRegression_NonObjectDocumentsAreRefusedInTheDocumentsTerms(t *testing.T) {
	for _, doc := range []string{`[1, 2]`, `"x"`, `42`, `true`, `null`, ``, `  `} {
		for name, parse := range map[string]func([]byte) error{"policy": parsePolicyErr, "group": parseGroupErr} {
			problems := problemsOf(t, parse([]byte(doc)), doc)
			require.Len(t, problems, 1, "%s %q", name, doc)
			assert.Equal(t, "(document)", problems[0].Field, "%s %q", name, doc)
			assert.Contains(t, problems[0].Problem, "JSON object", "%s %q", name, doc)
			assert.NotContains(t, problems[0].Problem, "Go value", "%s %q", name, doc)
			assert.NotContains(t, problems[0].Problem, "json:", "%s %q", name, doc)
		}
	}
	_, err := ParseGroupPolicy([]byte(`{"overrides": [1]}`))
	problems := problemsOf(t, err)
	assert.Equal(t, "overrides", problems[0].Field)
	assert.NotContains(t, problems[0].Problem, "Go value")
}

// Scenario: json.Unmarshal into a Policy accepted a document that
// ParsePolicy refused, {"probes": 0}, because Policy.UnmarshalJSON did not
// validate what it decoded: a configuration struct holding a Policy loaded
// an invalid one without a word, to be refused only later when a breaker
// was built from it, far from the document. The two must agree.
func TestRegression_UnmarshalJSONValidatesLikeParsePolicy(t *testing.T) {
	for _, doc := range []string{
		`{"probes": 0}`,
		`{"open_for": "10s", "max_open_for": "5s"}`,
		`{"error_ratio": 0}`,
		`{"window": "25h"}`,
	} {
		_, perr := ParsePolicy([]byte(doc))
		require.Error(t, perr, doc)

		p := DefaultPolicy()
		err := json.Unmarshal([]byte(doc), &p)
		require.Error(t, err, doc)
		assert.Equal(t, perr.Error(), err.Error(), doc)
		assert.Equal(t, DefaultPolicy(), p, "%s: nothing applied", doc)
	}
	var cfg struct {
		Policy Policy `json:"policy"`
	}
	cfg.Policy = DefaultPolicy()
	require.Error(t, json.Unmarshal([]byte(`{"policy": {"jitter": 1}}`), &cfg))
	require.NoError(t, json.Unmarshal([]byte(`{"policy": {"jitter": 0}}`), &cfg))
	assert.Zero(t, cfg.Policy.Jitter)
}

// Scenario: a group document with "overrides": {} decoded to an empty,
// non-nil map, and encoding that GroupPolicy (which omits empty overrides)
// and decoding it again gave a nil map: the document did not round-trip.
func TestRegression_EmptyOverridesRoundTrip(t *testing.T) {
	gp, err := ParseGroupPolicy([]byte(`{"overrides": {}}`))
	require.NoError(t, err)
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
}

// Documents that are malformed in other ways are refused with an error
// that says where, and never panic. These held before the duplicate-key
// decoder replaced encoding/json's map decoding; they are here to hold
// after it.
func TestPolicyDocument_MalformedInputIsAClearError(t *testing.T) {
	deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
	cases := []struct{ doc, field, problem string }{
		{`{"window": "5s"} {"probes": 2}`, "(document)", "after"},
		{`{"window": "5s"} x`, "(document)", "after"},
		{`{"window": "5s"`, "(document)", "the document ends early at byte 15"},
		{`{"window": "5s",}`, "(document)", "JSON object"},
		{`{"window": ` + deep + `}`, "(document)", "depth"},
		{deep, "(document)", "JSON object"},
		{`{"windw": "5s"}`, "windw", "unknown field"},
		{`{"Window": "5s"}`, "Window", "unknown field"},
		{`{"error_ratio": "NaN"}`, "error_ratio", "number"},
		{`{"jitter": "Inf"}`, "jitter", "number"},
		{`{"jitter": "-Infinity"}`, "jitter", "number"},
		{`{"error_ratio": 1e400}`, "error_ratio", "number"},
		{`{"error_ratio": -1e400}`, "error_ratio", "number"},
		{`{"buckets": 99999999999999999999999}`, "buckets", "integer"},
		{`{"buckets": 4294967296}`, "buckets", "integer"},
		{`{"min_requests": -9223372036854775809}`, "min_requests", "integer"},
		{`{"buckets": 1e1}`, "buckets", "integer"},
		{`{"window": "9999999999999h"}`, "window", "duration"},
		{`{"window": "NaNs"}`, "window", "duration"},
		{`{"window": {"a": 1, "a": 2}}`, "window", "duration"},
		{`{"strict_probes": 1}`, "strict_probes", "true or false"},
	}
	for _, c := range cases {
		_, err := ParsePolicy([]byte(c.doc))
		problems := problemsOf(t, err, "%.80s", c.doc)
		assert.True(t, hasProblem(problems, c.field, c.problem), "%.80s: %v", c.doc, err)
		assert.Less(t, len(err.Error()), 512, "%.80s", c.doc)
	}

	groupCases := []struct{ doc, field, problem string }{
		{`{"default": {}} {}`, "(document)", "after"},
		{`{"overrides": {"a": {"windw": "1s"}}}`, `overrides["a"].windw`, "unknown field"},
		{`{"default": {"windw": "1s"}}`, "default.windw", "unknown field"},
		{`{"default": {"probes": 1}, "x": {"a": 1}}`, "x", "unknown field"},
		{`{"overrides": {"a": null}}`, `overrides["a"]`, "JSON object"},
		{`{"default": null}`, "default", "JSON object"},
		{`{"default": ` + deep + `}`, "(document)", "depth"},
	}
	for _, c := range groupCases {
		_, err := ParseGroupPolicy([]byte(c.doc))
		problems := problemsOf(t, err, "%.80s", c.doc)
		assert.True(t, hasProblem(problems, c.field, c.problem), "%.80s: %v", c.doc, err)
		assert.Less(t, len(err.Error()), 512, "%.80s", c.doc)
	}

	// Called directly, UnmarshalJSON sees bytes encoding/json has not
	// checked, trailing data included.
	p := DefaultPolicy()
	err := p.UnmarshalJSON([]byte(`{"probes": 2} {"probes": 5}`))
	assert.True(t, hasProblem(problemsOf(t, err), "(document)", "after"), "%v", err)
	assert.Equal(t, DefaultPolicy(), p)
	var gp GroupPolicy
	err = gp.UnmarshalJSON([]byte(`{} []`))
	assert.True(t, hasProblem(problemsOf(t, err), "(document)", "after"), "%v", err)
}

// Scenario: a document of 1000 unknown fields gave an error message that
// listed all 1000, so the message grew with the document however short
// each problem was. The message lists a bounded number of problems and
// says how many it left out; Problems keeps them all.
func TestRegression_ErrorMessageListsABoundedNumberOfProblems(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`"f` + strings.Repeat("x", i%7) + itoa(uint64(i)) + `": 1`)
	}
	sb.WriteString("}")
	_, err := ParsePolicy([]byte(sb.String()))
	problems := problemsOf(t, err)
	assert.Len(t, problems, 1000)
	assert.Less(t, len(err.Error()), 2048)
	assert.Contains(t, err.Error(), "more")
}

// Scenario (found by FuzzParseGroupPolicy): the duplicate-key decoder
// checked for data after the document with bytes.TrimSpace, which also
// trims \v, \f and Unicode spaces, so `{}\v` was accepted by
// ParseGroupPolicy while json.Unmarshal refused it. Only JSON's own
// whitespace (space, tab, newline, carriage return) may follow a
// document.
func TestRegression_OnlyJSONWhitespaceMayFollowADocument(t *testing.T) {
	for _, tail := range []string{"\v", "\f", "\u00a0", "\u2028", " \x85"} {
		_, err := ParsePolicy([]byte(`{}` + tail))
		assert.True(t, hasProblem(problemsOf(t, err, "%q", tail), "(document)", "after"), "%q: %v", tail, err)
		_, err = ParseGroupPolicy([]byte(`{}` + tail))
		assert.True(t, hasProblem(problemsOf(t, err, "%q", tail), "(document)", "after"), "%q: %v", tail, err)
	}
	_, err := ParsePolicy([]byte("{} \t\r\n"))
	assert.NoError(t, err)
}

// A function that returns a typed nil pointer as its error (var e
// *net.OpError; return e) made DefaultClassifier panic inside errors.As,
// so Do panicked and counted nothing. Such an error is a failure.
func TestRegression_TypedNilErrorIsAFailureNotAPanic(t *testing.T) {
	for _, err := range []error{(*net.OpError)(nil), (*url.Error)(nil), (*net.DNSError)(nil)} {
		assert.Equal(t, Failure, DefaultClassifier(err), "%T", err)
	}
	h := newHarness(t, DefaultPolicy())
	err := h.b.Do(context.Background(), func(context.Context) error { var e *net.OpError; return e })
	assert.Error(t, err)
	assert.Equal(t, uint64(1), h.b.Counters().Failures)
}
