package breaker

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/govkit/breaker/internal/jsondoc"
)

// FieldError is one problem with one field of a policy document or value.
type FieldError struct {
	// Field is the JSON name of the field, prefixed by its path in the
	// document when the policy was nested (`overrides["orders.Create"].window`),
	// or "(document)" for a problem with the document as a whole. A name or
	// key that is not a plain word is quoted, and cut short if it is long.
	Field string `json:"field"`
	// Problem says what is wrong, in words.
	Problem string `json:"problem"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Problem }

// PolicyError reports every problem found in a policy. Nothing of a policy
// that produced a PolicyError has been applied.
type PolicyError struct {
	Problems []FieldError
}

// maxListed is how many problems the message of a PolicyError lists. A
// policy value has at most one problem a field, but a document can have
// any number (a thousand unknown fields), and a message that grows with
// the document has no place in a log line.
const maxListed = 20

func (e *PolicyError) Error() string {
	var sb strings.Builder
	sb.WriteString("breaker: invalid policy: ")
	for i, p := range e.Problems {
		if i == maxListed {
			sb.WriteString("; and " + strconv.Itoa(len(e.Problems)-i) + " more problems")
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p.Error())
	}
	return sb.String()
}

// Validate reports every invalid field of p by its JSON name, or nil.
// The returned error is a *[PolicyError].
func (p Policy) Validate() error {
	var v validator
	p.check(&v, "")
	return policyError(v.List)
}

// validator gathers the problems of a policy value or document.
type validator = jsondoc.Problems

// policyError is the *PolicyError of problems, or nil if there are none.
func policyError(problems []jsondoc.Problem) error {
	if len(problems) == 0 {
		return nil
	}
	e := &PolicyError{Problems: make([]FieldError, len(problems))}
	for i, p := range problems {
		e.Problems[i] = FieldError(p)
	}
	return e
}

// check records a problem for each invalid field of p, its name prefixed
// with prefix.
func (p Policy) check(v *validator, prefix string) { p.checkSet(v, prefix, nil) }

// checkDocument is check for p decoded from data, a policy document that
// sets some of p's fields: a rule between two fields that the document
// breaks by setting one of them is reported at the one it set (see
// pairRule), so that the problem names the field the user edited.
func (p Policy) checkDocument(v *validator, prefix string, data []byte) {
	var set map[string]bool
	p.checkSet(v, prefix, func() map[string]bool {
		if set == nil { // read only for a broken pair rule
			set = documentFields(data)
		}
		return set
	})
}

// checkSet is check, where fields, if not nil, returns the names of the
// fields a document sets.
func (p Policy) checkSet(v *validator, prefix string, fields func() map[string]bool) {
	for _, f := range policyFields {
		if f.check == nil {
			continue
		}
		problem := f.check(&p)
		if problem == "" {
			continue
		}
		field := f.name
		if r := f.pair; r != nil && fields != nil && !fields()[f.name] && fields()[r.other] {
			if there := r.problem(&p); there != "" {
				field, problem = r.other, there
			} else if o, _ := policyFieldNamed(r.other); o.check != nil && o.check(&p) != "" {
				continue // the other field's own problem says it all
			}
		}
		v.List = append(v.List, jsondoc.Problem{Field: prefix + field, Problem: problem})
	}
}

// documentFields returns the names of the fields a policy document sets,
// a nested object's as its path ("throttle.k"), or an empty set if data
// is not a JSON object.
func documentFields(data []byte) map[string]bool {
	set := map[string]bool{}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return set
	}
	for name, raw := range top {
		set[name] = true
		var nested map[string]json.RawMessage
		if json.Unmarshal(raw, &nested) == nil {
			for sub := range nested {
				set[name+"."+sub] = true
			}
		}
	}
	return set
}
