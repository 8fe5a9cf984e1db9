package breaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPolicy_DefaultsAreTheSpecNumbers(t *testing.T) {
	p := DefaultPolicy()
	assert.Equal(t, 5*time.Second, p.Window)
	assert.Equal(t, 10, p.Buckets)
	assert.Equal(t, 20, p.MinRequests)
	assert.Equal(t, 0.5, p.ErrorRatio)
	assert.Equal(t, time.Duration(0), p.CallTimeout)
	assert.Equal(t, 30*time.Second, p.OpenFor)
	assert.Equal(t, 120*time.Second, p.MaxOpenFor)
	assert.Equal(t, 0.2, p.Jitter)
	assert.Equal(t, 3, p.Probes)
	assert.Equal(t, 60*time.Second, p.Warmup)
	assert.Zero(t, p.ErrorCount)
	assert.Zero(t, p.SlowCall)
	assert.Zero(t, p.ConsecutiveFailures)
	assert.False(t, p.StrictProbes)
	assert.NoError(t, p.Validate())
}

func TestPolicy_JSONRoundTripsWithDurationStrings(t *testing.T) {
	p := policy(func(p *Policy) {
		p.SlowCall = 1500 * time.Millisecond
		p.SlowRatio = 0.6
		p.CallTimeout = 800 * time.Millisecond
		p.ConsecutiveFailures = 7
		p.ErrorCount = 40
		p.StrictProbes = true
	})
	data, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"window":"5s"`)
	assert.Contains(t, string(data), `"max_open_for":"2m0s"`)
	assert.Contains(t, string(data), `"slow_call":"1.5s"`)

	var back Policy
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, p, back)

	parsed, err := ParsePolicy(data)
	require.NoError(t, err)
	assert.Equal(t, p, parsed)
}

func TestPolicy_ZeroIsExpressibleForJitterWarmupAndTimeout(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"jitter": 0, "warmup": "0s", "call_timeout": "0s"}`))
	require.NoError(t, err)
	assert.Zero(t, p.Jitter)
	assert.Zero(t, p.Warmup)
	assert.Zero(t, p.CallTimeout)
	_, err = New("x", p)
	assert.NoError(t, err)
}

func TestPolicy_PartialDocumentKeepsDefaults(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"error_ratio": 0.6, "open_for": "45s"}`))
	require.NoError(t, err)
	want := policy(func(p *Policy) { p.ErrorRatio = 0.6; p.OpenFor = 45 * time.Second })
	assert.Equal(t, want, p)
}

func TestPolicy_ValidateNamesEveryBadField(t *testing.T) {
	cases := []struct {
		field string
		edit  func(p *Policy)
	}{
		{"window", func(p *Policy) { p.Window = -time.Second }},
		{"window", func(p *Policy) { p.Window = 0 }},
		{"window", func(p *Policy) { p.Window = 25 * time.Hour }},
		{"buckets", func(p *Policy) { p.Buckets = 0 }},
		{"buckets", func(p *Policy) { p.Buckets = maxBuckets + 1 }},
		{"buckets", func(p *Policy) { p.Buckets = 3 }}, // 5s/3 is not whole milliseconds
		{"buckets", func(p *Policy) { p.Window = 5 * time.Millisecond; p.Buckets = 10 }},
		{"min_requests", func(p *Policy) { p.MinRequests = -1 }},
		{"error_ratio", func(p *Policy) { p.ErrorRatio = 0 }},
		{"error_ratio", func(p *Policy) { p.ErrorRatio = 1.01 }},
		{"error_ratio", func(p *Policy) { p.ErrorRatio = math.NaN() }},
		{"error_ratio", func(p *Policy) { p.ErrorRatio = math.Inf(1) }},
		{"error_count", func(p *Policy) { p.ErrorCount = -3 }},
		{"slow_call", func(p *Policy) { p.SlowCall = -time.Millisecond }},
		{"slow_ratio", func(p *Policy) { p.SlowCall = time.Second }}, // ratio missing
		{"slow_ratio", func(p *Policy) { p.SlowCall = time.Second; p.SlowRatio = math.NaN() }},
		{"slow_ratio", func(p *Policy) { p.SlowRatio = 0.5 }}, // without slow_call
		{"consecutive_failures", func(p *Policy) { p.ConsecutiveFailures = -1 }},
		{"call_timeout", func(p *Policy) { p.CallTimeout = -time.Second }},
		{"open_for", func(p *Policy) { p.OpenFor = 0 }},
		{"max_open_for", func(p *Policy) { p.MaxOpenFor = 10 * time.Second }},
		{"jitter", func(p *Policy) { p.Jitter = 1 }},
		{"jitter", func(p *Policy) { p.Jitter = -0.1 }},
		{"jitter", func(p *Policy) { p.Jitter = math.NaN() }},
		{"probes", func(p *Policy) { p.Probes = 0 }},
		{"probes", func(p *Policy) { p.Probes = maxProbes + 1 }},
		{"warmup", func(p *Policy) { p.Warmup = -time.Second }},
		{"warmup", func(p *Policy) { p.Warmup = 25 * time.Hour }},
		{"call_timeout", func(p *Policy) { p.CallTimeout = 25 * time.Hour }},
		{"slow_call", func(p *Policy) { p.SlowCall = 25 * time.Hour; p.SlowRatio = 0.5 }},
		{"max_open_for", func(p *Policy) { p.MaxOpenFor = 1000 * time.Hour }},
	}
	for _, c := range cases {
		p := policy(c.edit)
		err := p.Validate()
		var pe *PolicyError
		require.ErrorAs(t, err, &pe, "%s: %+v", c.field, p)
		require.Len(t, pe.Problems, 1, "%v", err)
		assert.Equal(t, c.field, pe.Problems[0].Field, "%v", err)
		assert.True(t, strings.HasPrefix(err.Error(), "breaker: invalid policy: "+c.field+": "), "%v", err)
	}
}

func TestPolicy_DurationsAreBoundedToADay(t *testing.T) {
	p := policy(func(p *Policy) { p.OpenFor = 25 * time.Hour; p.MaxOpenFor = 25 * time.Hour })
	var pe *PolicyError
	require.ErrorAs(t, p.Validate(), &pe)
	assert.Equal(t, []FieldError{
		{"open_for", "must be at most 24h0m0s, got 25h0m0s"},
		{"max_open_for", "must be at most 24h0m0s, got 25h0m0s"},
	}, pe.Problems)
	assert.NoError(t, policy(func(p *Policy) { p.OpenFor = maxDuration; p.MaxOpenFor = maxDuration }).Validate())
}

func TestPolicy_ValidateReportsAllFieldsAtOnce(t *testing.T) {
	p := Policy{ErrorRatio: 2, Jitter: -1}
	var pe *PolicyError
	require.ErrorAs(t, p.Validate(), &pe)
	var fields []string
	for _, fe := range pe.Problems {
		fields = append(fields, fe.Field)
	}
	assert.Equal(t, []string{"window", "buckets", "error_ratio", "open_for", "max_open_for", "jitter", "probes"}, fields)
}

func TestPolicy_StrictDecodingNamesTheField(t *testing.T) {
	cases := []struct {
		doc, field, problem string
	}{
		{`{"windw": "5s"}`, "windw", "unknown field"},
		{`{"window": 5}`, "window", "duration string"},
		{`{"window": "5 seconds"}`, "window", "duration string"},
		{`{"window": null}`, "window", "duration string"},
		{`{"buckets": 2.5}`, "buckets", "integer"},
		{`{"buckets": "10"}`, "buckets", "integer"},
		{`{"min_requests": 1e40}`, "min_requests", "integer"},
		{`{"error_ratio": "half"}`, "error_ratio", "number"},
		{`{"strict_probes": "yes"}`, "strict_probes", "true or false"},
		{`[1,2]`, "(document)", "JSON object"},
		{`{"window": "5s"`, "(document)", "the document ends early at byte 15"},
		{`null`, "(document)", "JSON object"},
	}
	for _, c := range cases {
		_, err := ParsePolicy([]byte(c.doc))
		var pe *PolicyError
		require.ErrorAs(t, err, &pe, c.doc)
		assert.Equal(t, c.field, pe.Problems[0].Field, c.doc)
		assert.Contains(t, pe.Problems[0].Problem, c.problem, c.doc)
	}
}

// A document that names a field as it was named before the first release
// (timeout, the adaptive timeout's flat fields) is refused with the
// field's new name, in a group's override too, rather than as an unknown
// field; so is the adaptive timeout's old bool.
func TestPolicy_ARenamedFieldIsRefusedWithItsNewName(t *testing.T) {
	for _, c := range []struct{ doc, field, problem string }{
		{`{"timeout": "1s"}`, "timeout", "was renamed call_timeout"},
		{`{"timeout_quantile": 0.95}`, "timeout_quantile", "was renamed adaptive_timeout.quantile"},
		{`{"timeout_factor": 3}`, "timeout_factor", "was renamed adaptive_timeout.factor"},
		{`{"timeout_base": "1ms"}`, "timeout_base", "was renamed adaptive_timeout.base"},
		{`{"timeout_min": "1ms"}`, "timeout_min", "was renamed adaptive_timeout.min"},
		{`{"timeout_max": "1s"}`, "timeout_max", "was renamed adaptive_timeout.max"},
		{`{"adaptive_timeout": true}`, "adaptive_timeout", `want a JSON object such as {"enabled": true, "max": "2s"}, got true (the flag is adaptive_timeout.enabled)`},
		{`{"adaptive_timeout": {"enabled": true, "max": "1s", "timeout_min": "1ms"}}`, "adaptive_timeout.timeout_min", "unknown field"},
		{`{"adaptive_timeout": 1}`, "adaptive_timeout", "want a JSON object of adaptive_timeout fields, got 1"},
	} {
		_, err := ParsePolicy([]byte(c.doc))
		var pe *PolicyError
		require.ErrorAs(t, err, &pe, c.doc)
		require.Len(t, pe.Problems, 1, "%v", pe)
		assert.Equal(t, c.field, pe.Problems[0].Field, c.doc)
		assert.Equal(t, c.problem, pe.Problems[0].Problem, c.doc)

		_, err = ParseGroupPolicy([]byte(`{"overrides": {"a": ` + c.doc + `}}`))
		require.ErrorAs(t, err, &pe, c.doc)
		assert.Equal(t, `overrides["a"].`+c.field, pe.Problems[0].Field, c.doc)
	}
	_, err := ParsePolicy([]byte(`{"timeout": "1s"}`))
	assert.EqualError(t, err, "breaker: invalid policy: timeout: was renamed call_timeout")
}

// The adaptive timeout is one nested object in a document; the fields it
// leaves out keep their values, as a policy's do.
func TestPolicy_AdaptiveTimeoutIsANestedObject(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"call_timeout": "100ms", "adaptive_timeout": {"enabled": true, "min": "20ms", "max": "800ms"}}`))
	require.NoError(t, err)
	assert.Equal(t, AdaptiveTimeout{Enabled: true, Quantile: defaultAdaptiveQuantile, Factor: defaultAdaptiveFactor,
		Min: 20 * time.Millisecond, Max: 800 * time.Millisecond}, p.AdaptiveTimeout)
	assert.Equal(t, 100*time.Millisecond, p.CallTimeout)
	data, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"call_timeout":"100ms","adaptive_timeout":{"enabled":true,"quantile":0.99,"factor":2,"base":"0s","min":"20ms","max":"800ms"},"open_for":"30s"`)
}

func TestPolicy_DecodeErrorLeavesTheValueUnchanged(t *testing.T) {
	p := DefaultPolicy()
	err := json.Unmarshal([]byte(`{"error_ratio": 0.9, "bogus": 1}`), &p)
	require.Error(t, err)
	assert.Equal(t, DefaultPolicy(), p, "a bad document must not half-apply")
}

func TestPolicy_NestedDocumentsPrefixTheFieldPath(t *testing.T) {
	p := DefaultPolicy()
	problems := decodePolicyInto(&p, []byte(`{"open_for": "1s", "max_open_for": "500ms", "x": 1}`), "overrides.orders.Create.")
	require.Len(t, problems, 1) // decode problems stop validation
	assert.Equal(t, "overrides.orders.Create.x", problems[0].Field)

	problems = decodePolicyInto(&p, []byte(`{"open_for": "1s", "max_open_for": "500ms"}`), "overrides.orders.Create.")
	require.Len(t, problems, 1)
	assert.Equal(t, "overrides.orders.Create.max_open_for", problems[0].Field)
	assert.Equal(t, DefaultPolicy(), p, "invalid overlay must not be applied")
}

func TestPolicy_InvalidIsRefusedNotCorrected(t *testing.T) {
	bad := policy(func(p *Policy) { p.Probes = 0 })
	b, err := New("x", bad)
	assert.Nil(t, b)
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)

	h := newHarness(t, DefaultPolicy())
	h.calls(5, errBoom)
	before := h.b.Snapshot()
	require.Error(t, h.b.SetPolicy(bad))
	assert.Equal(t, DefaultPolicy(), h.b.Policy(), "old policy must stay in force")
	assert.Equal(t, before, h.b.Snapshot(), "the window must be untouched")
}

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

func parsePolicyErr(doc []byte) error { _, err := ParsePolicy(doc); return err }
func parseGroupErr(doc []byte) error  { _, err := ParseGroupPolicy(doc); return err }

// A document that names a key twice says two things, and is refused: every
// duplicate (a policy field, spelled with an escape or not; an override
// key; a field inside an override; the group document's "default") is
// reported with its path, by ParsePolicy, json.Unmarshal, ParseGroupPolicy
// and LoadPolicies alike, and nothing of the document is applied.
// Regression (12e7bc0): the last of two equal keys won, silently.
func TestPolicyDocument_DuplicateKeysAreRefusedWithTheirPath(t *testing.T) {
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

// An error stays small whatever the input, for it ends up in a log line or
// an HTTP answer: a 10 MB bad value, field name or override key is quoted
// by a short prefix, with its length.
// Regression (12e7bc0): a 10 MB bad duration gave a 10 MB message.
func TestPolicyDocument_ErrorsQuoteOnlyAPrefixOfABadValue(t *testing.T) {
	t.Parallel()
	const n = 2 << 20 // twice the largest document a group takes
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
	assert.True(t, strings.Contains(msg, "("+strconv.Itoa(n+2)+" bytes)"), "with the value's length: %.200s", msg)
}

// A document that is not a JSON object ([1, 2], "x", 42, nothing) is
// refused in the document's terms, "(document)" and "JSON object", with no
// word of Go types; so is a member that should be an object.
// Regression (12e7bc0): the operator was told of a map[string]json.RawMessage.
func TestPolicyDocument_NonObjectsAreRefusedInTheDocumentsTerms(t *testing.T) {
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

// Only JSON's own whitespace (space, tab, newline, carriage return) may
// follow a document; \v, \f and Unicode spaces are data after it.
// Regression (562ff57, found by FuzzParseGroupPolicy): `{}\v` was accepted.
func TestPolicyDocument_OnlyJSONWhitespaceMayFollowIt(t *testing.T) {
	for _, tail := range []string{"\v", "\f", "\u00a0", "\u2028", " \x85"} {
		_, err := ParsePolicy([]byte(`{}` + tail))
		assert.True(t, hasProblem(problemsOf(t, err, "%q", tail), "(document)", "after"), "%q: %v", tail, err)
		_, err = ParseGroupPolicy([]byte(`{}` + tail))
		assert.True(t, hasProblem(problemsOf(t, err, "%q", tail), "(document)", "after"), "%q: %v", tail, err)
	}
	_, err := ParsePolicy([]byte("{} \t\r\n"))
	assert.NoError(t, err)
}

// json.Unmarshal into a Policy refuses what ParsePolicy refuses, with the
// same error, and applies nothing; so a Policy inside a configuration
// struct is checked where its document is read.
// Regression (12e7bc0): UnmarshalJSON did not validate: {"probes": 0} loaded.
func TestPolicy_UnmarshalJSONValidatesLikeParsePolicy(t *testing.T) {
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

// A PolicyError's message lists a bounded number of problems and says how
// many it left out, however many the document has; Problems keeps them all.
// Regression (12e7bc0): 1000 unknown fields made a message listing all 1000.
func TestPolicyError_MessageListsABoundedNumberOfProblems(t *testing.T) {
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

func TestPolicy_SetPolicyAppliesThresholdsAndKeepsTheWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(15, nil)
	h.calls(10, errBoom) // 10/25 = 0.4: below the default 0.5
	h.requireState(Closed)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.ErrorRatio = 0.4 })))
	assert.Equal(t, uint64(25), h.b.Snapshot().Counted, "same geometry keeps the window")
	h.calls(1, errBoom) // 11/26 >= 0.4
	h.requireState(Open)
}

func TestPolicy_SetPolicyWithNewGeometryStartsAnEmptyWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(15, errBoom)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Window = 10 * time.Second })))
	assert.Zero(t, h.b.Snapshot().Counted)
	h.calls(19, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
}

// A result is judged by the policy in force when it is recorded, not the
// one it was admitted under: with 19 failures in the window and a call in
// flight, SetPolicy raises MinRequests to 40; the call fails, and 20
// counted calls are too few to trip.
// Regression (632857a): the rules captured at admission tripped the breaker.
func TestPolicy_AResultIsJudgedByThePolicyInForceWhenItIsRecorded(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(19, errBoom)
	inFlight := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.MinRequests = 40 })))
	require.ErrorIs(t, inFlight.finish(errBoom), errBoom)
	h.requireState(Closed)
	assert.Equal(t, uint64(20), h.b.Snapshot().Counted)
	h.calls(19, errBoom)
	h.requireState(Closed)
	h.calls(1, errBoom)
	h.requireState(Open)
}

// A change of Window starts a new generation on an empty window: a call
// admitted before the change counts in the counters, not in the window.
// Regression (bc96faf): the call counted in the new window.
func TestPolicy_AResultAdmittedBeforeAWindowChangeNeverLandsInTheNewWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(5, errBoom)
	inFlight := h.start(context.Background())
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.Window = 10 * time.Second })))
	require.ErrorIs(t, inFlight.finish(errBoom), errBoom)
	assert.Equal(t, Snapshot{}, h.b.Snapshot())
	assert.Equal(t, uint64(6), h.b.Counters().Failures, "it still counts in the metrics")
	h.calls(1, nil)
	assert.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot())
}

func TestNew_RejectsAnEmptyName(t *testing.T) {
	b, err := New("", DefaultPolicy())
	assert.Nil(t, b)
	assert.EqualError(t, err, "breaker: empty name")
	assert.False(t, errors.Is(err, ErrOpen))
}

// TestPolicy_EveryFieldIsInTheFieldTable: the encoder, the decoder, the
// validator and DefaultPolicy all walk policyFields, so a field of the
// struct that the table leaves out would be silently dropped from JSON
// and never validated. For every field of the struct, found by
// reflection: the table holds it at the struct's position (which is the
// order of the encoded form) under its JSON tag, its accessor points at
// it and its default has its type (a field of a nested struct, such as
// AdaptiveTimeout, counts as a field of its own, named by its path
// "adaptive_timeout.max"); a non-default valid value survives
// encoding and decoding; and a bad value, in a Policy or in a document,
// is a problem named for that field alone.
func TestPolicy_EveryFieldIsInTheFieldTable(t *testing.T) {
	// base turns every optional rule on, so that changing any one field
	// alone leaves a valid policy.
	base := policy(func(p *Policy) {
		p.ErrorCount = 10
		p.SlowCall = time.Second
		p.SlowRatio = 0.5
		p.ConsecutiveFailures = 5
		p.CallTimeout = 2 * time.Second
		p.AdaptiveTimeout.Enabled = true
		p.AdaptiveTimeout.Base = 10 * time.Millisecond
		p.AdaptiveTimeout.Min = 100 * time.Millisecond
		p.AdaptiveTimeout.Max = 5 * time.Second
	})
	require.NoError(t, base.Validate())

	leaves := policyLeaves(t)
	var names []string
	for i, leaf := range leaves {
		sf, name := leaf.sf, leaf.name
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			require.Less(t, i, len(policyFields), "Policy.%s is not in policyFields", sf.Name)
			f := policyFields[i]
			require.Equal(t, name, f.name, "Policy.%s is not at position %d of policyFields", sf.Name, i)

			var p Policy
			at := reflect.ValueOf(f.at(&p))
			require.Equal(t, reflect.PointerTo(sf.Type), at.Type(), "accessor of %s", name)
			require.Equal(t, reflect.ValueOf(&p).Elem().FieldByIndex(leaf.index).Addr().Pointer(), at.Pointer(),
				"the accessor of %s points at another field", name)
			require.Equal(t, sf.Type, reflect.TypeOf(f.def), "type of the default of %s", name)
			assert.Equal(t, f.def, reflect.ValueOf(DefaultPolicy()).FieldByIndex(leaf.index).Interface(), "DefaultPolicy().%s", sf.Name)

			// Round trip of a non-default valid value.
			q := base
			field := reflect.ValueOf(&q).Elem().FieldByIndex(leaf.index)
			old := field.Interface()
			set := false
			for _, v := range otherValues(t, old) {
				field.Set(reflect.ValueOf(v))
				if q.Validate() == nil {
					set = true
					break
				}
			}
			require.True(t, set, "no valid value of %s other than %v found; teach otherValues one", name, old)
			data, err := json.Marshal(q)
			require.NoError(t, err)
			baseData, err := json.Marshal(base)
			require.NoError(t, err)
			assert.NotEqual(t, string(baseData), string(data), "changing %s does not change the encoding", name)
			parsed, err := ParsePolicy(data)
			require.NoError(t, err, "%s", data)
			assert.Equal(t, q, parsed, "%s", data)
			var fromZero Policy
			require.NoError(t, json.Unmarshal(data, &fromZero), "%s", data)
			assert.Equal(t, q, fromZero, "%s", data)
			onBase := base
			require.NoError(t, json.Unmarshal([]byte(policyDoc(name, string(memberAt(t, data, name)))), &onBase))
			assert.Equal(t, q, onBase, "decoding %s alone", name)

			// A bad value in a Policy. Every bool is valid; a bool field's
			// bad values are only in documents, below.
			q = base
			field = reflect.ValueOf(&q).Elem().FieldByIndex(leaf.index)
			switch field.Interface().(type) {
			case time.Duration:
				field.Set(reflect.ValueOf(-time.Nanosecond))
			case int:
				field.Set(reflect.ValueOf(-1))
			case float64:
				field.Set(reflect.ValueOf(math.NaN()))
			case bool:
				for _, b := range []bool{false, true} {
					field.SetBool(b)
					assert.NoError(t, q.Validate())
				}
				return
			}
			var pe *PolicyError
			require.ErrorAs(t, q.Validate(), &pe, "a bad %s is accepted: %+v", name, q)
			require.Len(t, pe.Problems, 1, "%v", pe)
			assert.Equal(t, name, pe.Problems[0].Field, "%v", pe)
		})
	}
	assert.Equal(t, len(leaves), len(policyFields), "policyFields does not list the fields of Policy one for one")

	// The encoded form has exactly the table's fields, in its order.
	data, err := json.Marshal(base)
	require.NoError(t, err)
	assert.Equal(t, names, encodedKeys(t, data, ""), "%s", data)

	// A bad value in a document, alone or nested in a group's override, is
	// a problem of that field alone; so is a field named twice.
	for _, name := range names {
		for _, c := range []struct{ doc, problem string }{
			{policyDoc(name, "null"), "want "},
			{policyDoc(name, "{}"), "want "},
			{policyDoc(name, "null", "null"), "duplicate key"},
		} {
			_, err := ParsePolicy([]byte(c.doc))
			var pe *PolicyError
			require.ErrorAs(t, err, &pe, c.doc)
			require.Len(t, pe.Problems, 1, "%v", pe)
			assert.Equal(t, name, pe.Problems[0].Field, c.doc)
			assert.True(t, strings.HasPrefix(pe.Problems[0].Problem, c.problem), "%s: %v", c.doc, pe)

			_, err = ParseGroupPolicy([]byte(`{"overrides": {"a": ` + c.doc + `}}`))
			require.ErrorAs(t, err, &pe, c.doc)
			require.Len(t, pe.Problems, 1, "%v", pe)
			assert.Equal(t, `overrides["a"].`+name, pe.Problems[0].Field, c.doc)
		}
	}
}

// policyLeaf is a field of Policy as policyFields lists it: a field of a
// nested struct is a field of its own, named by its JSON path.
type policyLeaf struct {
	sf    reflect.StructField
	index []int
	name  string
}

// policyLeaves lists the fields of Policy, those of its nested structs in
// their place, by reflection.
func policyLeaves(t *testing.T) []policyLeaf {
	var leaves []policyLeaf
	var walk func(rt reflect.Type, index []int, prefix string)
	walk = func(rt reflect.Type, index []int, prefix string) {
		for i := range rt.NumField() {
			sf := rt.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			require.NotEmpty(t, name, "%s.%s has no JSON tag", rt.Name(), sf.Name)
			idx := append(slices.Clone(index), i)
			if sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, idx, prefix+name+".")
				continue
			}
			leaves = append(leaves, policyLeaf{sf: sf, index: idx, name: prefix + name})
		}
	}
	walk(reflect.TypeOf(Policy{}), nil, "")
	return leaves
}

// policyDoc is a policy document that gives the field at path (such as
// "window" or "adaptive_timeout.max") each of values in turn.
func policyDoc(path string, values ...string) string {
	outer, inner, nested := strings.Cut(path, ".")
	if !nested {
		inner = outer
	}
	var members []string
	for _, v := range values {
		members = append(members, `"`+inner+`": `+v)
	}
	doc := "{" + strings.Join(members, ", ") + "}"
	if nested {
		doc = `{"` + outer + `": ` + doc + "}"
	}
	return doc
}

// memberAt returns the value at path in the JSON object data.
func memberAt(t *testing.T, data []byte, path string) json.RawMessage {
	var members map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &members))
	outer, inner, nested := strings.Cut(path, ".")
	if !nested {
		return members[outer]
	}
	return memberAt(t, members[outer], inner)
}

// encodedKeys lists the member names of the JSON object data in order,
// those of a nested object by their path.
func encodedKeys(t *testing.T, data []byte, prefix string) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	_, err := dec.Token()
	require.NoError(t, err)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		var raw json.RawMessage
		require.NoError(t, dec.Decode(&raw))
		if len(raw) > 0 && raw[0] == '{' {
			keys = append(keys, encodedKeys(t, raw, prefix+tok.(string)+".")...)
			continue
		}
		keys = append(keys, prefix+tok.(string))
	}
	return keys
}

// otherValues returns values of v's type other than v, to try in turn as
// a valid change of a policy field.
func otherValues(t *testing.T, v any) []any {
	switch v := v.(type) {
	case time.Duration:
		return []any{2 * v, v / 2, v + time.Millisecond, time.Second}
	case int:
		return []any{2 * v, v + 1, 1}
	case float64:
		return []any{v / 2, 0.5, 0.25}
	case bool:
		return []any{!v}
	}
	t.Fatalf("a policy field of type %T; teach otherValues and the table's users about it", v)
	return nil
}

// A document that raises open_for above the max_open_for it does not set
// (the default's, or the group default's for an override) is refused at
// open_for, the field the user edited; it was refused at max_open_for
// ("must be at least open_for (5m0s), got 2m0s"), a field the document
// does not name. A document that sets both, or only max_open_for, is
// refused at max_open_for, naming open_for in the problem; a policy value
// has no document, and is refused there too.
func TestPolicyDocument_OpenForAboveMaxOpenForNamesTheFieldTheDocumentSets(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []FieldError
	}{
		{"open_for alone", `{"default": {"open_for": "5m"}}`, []FieldError{
			{Field: "default.open_for", Problem: "5m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 5m0s"}}},
		{"an override's open_for over the default's max_open_for", `{"default": {"max_open_for": "1m"}, "overrides": {"payment.Charge": {"open_for": "90s"}}}`, []FieldError{
			{Field: `overrides["payment.Charge"].open_for`, Problem: "1m30s is above max_open_for (1m0s); lower it, or set max_open_for to at least 1m30s"}}},
		{"both", `{"default": {"open_for": "5m", "max_open_for": "2m"}}`, []FieldError{
			{Field: "default.max_open_for", Problem: "must be at least open_for (5m0s), got 2m0s"}}},
		{"max_open_for alone", `{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`, []FieldError{
			{Field: `overrides["payment.Charge"].max_open_for`, Problem: "must be at least open_for (30s), got 10s"}}},
		{"open_for invalid on its own", `{"default": {"open_for": "25h"}}`, []FieldError{
			{Field: "default.open_for", Problem: "must be at most 24h0m0s, got 25h0m0s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGroupPolicy([]byte(tc.doc))
			var pe *PolicyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.want, pe.Problems)
		})
	}

	_, err := ParsePolicy([]byte(`{"open_for": "5m"}`))
	assert.EqualError(t, err, "breaker: invalid policy: open_for: 5m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 5m0s")
	p := DefaultPolicy()
	p.MaxOpenFor = time.Minute
	assert.EqualError(t, p.UnmarshalJSON([]byte(`{"open_for": "90s"}`)), "breaker: invalid policy: open_for: 1m30s is above max_open_for (1m0s); lower it, or set max_open_for to at least 1m30s")
	p.OpenFor = 5 * time.Minute
	assert.EqualError(t, p.Validate(), "breaker: invalid policy: max_open_for: must be at least open_for (5m0s), got 1m0s")
}
