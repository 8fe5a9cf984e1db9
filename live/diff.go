package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/jsondoc"
)

// samePolicies reports whether two documents give every key the same
// policy and the same candidate, with the same override keys.
func samePolicies(a, b breaker.GroupPolicy) bool {
	if a.Default != b.Default || len(a.Overrides) != len(b.Overrides) {
		return false
	}
	for k, p := range a.Overrides {
		if q, ok := b.Overrides[k]; !ok || p != q {
			return false
		}
	}
	if a.Candidate == nil || b.Candidate == nil {
		return a.Candidate == nil && b.Candidate == nil
	}
	return samePolicies(*a.Candidate, *b.Candidate)
}

// diffPolicies lists the fields that differ between two documents, key by
// key: the default, then each override key of either, sorted, then the
// same for their candidates. A candidate that was not there runs what the
// document runs, so one that comes lists the fields in which it differs
// from its document, from the value in force, and one that goes the
// fields in which it differed, to "".
func diffPolicies(old, new breaker.GroupPolicy) []FieldChange {
	var out []FieldChange
	diffDoc(&out, "", old, new, false)
	switch oc, nc := old.Candidate, new.Candidate; {
	case oc != nil && nc != nil:
		diffDoc(&out, "candidate.", *oc, *nc, false)
	case nc != nil:
		diffDoc(&out, "candidate.", new, *nc, false)
	case oc != nil:
		diffDoc(&out, "candidate.", old, *oc, true)
	}
	return out
}

// diffDoc lists the fields in which b differs from a, key by key; gone
// lists them as b's values going, to "".
func diffDoc(out *[]FieldChange, prefix string, a, b breaker.GroupPolicy, gone bool) {
	keys := map[string]bool{}
	for k := range a.Overrides {
		keys[k] = true
	}
	for k := range b.Overrides {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	diffPolicy(out, "default", prefix+"default.", a.Default, b.Default, gone)
	for _, k := range sorted {
		p, ok := a.Overrides[k]
		if !ok {
			p = a.Default
		}
		q, ok := b.Overrides[k]
		if !ok {
			q = b.Default
		}
		diffPolicy(out, k, prefix+"overrides["+jsondoc.QuoteKey(k)+"].", p, q, gone)
	}
}

func diffPolicy(out *[]FieldChange, key, prefix string, a, b breaker.Policy, gone bool) {
	if a == b {
		return
	}
	from, to := fieldTexts(a), fieldTexts(b)
	for i := range from {
		f, t := from[i].text, to[i].text
		if f == t {
			continue
		}
		if gone {
			f, t = t, ""
		}
		*out = append(*out, FieldChange{Key: key, Path: prefix + from[i].name, Field: from[i].name, From: f, To: t})
	}
}

// fieldText is one field of a policy, written as a document writes it.
type fieldText struct{ name, text string }

// fieldTexts lists the fields of p in their order, each value as
// [breaker.Policy.MarshalJSON] writes it, without the quotes of a
// duration: "30s", 0.5, 20, true. A field of a nested object is named by
// its path, "adaptive_timeout.max", as the problems of a document name it.
func fieldTexts(p breaker.Policy) []fieldText {
	data, err := p.MarshalJSON()
	if err != nil {
		return nil // only a NaN or an infinity, which no valid policy has
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return nil
	}
	var out []fieldText
	objectTexts(dec, "", &out)
	return out
}

// objectTexts appends the members of the object dec is in, up to and
// including its closing brace, to out, each name prefixed with prefix.
func objectTexts(dec *json.Decoder, prefix string, out *[]fieldText) {
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return
		}
		v, err := dec.Token()
		if err != nil {
			return
		}
		name, _ := k.(string)
		var text string
		switch v := v.(type) {
		case json.Delim: // a nested object: MarshalJSON writes no array
			objectTexts(dec, prefix+name+".", out)
			continue
		case string:
			text = v
		case json.Number:
			text = v.String()
		default:
			text = fmt.Sprint(v)
		}
		*out = append(*out, fieldText{prefix + name, text})
	}
	_, _ = dec.Token() // }
}
