package live_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON Schema of docs/live-policies.md is checked against the code
// and the documentation: its properties are exactly the JSON fields of
// breaker.Policy (nested objects included) and of the group document,
// each policy field's default is DefaultPolicy's, and every example
// document of docs/ and the README decodes with the strict decoder and
// fits the schema. The schema lacked throttle, and so refused the
// throttle policy of docs/policy.md.
func TestSchema_CoversEveryFieldAndTheDocumentedExamples(t *testing.T) {
	schema := docSchema(t)
	defs := schema["$defs"].(map[string]any)

	// The group document.
	assert.Equal(t, jsonFields(reflect.TypeOf(breaker.GroupPolicy{})), propertyNames(t, schema), "the document's properties")
	assert.Equal(t, false, schema["additionalProperties"])
	cand := schema["properties"].(map[string]any)["candidate"].(map[string]any)
	var candObject map[string]any
	for _, alt := range cand["oneOf"].([]any) {
		if m := alt.(map[string]any); m["type"] == "object" {
			candObject = m
		}
	}
	require.NotNil(t, candObject, "the candidate's object form")
	assert.Equal(t, []string{"default", "overrides"}, propertyNames(t, candObject), "a candidate has no candidate")

	// Every policy field, nested ones through their $ref, with its default.
	policy := defs["policy"].(map[string]any)
	defaults := map[string]any{}
	data, err := json.Marshal(breaker.DefaultPolicy())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &defaults))
	checkObjectSchema(t, schema, "policy", policy, reflect.TypeOf(breaker.Policy{}), defaults)

	// The examples.
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../README.md")
	seen := map[string]int{}
	for _, file := range files {
		for _, ex := range jsonBlocks(t, file) {
			var doc map[string]any
			if json.Unmarshal([]byte(ex.text), &doc) != nil {
				continue // not one object: a record list, an array
			}
			where := fmt.Sprintf("%s:%d", file, ex.line)
			switch {
			case keysWithin(doc, jsonFields(reflect.TypeOf(breaker.GroupPolicy{}))):
				_, err := breaker.ParseGroupPolicy([]byte(ex.text))
				assert.NoError(t, err, "%s: a group document the decoder refuses", where)
				assert.NoError(t, validate(schema, schema, doc, "(document)"), "%s: a group document the schema refuses", where)
				seen["group"]++
			case keysWithin(doc, jsonFields(reflect.TypeOf(breaker.Policy{}))):
				_, err := breaker.ParsePolicy([]byte(ex.text))
				assert.NoError(t, err, "%s: a policy the decoder refuses", where)
				assert.NoError(t, validate(schema, policy, doc, "(policy)"), "%s: a policy the schema refuses", where)
				if _, ok := doc["throttle"]; ok {
					seen["throttle"]++
				}
			}
		}
	}
	assert.GreaterOrEqual(t, seen["group"], 3, "the group documents of live-policies.md, groups.md, migrating.md")
	assert.GreaterOrEqual(t, seen["throttle"], 1, "the throttle policy of policy.md")

	// The checker refuses what the schema refuses.
	for _, bad := range []string{
		`{"default": {"throtle": {}}}`,
		`{"default": {"throttle": {"enabled": "yes"}}}`,
		`{"default": {"throttle": {"k": 11}}}`,
		`{"default": {"open_for": "soon"}}`,
		`{"overrides": {"": {}}}`,
		`{"candidate": {"candidate": {}}}`,
		`{"defaults": {}}`,
	} {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(bad), &doc))
		assert.Error(t, validate(schema, schema, doc, "(document)"), bad)
	}
}

// checkObjectSchema checks that the object schema s, at name, has a
// property for each JSON field of typ and no other, refuses other ones,
// and gives each field its default from defaults; a field of struct type
// is checked through its $ref.
func checkObjectSchema(t *testing.T, root map[string]any, name string, s map[string]any, typ reflect.Type, defaults map[string]any) {
	t.Helper()
	assert.Equal(t, jsonFields(typ), propertyNames(t, s), "the properties of %s", name)
	assert.Equal(t, false, s["additionalProperties"], "%s refuses unknown fields", name)
	props := s["properties"].(map[string]any)
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		prop, ok := props[tag].(map[string]any)
		if !ok {
			continue // reported above
		}
		if f.Type.Kind() == reflect.Struct {
			ref, _ := prop["$ref"].(string)
			sub, err := resolve(root, ref)
			if assert.NoError(t, err, "%s.%s", name, tag) {
				nested, _ := defaults[tag].(map[string]any)
				checkObjectSchema(t, root, name+"."+tag, sub, f.Type, nested)
			}
			continue
		}
		assert.Equal(t, defaults[tag], prop["default"], "the default of %s.%s", name, tag)
	}
}

// docSchema is the JSON Schema under "The document's schema" in
// docs/live-policies.md.
func docSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../docs/live-policies.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(data), "\n## The document's schema\n")
	require.True(t, ok, "the schema's section")
	_, after, ok = strings.Cut(after, "```json\n")
	require.True(t, ok, "the schema's block")
	text, _, ok := strings.Cut(after, "\n```")
	require.True(t, ok)
	var schema map[string]any
	require.NoError(t, json.Unmarshal([]byte(text), &schema))
	return schema
}

type jsonBlock struct {
	line int
	text string
}

// jsonBlocks returns the fenced json blocks of a Markdown file, without
// the indent of a block in a list item.
func jsonBlocks(t *testing.T, file string) []jsonBlock {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []jsonBlock
	var cur *jsonBlock
	indent := ""
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && trimmed == "```json":
			cur, indent = &jsonBlock{line: i + 1}, line[:len(line)-len(trimmed)]
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// jsonFields lists the JSON names of a struct's fields, sorted.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	sort.Strings(out)
	return out
}

func propertyNames(t *testing.T, s map[string]any) []string {
	t.Helper()
	props, ok := s["properties"].(map[string]any)
	require.True(t, ok, "an object schema with properties")
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func keysWithin(doc map[string]any, names []string) bool {
	for k := range doc {
		if !contains(names, k) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func resolve(root map[string]any, ref string) (map[string]any, error) {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not to #/$defs/", ref)
	}
	s, ok := root["$defs"].(map[string]any)[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q: no such definition", ref)
	}
	return s, nil
}

// schemaKeywords are the keywords validate knows: a schema using another
// is an error, so that no constraint is skipped unseen.
var schemaKeywords = map[string]bool{
	"$schema": true, "$id": true, "$defs": true, "title": true, "description": true, "default": true,
	"$ref": true, "type": true, "properties": true, "additionalProperties": true, "oneOf": true,
	"propertyNames": true, "minLength": true, "minimum": true, "maximum": true, "exclusiveMaximum": true,
	"pattern": true,
}

// validate checks v against the schema s, for the keywords the page's
// schema uses (schemaKeywords): not a full JSON Schema validator.
func validate(root, s map[string]any, v any, at string) error {
	for k := range s {
		if !schemaKeywords[k] {
			return fmt.Errorf("%s: schema keyword %q is not checked", at, k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		sub, err := resolve(root, ref)
		if err != nil {
			return err
		}
		if err := validate(root, sub, v, at); err != nil {
			return err
		}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, alt := range alts {
			if validate(root, alt.(map[string]any), v, at) == nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: fits %d of the oneOf alternatives, want 1", at, n)
		}
	}
	if typ, ok := s["type"].(string); ok && !hasType(v, typ) {
		return fmt.Errorf("%s: want %s, got %v", at, typ, v)
	}
	if str, ok := v.(string); ok {
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", at, str, p)
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(str))) < n {
			return fmt.Errorf("%s: %q is shorter than %v", at, str, n)
		}
	}
	if x, ok := v.(float64); ok {
		if m, ok := s["minimum"].(float64); ok && x < m {
			return fmt.Errorf("%s: %v is below %v", at, x, m)
		}
		if m, ok := s["maximum"].(float64); ok && x > m {
			return fmt.Errorf("%s: %v is above %v", at, x, m)
		}
		if m, ok := s["exclusiveMaximum"].(float64); ok && x >= m {
			return fmt.Errorf("%s: %v is not below %v", at, x, m)
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if pn, ok := s["propertyNames"].(map[string]any); ok {
			if err := validate(root, pn, k, at+" key "+k); err != nil {
				return err
			}
		}
		sub := at + "." + k
		if p, ok := props[k].(map[string]any); ok {
			if err := validate(root, p, obj[k], sub); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fmt.Errorf("%s: not a property of the schema", sub)
			}
		case map[string]any:
			if err := validate(root, ap, obj[k], sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		x, ok := v.(float64)
		return ok && x == math.Trunc(x)
	}
	return false
}
