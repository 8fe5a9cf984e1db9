package breaker

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/govkit/breaker/internal/jsondoc"
)

// MarshalJSON writes every field, in the order of the struct, durations
// as strings such as "5s", so that the document says exactly what the
// breaker does. AdaptiveTimeout and Throttle are nested objects.
func (p Policy) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 360), '{')
	group := "" // the nested object being written, if any
	for i, f := range policyFields {
		g, name, nested := strings.Cut(f.name, ".")
		if !nested {
			g, name = "", f.name
		}
		switch {
		case g == group && i > 0:
			b = append(b, ',')
		case g != group: // leaving a nested object, entering one, or both
			if group != "" {
				b = append(b, '}')
			}
			if i > 0 {
				b = append(b, ',')
			}
			if g != "" { // the plain words of policyFields need no escaping
				b = append(b, '"')
				b = append(b, g...)
				b = append(b, '"', ':', '{')
			}
		}
		group = g
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		v := f.at(&p)
		if d, ok := v.(*time.Duration); ok {
			v = d.String()
		}
		// encoding/json writes each value as it would as a struct member
		// (floats included), and refuses NaN and ±Inf the same way.
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(b, enc...)
	}
	if group != "" {
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes a policy document strictly onto p and validates
// the result: fields the document does not name keep their values, and
// unknown fields, fields named twice, values of the wrong type and an
// invalid result are errors (a *[PolicyError]) naming each field. On error
// p is unchanged. [ParsePolicy] is the same decoding onto [DefaultPolicy].
func (p *Policy) UnmarshalJSON(data []byte) error {
	q := *p
	if problems := decodePolicyInto(&q, data, ""); len(problems) > 0 {
		return policyError(problems)
	}
	*p = q
	return nil
}

// ParsePolicy decodes a JSON policy document onto [DefaultPolicy] and
// validates the result. A field the document leaves out keeps its default.
// The error, if any, is a *[PolicyError] naming every bad field.
func ParsePolicy(data []byte) (Policy, error) {
	p := DefaultPolicy()
	if err := p.UnmarshalJSON(data); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// decodePolicyInto is the building block for documents that nest policies
// (a group's per-key overrides): it decodes data onto p, prefixing every
// field name in the problems it reports with prefix, and validates the
// result. It returns the problems instead of an error so that a caller can
// gather every problem of a whole document before refusing it; p is changed
// only when there are none.
func decodePolicyInto(p *Policy, data []byte, prefix string) []jsondoc.Problem {
	var v validator
	q := *p
	q.decode(&v, data, prefix)
	if len(v.List) == 0 {
		q.checkDocument(&v, prefix, data)
	}
	if len(v.List) == 0 {
		*p = q
	}
	return v.List
}

// decode overlays the fields named in data onto p, recording a problem for
// each unknown field, each field named twice, and each value that does not
// fit its field.
func (p *Policy) decode(v *validator, data []byte, prefix string) {
	where := strings.TrimSuffix(prefix, ".")
	if where == "" {
		where = "(document)"
	}
	fields := jsondoc.Members(v, data, where, "a JSON object of policy fields",
		func(name string) string { return prefix + jsondoc.FieldName(name) })
	for _, name := range sortedKeys(fields) { // report problems in a stable order
		raw := fields[name]
		field := prefix + jsondoc.FieldName(name)
		if name == "adaptive_timeout" || name == "throttle" {
			p.decodeNested(v, raw, name, field)
			continue
		}
		f, ok := policyFieldNamed(name)
		if !ok {
			if to, ok := renamedPolicyFields[name]; ok {
				v.Add(field, "was renamed %s", to)
			} else {
				v.Add(field, "unknown field")
			}
			continue
		}
		p.decodeField(v, f, field, raw)
	}
}

// renamedPolicyFields maps the names policy documents used before the
// first release to the names that replaced them, so that an old document
// is refused with the new name rather than "unknown field".
var renamedPolicyFields = map[string]string{
	"timeout":          "call_timeout",
	"timeout_quantile": "adaptive_timeout.quantile",
	"timeout_factor":   "adaptive_timeout.factor",
	"timeout_base":     "adaptive_timeout.base",
	"timeout_min":      "adaptive_timeout.min",
	"timeout_max":      "adaptive_timeout.max",
}

// decodeNested overlays the members of the nested object group (at path
// field) onto p's fields named group.member.
func (p *Policy) decodeNested(v *validator, raw json.RawMessage, group, field string) {
	if t := string(bytes.TrimSpace(raw)); t == "true" || t == "false" {
		example := `"max": "2s"`
		if group == "throttle" {
			example = `"k": 2`
		}
		v.Add(field, `want a JSON object such as {"enabled": %s, %s}, got %s (the flag is %s.enabled)`, t, example, t, group)
		return
	}
	members := jsondoc.Members(v, raw, field, "a JSON object of "+group+" fields",
		func(name string) string { return field + "." + jsondoc.FieldName(name) })
	for _, name := range sortedKeys(members) {
		sub := field + "." + jsondoc.FieldName(name)
		f, ok := policyFieldNamed(group + "." + name)
		if !ok {
			v.Add(sub, "unknown field")
			continue
		}
		p.decodeField(v, f, sub, members[name])
	}
}

// decodeField decodes raw, the value of f at path field, onto p.
func (p *Policy) decodeField(v *validator, f policyField, field string, raw json.RawMessage) {
	switch dst := f.at(p).(type) { // defaultPolicy has made sure there is no other
	case *time.Duration:
		jsondoc.Duration(v, field, raw, dst)
	case *int:
		jsondoc.Int(v, field, raw, dst)
	case *float64:
		jsondoc.Float(v, field, raw, dst)
	case *bool:
		jsondoc.Bool(v, field, raw, dst)
	}
}

// policyFieldNamed returns the field of Policy whose JSON name is name.
func policyFieldNamed(name string) (policyField, bool) {
	for _, f := range policyFields {
		if f.name == name {
			return f, true
		}
	}
	return policyField{}, false
}
