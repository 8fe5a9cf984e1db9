package breaker

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
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
	assert.Equal(t, time.Duration(0), p.Timeout)
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
		p.Timeout = 800 * time.Millisecond
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
	p, err := ParsePolicy([]byte(`{"jitter": 0, "warmup": "0s", "timeout": "0s"}`))
	require.NoError(t, err)
	assert.Zero(t, p.Jitter)
	assert.Zero(t, p.Warmup)
	assert.Zero(t, p.Timeout)
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
		{"buckets", func(p *Policy) { p.Buckets = MaxBuckets + 1 }},
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
		{"timeout", func(p *Policy) { p.Timeout = -time.Second }},
		{"open_for", func(p *Policy) { p.OpenFor = 0 }},
		{"max_open_for", func(p *Policy) { p.MaxOpenFor = 10 * time.Second }},
		{"jitter", func(p *Policy) { p.Jitter = 1 }},
		{"jitter", func(p *Policy) { p.Jitter = -0.1 }},
		{"jitter", func(p *Policy) { p.Jitter = math.NaN() }},
		{"probes", func(p *Policy) { p.Probes = 0 }},
		{"probes", func(p *Policy) { p.Probes = MaxProbes + 1 }},
		{"warmup", func(p *Policy) { p.Warmup = -time.Second }},
		{"warmup", func(p *Policy) { p.Warmup = 25 * time.Hour }},
		{"timeout", func(p *Policy) { p.Timeout = 25 * time.Hour }},
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
	assert.NoError(t, policy(func(p *Policy) { p.OpenFor = MaxDuration; p.MaxOpenFor = MaxDuration }).Validate())
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
// it and its default has its type; a non-default valid value survives
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
		p.Timeout = 2 * time.Second
		p.AdaptiveTimeout = true
		p.TimeoutBase = 10 * time.Millisecond
		p.TimeoutMin = 100 * time.Millisecond
		p.TimeoutMax = 5 * time.Second
	})
	require.NoError(t, base.Validate())

	rt := reflect.TypeOf(Policy{})
	var names []string
	for i := range rt.NumField() {
		sf := rt.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		require.NotEmpty(t, name, "Policy.%s has no JSON tag", sf.Name)
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			require.Less(t, i, len(policyFields), "Policy.%s is not in policyFields", sf.Name)
			f := policyFields[i]
			require.Equal(t, name, f.name, "Policy.%s is not at position %d of policyFields", sf.Name, i)

			var p Policy
			at := reflect.ValueOf(f.at(&p))
			require.Equal(t, reflect.PointerTo(sf.Type), at.Type(), "accessor of %s", name)
			require.Equal(t, reflect.ValueOf(&p).Elem().Field(i).Addr().Pointer(), at.Pointer(),
				"the accessor of %s points at another field", name)
			require.Equal(t, sf.Type, reflect.TypeOf(f.def), "type of the default of %s", name)
			assert.Equal(t, f.def, reflect.ValueOf(DefaultPolicy()).Field(i).Interface(), "DefaultPolicy().%s", sf.Name)

			// Round trip of a non-default valid value.
			q := base
			field := reflect.ValueOf(&q).Elem().Field(i)
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
			var members map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(data, &members))
			onBase := base
			require.NoError(t, json.Unmarshal([]byte(`{"`+name+`": `+string(members[name])+`}`), &onBase))
			assert.Equal(t, q, onBase, "decoding %s alone", name)

			// A bad value in a Policy. Every bool is valid; a bool field's
			// bad values are only in documents, below.
			q = base
			field = reflect.ValueOf(&q).Elem().Field(i)
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
	assert.Equal(t, rt.NumField(), len(policyFields), "policyFields does not list the fields of Policy one for one")

	// The encoded form has exactly the table's fields, in its order.
	data, err := json.Marshal(base)
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var keys []string
	_, err = dec.Token()
	require.NoError(t, err)
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	assert.Equal(t, names, keys, "%s", data)

	// A bad value in a document, alone or nested in a group's override, is
	// a problem of that field alone; so is a field named twice.
	for _, name := range names {
		for _, c := range []struct{ doc, problem string }{
			{`{"` + name + `": null}`, "want "},
			{`{"` + name + `": {}}`, "want "},
			{`{"` + name + `": null, "` + name + `": null}`, "duplicate key"},
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
