package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"
)

// OriginCode is the origin of a policy set by code: given to [NewGroup],
// or to [Group.SetPolicies] or [Group.LoadPolicies].
const OriginCode = "code"

// PolicyResult is what became of one document a [PolicySource]
// delivered.
type PolicyResult uint8

const (
	// PolicyApplied: the document was valid and is in force.
	PolicyApplied PolicyResult = iota + 1
	// PolicyRejected: the document was invalid; the policy in force
	// stays, and the record lists every problem by path.
	PolicyRejected
	// PolicyGone: the document no longer exists at its origin (a deleted
	// file or key); the policy in force stays.
	PolicyGone
	// PolicyUnreadable: the source could not read the document; the
	// policy in force stays.
	PolicyUnreadable
	// PolicyUnchanged: the document was the version in force, delivered
	// again: the same origin, version and content (a file put back as it
	// was after a refused edit, say). Nothing is applied, and the version
	// in force keeps its record: when it was applied and what it changed.
	PolicyUnchanged
)

var policyResults = [...]string{PolicyApplied: "applied", PolicyRejected: "rejected", PolicyGone: "gone",
	PolicyUnreadable: "unreadable", PolicyUnchanged: "unchanged"}

func (r PolicyResult) String() string {
	if int(r) < len(policyResults) && policyResults[r] != "" {
		return policyResults[r]
	}
	return "result(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText writes the result's name.
func (r PolicyResult) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a result's name.
func (r *PolicyResult) UnmarshalText(b []byte) error {
	for i, s := range policyResults {
		if s != "" && s == string(b) {
			*r = PolicyResult(i)
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown policy result %s", quoteKey(string(b)))
}

// A PolicyChange is the record of one document a followed source
// delivered (see [Group.Follow]): what it was, and what became of it.
// Every document ends in exactly one record, which goes to the
// subscribers of [Group.SubscribePolicy], to the group's logger (or
// [slog.Default] if it has none), and into the counts of
// [Group.PolicyStatus]. With slog's text handler (which quotes a key
// holding a quote):
//
//	level=INFO msg="breaker policy applied" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.changes.default.min_requests="20 → 10"
//	level=ERROR msg="breaker policy rejected" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:7f83b1657ff1fc53 breaker.in_force=sha256:5d41402abc4b2a76 "breaker.problems.overrides[\"payment.Charge\"].max_open_for"="must be at least open_for (30s), got 10s"
//	level=WARN msg="breaker policy gone" breaker.origin=file:/etc/app/breakers.json breaker.in_force=sha256:5d41402abc4b2a76
//
// A rejection is logged at Error, a document gone or unreadable at Warn,
// an applied one at Info, and an unchanged one at Debug (it changes
// nothing, and a source may deliver the same document again):
//
//	level=DEBUG msg="breaker policy unchanged" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.in_force=sha256:5d41402abc4b2a76
type PolicyChange struct {
	Origin  string       `json:"origin"`
	Version string       `json:"version"`
	Result  PolicyResult `json:"result"`
	// Time is when the document was dealt with, on the group's clock.
	Time time.Time `json:"time"`
	// InForce is the version in force afterwards: Version if the
	// document was applied, the one before otherwise.
	InForce string `json:"in_force"`
	// Changes lists, for an applied document, every field whose value
	// changed, key by key; it is empty if the document says what the
	// policy in force said.
	Changes []PolicyFieldChange `json:"changes,omitempty"`
	// Problems lists, for a rejected document, every problem by path.
	Problems []FieldError `json:"problems,omitempty"`
	// Err is the source's error, for an unreadable document.
	Err string `json:"error,omitempty"`
}

// PolicyFieldChange is one field of one key whose value a document
// changed. The value of a key without an override of its own is the
// default's, so adding or removing an override shows as the fields in
// which it differs from the default.
type PolicyFieldChange struct {
	// Key is "default" or an override's key; Path is the field's path in
	// the document, such as overrides["payment.Charge"].open_for.
	Key   string `json:"key"`
	Path  string `json:"path"`
	Field string `json:"field"`
	// From and To are the values before and after, as the document
	// writes them ("30s", 0.5, 20). A field of a candidate has a Path
	// that starts with "candidate.", and "" stands for a candidate that
	// was not there, or is no longer.
	From string `json:"from"`
	To   string `json:"to"`
}

// PolicyReloads counts the documents a group's followed sources have
// delivered, by what became of them.
type PolicyReloads struct {
	Applied    uint64 `json:"applied"`
	Rejected   uint64 `json:"rejected"`
	Gone       uint64 `json:"gone"`
	Unreadable uint64 `json:"unreadable"`
	Unchanged  uint64 `json:"unchanged"`
}

// PolicyStatus says which policy a group applies and where it came from,
// so that an operator can confirm within seconds that a change is live.
type PolicyStatus struct {
	// Origin and Version identify the document in force: the origin and
	// version of the last document applied, or [OriginCode] and "" for a
	// policy set by code.
	Origin  string `json:"origin"`
	Version string `json:"version"`
	// AppliedAt is when it was applied, on the group's clock.
	AppliedAt time.Time `json:"applied_at"`
	// Changes is what applying it changed (see [PolicyChange.Changes]);
	// a document delivered since that changed nothing
	// ([PolicyUnchanged]) leaves it.
	Changes []PolicyFieldChange `json:"changes"`
	// UnusedOverrides are the override keys no breaker has used yet, as
	// [Group.UnusedOverrides] lists them: a typo, or a downstream not
	// called yet.
	UnusedOverrides []string `json:"unused_overrides,omitempty"`
	// Following is the origin of the source the group follows now, or
	// empty if it follows none.
	Following string `json:"following,omitempty"`
	// Reloads counts the documents delivered, by result.
	Reloads PolicyReloads `json:"reloads"`
	// Last is the record of the last document delivered, whatever became
	// of it: a rejected or gone document shows here while the version in
	// force stays.
	Last *PolicyChange `json:"last,omitempty"`
	// Candidate is the version of the document whose candidate the
	// group's breakers run in shadow, and how many run one; nil without a
	// candidate (see [GroupPolicy.Candidate]).
	Candidate *CandidateInfo `json:"candidate,omitempty"`
}

// PolicyStatus returns where the group's policy in force comes from, the
// counts of documents delivered, and the last record. It takes no lock a
// call needs.
func (g *Group) PolicyStatus() PolicyStatus {
	g.pmu.Lock()
	ps := g.pstate
	following := ""
	if g.follower != nil {
		following = g.follower.Origin()
	}
	g.pmu.Unlock()
	st := PolicyStatus{
		Origin:    ps.origin,
		Version:   ps.version,
		AppliedAt: g.opt.tb.time(ps.appliedAt),
		Changes:   append([]PolicyFieldChange{}, ps.changes...),
		Following: following,
		Reloads:   ps.reloads,
	}
	if ps.last != nil {
		last := *ps.last
		st.Last = &last
	}
	st.UnusedOverrides = g.UnusedOverrides()
	st.Candidate = g.candidateInfo()
	return st
}

// applyDocument deals with one delivered document and returns its record,
// after it has gone to the subscribers and the log.
func (g *Group) applyDocument(doc PolicyDocument) PolicyChange {
	g.pmu.Lock()
	rec := PolicyChange{Origin: doc.Origin, Version: doc.Version}
	var unused []string
	switch {
	case doc.Err != nil:
		rec.Result = PolicyUnreadable
		rec.Err = doc.Err.Error()
		g.pstate.reloads.Unreadable++
	case doc.Gone:
		rec.Result = PolicyGone
		g.pstate.reloads.Gone++
	default:
		gp, err := ParseGroupPolicy(doc.Data)
		var gr *groupRules
		if err == nil {
			gr, err = compileGroup(gp)
		}
		if err != nil {
			rec.Result = PolicyRejected
			rec.Problems = documentProblems(err)
			g.pstate.reloads.Rejected++
			break
		}
		old := g.rules.Load().doc
		if doc.Origin == g.pstate.origin && doc.Version == g.pstate.version && samePolicies(old, gr.doc) {
			// Nothing to apply, and nothing the record of the version in
			// force should lose.
			rec.Result = PolicyUnchanged
			g.pstate.reloads.Unchanged++
			break
		}
		rec.Result = PolicyApplied
		gr.version = doc.Version
		rec.Changes = diffPolicies(old, gr.doc)
		unused = g.setRules(gr)
		g.pstate.reloads.Applied++
		g.pstate.origin, g.pstate.version = doc.Origin, doc.Version
		g.pstate.appliedAt = g.opt.tb.now()
		g.pstate.changes = rec.Changes
	}
	rec.Time = g.Now()
	rec.InForce = g.pstate.version
	last := rec
	g.pstate.last = &last
	g.pmu.Unlock()

	l := g.auditLogger()
	logPolicyChange(l, rec)
	logUnused(g.opt.logger, unused)
	g.dispatchPolicy(rec)
	return rec
}

// auditLogger is where policy records go: the group's logger, or the
// default one. A change of policy is never silent.
func (g *Group) auditLogger() *slog.Logger {
	if g.opt.logger != nil {
		return g.opt.logger
	}
	return slog.Default()
}

// documentProblems lists the problems of a refused document.
func documentProblems(err error) []FieldError {
	var pe *PolicyError
	if errors.As(err, &pe) {
		return append([]FieldError(nil), pe.Problems...)
	}
	return []FieldError{{Field: "(document)", Problem: err.Error()}}
}

// samePolicies reports whether two documents give every key the same
// policy and the same candidate, with the same override keys.
func samePolicies(a, b GroupPolicy) bool {
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
// same for their candidates.
func diffPolicies(old, new GroupPolicy) []PolicyFieldChange {
	var out []PolicyFieldChange
	diffDoc(&out, "", old, new, false, false)
	oc, nc := old.Candidate, new.Candidate
	if oc != nil || nc != nil {
		var o, n GroupPolicy
		if oc != nil {
			o = *oc
		}
		if nc != nil {
			n = *nc
		}
		diffDoc(&out, "candidate.", o, n, oc == nil, nc == nil)
	}
	return out
}

func diffDoc(out *[]PolicyFieldChange, prefix string, old, new GroupPolicy, oldNone, newNone bool) {
	keys := map[string]bool{}
	for k := range old.Overrides {
		keys[k] = true
	}
	for k := range new.Overrides {
		keys[k] = true
	}
	diffPolicy(out, "default", prefix+"default.", old.Default, new.Default, oldNone, newNone)
	for _, k := range sortedKeys(keys) {
		o, ok := old.Overrides[k]
		if !ok {
			o = old.Default
		}
		n, ok := new.Overrides[k]
		if !ok {
			n = new.Default
		}
		diffPolicy(out, k, prefix+overridePath(k), o, n, oldNone, newNone)
	}
}

func diffPolicy(out *[]PolicyFieldChange, key, prefix string, old, new Policy, oldNone, newNone bool) {
	for _, f := range policyFields {
		from, to := fieldText(f, &old), fieldText(f, &new)
		if oldNone {
			from = ""
		}
		if newNone {
			to = ""
		}
		if from != to {
			*out = append(*out, PolicyFieldChange{Key: key, Path: prefix + f.name, Field: f.name, From: from, To: to})
		}
	}
}

// fieldText writes a field's value as a document does.
func fieldText(f policyField, p *Policy) string {
	switch v := f.at(p).(type) {
	case *time.Duration:
		return v.String()
	case *int:
		return strconv.Itoa(*v)
	case *float64:
		return strconv.FormatFloat(*v, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*v)
	}
	return fmt.Sprint(f.at(p))
}

func logPolicyChange(l *slog.Logger, rec PolicyChange) {
	attrs := []slog.Attr{slog.String("origin", rec.Origin)}
	if rec.Version != "" {
		attrs = append(attrs, slog.String("version", rec.Version))
	}
	level, msg := slog.LevelInfo, "breaker policy applied"
	switch rec.Result {
	case PolicyApplied:
		ch := make([]slog.Attr, 0, len(rec.Changes))
		for _, c := range rec.Changes {
			ch = append(ch, slog.String(c.Path, c.From+" → "+c.To))
		}
		if len(ch) == 0 {
			attrs = append(attrs, slog.String("changes", "none"))
		} else {
			attrs = append(attrs, slog.Attr{Key: "changes", Value: slog.GroupValue(ch...)})
		}
	case PolicyRejected:
		level, msg = slog.LevelError, "breaker policy rejected"
		attrs = append(attrs, slog.String("in_force", rec.InForce))
		pr := make([]slog.Attr, 0, len(rec.Problems))
		for _, p := range rec.Problems {
			pr = append(pr, slog.String(p.Field, p.Problem))
		}
		attrs = append(attrs, slog.Attr{Key: "problems", Value: slog.GroupValue(pr...)})
	case PolicyGone:
		level, msg = slog.LevelWarn, "breaker policy gone"
		attrs = append(attrs, slog.String("in_force", rec.InForce))
	case PolicyUnreadable:
		level, msg = slog.LevelWarn, "breaker policy unreadable"
		attrs = append(attrs, slog.String("in_force", rec.InForce), slog.String("error", rec.Err))
	case PolicyUnchanged:
		level, msg = slog.LevelDebug, "breaker policy unchanged"
		attrs = append(attrs, slog.String("in_force", rec.InForce))
	}
	l.LogAttrs(context.Background(), level, msg, slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}

// logUnused reports the unused overrides of a document just applied.
func logUnused(l *slog.Logger, unused []string) {
	if l == nil {
		return
	}
	for _, k := range unused {
		l.LogAttrs(context.Background(), slog.LevelWarn,
			"breaker override unused", slog.Group("breaker", slog.String("override", k)))
	}
}

type policySubscriber struct {
	f   func(PolicyChange)
	off atomic.Bool
}

// SubscribePolicy adds f to the subscribers of the group's policy
// records: f is called with the [PolicyChange] of every document a
// followed source delivers, once it has been dealt with, on the
// follower's goroutine, outside any lock, in the order the documents
// came. The returned function removes f; once it has returned, f is not
// called again. A panic in f is recovered and logged, as for
// [Group.Subscribe]. A nil f is ignored.
//
// The group's breaker transitions go to [Group.Subscribe].
func (g *Group) SubscribePolicy(f func(PolicyChange)) (unsubscribe func()) {
	if f == nil {
		return func() {}
	}
	s := &policySubscriber{f: f}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.psubs.Store(ptr(append(append([]*policySubscriber{}, *g.psubs.Load()...), s)))
	return func() {
		s.off.Store(true)
		g.pmu.Lock()
		defer g.pmu.Unlock()
		var next []*policySubscriber
		for _, x := range *g.psubs.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		g.psubs.Store(&next)
	}
}

func (g *Group) dispatchPolicy(rec PolicyChange) {
	for _, s := range *g.psubs.Load() {
		if !s.off.Load() {
			func() {
				defer func() {
					if v := recover(); v != nil {
						g.reportPanic("breaker: policy subscriber panicked", rec.Origin, v)
					}
				}()
				s.f(rec)
			}()
		}
	}
}

// MaxPolicyDocumentSize is the largest group policy document, in bytes,
// that [ParseGroupPolicy] (and so [Group.LoadPolicies] and a followed
// source) accepts: 1 MiB, far beyond any real policy, and small enough
// that a file or a key filled by mistake cannot cost much to refuse.
const MaxPolicyDocumentSize = 1 << 20
