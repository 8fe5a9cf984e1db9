package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/govkit/breaker/internal/jsondoc"
)

// GroupPolicy is the policy document of a [Group]: a default policy and
// overrides for particular keys. An override for a method
// ("payment.Charge") also applies to its per-target keys
// ("payment.Charge@10.0.0.7"), unless the per-target key has an override
// of its own.
//
// As JSON, each policy in the document is read onto the default (and the
// default onto [DefaultPolicy]), so it names only the fields that differ:
//
//	{
//	  "default":   {"error_ratio": 0.5},
//	  "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}
//	}
//
// Decoding is strict: an unknown field, a key named twice (a field, an
// override, "default"), a value of the wrong type or an invalid policy is
// an error that gives its path (overrides["payment.Charge"].open_for), and
// nothing of the document is applied. So is a document that is empty
// (or only white space), is not one JSON object (null, an array), has
// anything but white space after its object, or is larger than
// [MaxPolicyDocumentSize]. The object {} is a document: every key on
// [DefaultPolicy].
type GroupPolicy struct {
	Default   Policy            `json:"default"`
	Overrides map[string]Policy `json:"overrides,omitempty"`
	// Candidate, when set, is a policy document to try on real traffic
	// before it is published: every breaker whose policy in Candidate
	// differs from its own also runs the candidate's, in shadow, on the
	// same outcomes, never refusing a call ([Breaker.Candidate]); package
	// candidate, given to the group as an [Observer], reports where they
	// decide differently. Promoting it is publishing it
	// ([GroupPolicy.Promote]).
	//
	// Candidate is a whole document (a zero Default means
	// DefaultPolicy()) and has no candidate of its own. In JSON it is
	// written as a change to the document around it: its default is read
	// onto the document's default, and the policy of each key onto what
	// the key would have with that default and its own override, so that
	//
	//	{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}},
	//	 "candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.3}}}}
	//
	// tries error_ratio 0.3 on payment.Charge alone, with its open_for of
	// 45s, and {"candidate": {"default": {"min_requests": 50}}} tries
	// min_requests 50 on every key.
	Candidate *GroupPolicy `json:"candidate,omitempty"`
}

// Validate reports every invalid field of the default and of every
// override, by path, or nil. A zero Default stands for DefaultPolicy(), as
// it does in [NewGroup] and [Group.SetPolicies].
func (gp GroupPolicy) Validate() error {
	var v validator
	gp.validate(&v, "")
	return policyError(v.List)
}

func (gp GroupPolicy) validate(v *validator, prefix string) {
	if gp.Default != (Policy{}) {
		gp.Default.check(v, prefix+"default.")
	}
	for _, k := range sortedKeys(gp.Overrides) {
		if k == "" {
			v.Add(prefix+"overrides", "empty key")
			continue
		}
		gp.Overrides[k].check(v, prefix+overridePath(k))
	}
	if gp.Candidate != nil {
		if prefix != "" {
			v.Add(prefix+"candidate", "a candidate has no candidate of its own")
			return
		}
		gp.Candidate.validate(v, "candidate.")
	}
}

// Promote returns the candidate as the document, ready to be published in
// place of gp, or an error if gp has no candidate.
func (gp GroupPolicy) Promote() (GroupPolicy, error) {
	if gp.Candidate == nil {
		return GroupPolicy{}, errors.New("breaker: the policy document has no candidate to promote")
	}
	c := *gp.Candidate
	c.Candidate = nil
	return c, nil
}

// overridePath is the path prefix of an override's fields. The key is
// quoted, and cut if it is long: a key is input too.
func overridePath(key string) string { return "overrides[" + jsondoc.QuoteKey(key) + "]." }

// MaxPolicyDocumentSize is the largest group policy document, in bytes,
// that [ParseGroupPolicy] (and so [Group.LoadPolicies], and a source
// followed with package github.com/govkit/breaker/live) accepts: 1 MiB,
// far beyond any real policy, and small enough that a file or a key
// filled by mistake cannot cost much to refuse.
const MaxPolicyDocumentSize = 1 << 20

// ParseGroupPolicy decodes and validates a group policy document. On error
// (a *[PolicyError] listing every problem by path) it returns a zero
// GroupPolicy.
func ParseGroupPolicy(data []byte) (GroupPolicy, error) {
	var gp GroupPolicy
	if err := gp.UnmarshalJSON(data); err != nil {
		return GroupPolicy{}, err
	}
	return gp, nil
}

// UnmarshalJSON decodes a group policy document strictly and validates it;
// see [GroupPolicy]. A key named twice at any level (a field, an override,
// "default") is an error at its path. On error gp is unchanged.
func (gp *GroupPolicy) UnmarshalJSON(data []byte) error {
	var v validator
	if len(data) > MaxPolicyDocumentSize {
		// Refused before it is read: a document this size is a mistake
		// (a wrong file, a key filled by a runaway writer), and reading
		// it costs memory and time for nothing.
		v.Add("(document)", "more than %d bytes (1 MiB), the largest document accepted", MaxPolicyDocumentSize)
		return policyError(v.List)
	}
	top := jsondoc.Members(&v, data, "(document)", `a JSON object with "default" and "overrides"`, jsondoc.FieldName)
	if top == nil {
		return policyError(v.List)
	}
	def := DefaultPolicy()
	for _, k := range sortedKeys(top) {
		switch k {
		case "default":
			v.List = append(v.List, decodePolicyInto(&def, top[k], "default.")...)
		case "overrides", "candidate":
		default:
			v.Add(jsondoc.FieldName(k), "unknown field")
		}
	}
	var over map[string]Policy
	var docs map[string]json.RawMessage
	if raw, ok := top["overrides"]; ok && !jsondoc.IsNull(raw) {
		docs = jsondoc.Members(&v, raw, "overrides", "a JSON object from key to policy",
			func(k string) string { return strings.TrimSuffix(overridePath(k), ".") })
		for _, k := range sortedKeys(docs) {
			if k == "" {
				v.Add("overrides", "empty key")
				continue
			}
			p := def
			v.List = append(v.List, decodePolicyInto(&p, docs[k], overridePath(k))...)
			if over == nil {
				over = make(map[string]Policy, len(docs))
			}
			over[k] = p
		}
	}
	var cand *GroupPolicy
	if raw, ok := top["candidate"]; ok && !jsondoc.IsNull(raw) {
		cand = decodeCandidate(&v, raw, def, docs)
	}
	if err := policyError(v.List); err != nil {
		return err
	}
	// No overrides decode to nil, "overrides": {} included, as they
	// encode: an empty map and a nil one are the same document.
	*gp = GroupPolicy{Default: def, Overrides: over, Candidate: cand}
	return nil
}

// decodeCandidate reads a document's candidate, a change to the document
// (see GroupPolicy.Candidate): its default onto the document's default
// def, and each key's policy onto that default with the key's own
// override (docs, the document's overrides as written) and then the
// candidate's. The result names every key either has.
func decodeCandidate(v *validator, raw json.RawMessage, def Policy, docs map[string]json.RawMessage) *GroupPolicy {
	const where = "candidate"
	top := jsondoc.Members(v, raw, where, `a JSON object with "default" and "overrides"`,
		func(k string) string { return where + "." + jsondoc.FieldName(k) })
	if top == nil {
		return nil
	}
	n := len(v.List)
	cdef := def
	for _, k := range sortedKeys(top) {
		switch k {
		case "default":
			cdef.decode(v, top[k], "candidate.default.")
		case "overrides":
		default:
			v.Add(where+"."+jsondoc.FieldName(k), "unknown field")
		}
	}
	if len(v.List) == n {
		// A rule between two fields is reported at the one the candidate
		// sets (see checkDocument).
		if raw, ok := top["default"]; ok {
			cdef.checkDocument(v, "candidate.default.", raw)
		} else {
			cdef.check(v, "candidate.default.")
		}
	}
	var cdocs map[string]json.RawMessage
	if raw, ok := top["overrides"]; ok && !jsondoc.IsNull(raw) {
		cdocs = jsondoc.Members(v, raw, "candidate.overrides", "a JSON object from key to policy",
			func(k string) string { return "candidate." + strings.TrimSuffix(overridePath(k), ".") })
	}
	keys := map[string]bool{}
	for k := range docs {
		keys[k] = true
	}
	for k := range cdocs {
		keys[k] = true
	}
	var over map[string]Policy
	for _, k := range sortedKeys(keys) {
		if k == "" {
			if _, ok := cdocs[k]; ok {
				v.Add("candidate.overrides", "empty key")
			}
			continue
		}
		p := cdef
		// The override's own problems are reported where it is written.
		var own validator
		if raw, ok := docs[k]; ok {
			p.decode(&own, raw, overridePath(k))
		}
		n := len(v.List)
		if raw, ok := cdocs[k]; ok {
			p.decode(v, raw, "candidate."+overridePath(k))
		}
		if len(own.List) == 0 && len(v.List) == n {
			if raw, ok := cdocs[k]; ok {
				p.checkDocument(v, "candidate."+overridePath(k), raw)
			} else {
				p.check(v, "candidate."+overridePath(k))
			}
		}
		if over == nil {
			over = make(map[string]Policy, len(keys))
		}
		over[k] = p
	}
	return &GroupPolicy{Default: cdef, Overrides: over}
}

// groupRules is a validated GroupPolicy, compiled. Breakers that use the
// same policy share one *rules.
type groupRules struct {
	doc  GroupPolicy
	def  *rules
	over map[string]*rules
	// cand is the candidate document, compiled, or nil; version is the
	// version of the document, for the candidate's reports.
	cand    *groupRules
	version string
	// used holds the override keys a breaker of the group has used since
	// the document was set (see Group.UnusedOverrides). It is written and
	// read with the group's mu held: only creation and policy changes
	// touch it, never a call.
	used map[string]bool
}

func compileGroup(gp GroupPolicy) (*groupRules, error) {
	if gp.Default == (Policy{}) {
		gp.Default = DefaultPolicy()
	}
	if err := gp.Validate(); err != nil {
		return nil, err
	}
	var cand *groupRules
	if gp.Candidate != nil {
		c := *gp.Candidate
		var err error
		if cand, err = compileGroup(c); err != nil {
			return nil, err
		}
		gp.Candidate = &cand.doc
	}
	def, _ := compileShared(gp.Default)
	gr := &groupRules{
		doc:  gp,
		def:  def,
		over: make(map[string]*rules, len(gp.Overrides)),
		used: make(map[string]bool, len(gp.Overrides)),
		cand: cand,
	}
	for k, p := range gp.Overrides {
		if p == gp.Default {
			gr.over[k] = def
			continue
		}
		gr.over[k], _ = compileShared(p)
	}
	return gr, nil
}

// lookup returns the rules for key: its own override, its method's, or the
// default.
func (gr *groupRules) lookup(key string) *rules {
	if r, ok := gr.over[key]; ok {
		return r
	}
	if m, _ := SplitKey(key); m != key {
		if r, ok := gr.over[m]; ok {
			return r
		}
	}
	return gr.def
}

// candidateFor returns the candidate's rules for key, or nil if the
// document has no candidate or the candidate's policy for key is the
// key's own.
func (gr *groupRules) candidateFor(key string) *rules {
	if gr.cand == nil {
		return nil
	}
	c := gr.cand.lookup(key)
	if c.p == gr.lookup(key).p {
		return nil
	}
	return c
}

// markUsed notes that a breaker for key exists: its own override and its
// method's, if the document has them, are in use. The group's mu must be
// held.
func (gr *groupRules) markUsed(key string) {
	if _, ok := gr.over[key]; ok {
		gr.used[key] = true
	}
	if m, _ := SplitKey(key); m != key {
		if _, ok := gr.over[m]; ok {
			gr.used[m] = true
		}
	}
}

// unused returns the override keys not yet used, sorted. The group's mu
// must be held.
func (gr *groupRules) unused() []string {
	var out []string
	for _, k := range sortedKeys(gr.over) {
		if !gr.used[k] {
			out = append(out, k)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// OriginCode is the origin of a policy set by code: given to [NewGroup],
// or to [Group.SetPolicies] or [Group.LoadPolicies].
const OriginCode = "code"

// ErrPoliciesHeld is returned, wrapped with the name of the holder, by
// [Group.SetPolicies], [Group.LoadPolicies] and [Group.HoldPolicies]
// while a [PolicyHold] holds the group's policies. A group takes its
// policy from one place at a time, so that a second writer can never
// quietly replace what the first one published.
var ErrPoliciesHeld = errors.New("breaker: the group's policies are held")

// A PolicyLabel says which policy document a group applies, where it
// came from and since when, so that an operator can confirm that a
// change is live.
type PolicyLabel struct {
	// Origin names where the document came from: [OriginCode] for a
	// policy set by code, or the origin given to [PolicyHold.Apply]
	// ("file:/etc/app/breakers.json").
	Origin string `json:"origin"`
	// Version identifies the revision of the document: empty for code,
	// the store's revision or a content hash for a source.
	Version string `json:"version"`
	// AppliedAt is when it was applied, on the group's clock.
	AppliedAt time.Time `json:"applied_at"`
}

// policyLabel is a PolicyLabel, its time on the group's time base.
type policyLabel struct {
	origin, version string
	appliedAt       int64
}

// PolicyLabel returns the label of the policy document in force. It
// takes no lock a call needs.
func (g *Group) PolicyLabel() PolicyLabel {
	g.pmu.Lock()
	l := g.label
	g.pmu.Unlock()
	return PolicyLabel{Origin: l.origin, Version: l.version, AppliedAt: g.opt.tb.Time(l.appliedAt)}
}

// A PolicyHold is the right to set a group's policies, held by one
// writer at a time: a goroutine that follows a policy source (package
// github.com/govkit/breaker/live), a deployment tool. [Group.HoldPolicies]
// takes it.
//
// A PolicyHold is safe for concurrent use by multiple goroutines.
type PolicyHold struct {
	g      *Group
	holder string // guarded by g.pmu
}

// HoldPolicies makes the caller the only writer of the group's policies
// until [PolicyHold.Release]. While the hold lasts, SetPolicies,
// LoadPolicies and another HoldPolicies change nothing and return an
// error wrapping [ErrPoliciesHeld] that names holder, or the origin of
// the last document applied through the hold. The group keeps the policy
// in force when it is taken and when it is released.
//
// HoldPolicies returns an error for an empty holder.
func (g *Group) HoldPolicies(holder string) (*PolicyHold, error) {
	if holder == "" {
		return nil, errors.New("breaker: HoldPolicies needs the holder's name")
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	if h := g.hold; h != nil {
		return nil, fmt.Errorf("%w by %s", ErrPoliciesHeld, h.holder)
	}
	g.hold = &PolicyHold{g: g, holder: holder}
	return g.hold, nil
}

// Apply does what [Group.SetPolicies] does, unused overrides reported
// included, and labels the document with origin (the holder's name if
// empty) and version (see [Group.PolicyLabel]). An invalid document is
// refused with a *[PolicyError] and changes nothing. After Release, Apply
// changes nothing and returns an error.
func (h *PolicyHold) Apply(gp GroupPolicy, origin, version string) error {
	return h.g.setPolicies(h, gp, origin, version)
}

// Release gives up the hold; the group keeps the policy in force, which
// code may change again. Calling it again does nothing.
func (h *PolicyHold) Release() {
	h.g.pmu.Lock()
	if h.g.hold == h {
		h.g.hold = nil
	}
	h.g.pmu.Unlock()
}

// Logger returns where the group writes the records nobody may miss
// (a policy change, a recovered panic): the logger given with
// [WithLogger], or [slog.Default] if it has none. Packages that act on
// a group, such as live for its policy records, write there too.
func (g *Group) Logger() *slog.Logger { return g.auditLogger() }

// auditLogger is Logger, for the group's own records.
func (g *Group) auditLogger() *slog.Logger {
	if g.opt.logger != nil {
		return g.opt.logger
	}
	return slog.Default()
}

// Policies returns the group's policy document.
func (g *Group) Policies() GroupPolicy { return g.rules.Load().doc }

// SetPolicies replaces the group's policies and applies them to every
// breaker it holds. An invalid document is refused with a *[PolicyError]
// naming every bad field by path, and every breaker keeps its old policy.
// See [Breaker.SetPolicy] for what a running breaker keeps.
//
// An override whose key no breaker of the group has used (see
// [Group.UnusedOverrides]) is accepted, since its breaker may be made
// later, but it is reported: if the group has a logger ([WithLogger])
// and holds breakers, SetPolicies writes one Warn record for each such
// key, after the document is applied and outside the group's lock:
//
//	level=WARN msg="breaker override unused" breaker.override=inventory.GetStok
//
// A typo in a key would otherwise go unnoticed, the breaker it meant
// running on the default policy. A group that holds no breaker yet (a
// service loading its policies at start) reports nothing, since every
// override is unused then; UnusedOverrides lists them once traffic has
// begun.
//
// While a [PolicyHold] holds the group's policies (see
// [Group.HoldPolicies]), SetPolicies changes nothing and returns an error
// wrapping [ErrPoliciesHeld]. Otherwise the policy in force is the code's
// from then on: its label ([Group.PolicyLabel]) is [OriginCode].
func (g *Group) SetPolicies(gp GroupPolicy) error {
	return g.setPolicies(nil, gp, OriginCode, "")
}

// setPolicies applies gp with its label, for code (h nil, while nobody
// holds the policies) or for the holder h.
func (g *Group) setPolicies(h *PolicyHold, gp GroupPolicy, origin, version string) error {
	gr, err := compileGroup(gp)
	if err != nil {
		return err
	}
	g.pmu.Lock()
	if g.hold != h {
		g.pmu.Unlock()
		if h != nil {
			return errors.New("breaker: the policy hold has been released")
		}
		return fmt.Errorf("%w by %s", ErrPoliciesHeld, g.hold.holder)
	}
	if h != nil {
		if origin == "" {
			origin = h.holder
		}
		h.holder = origin
	}
	gr.version = version
	unused := g.setRules(gr)
	g.label = policyLabel{origin: origin, version: version, appliedAt: g.opt.tb.Now()}
	g.pmu.Unlock()
	logUnused(g.opt.logger, unused)
	return nil
}

// setRules applies gr to the group and returns its unused override keys
// to report, none while the group holds no breaker: before any call
// every override is unused, and saying so says nothing (the breakers of a
// service that loads its policies at start are made on first use).
func (g *Group) setRules(gr *groupRules) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	// An override the previous document had, and a breaker used, stays
	// used: its breaker may have been dropped as idle since, which makes
	// the key no less real.
	for k := range gr.over {
		if g.rules.Load().used[k] {
			gr.used[k] = true
		}
	}
	g.rules.Store(gr)
	g.overflow.setRules(gr.def)
	held := false
	g.m.Range(func(k, v any) bool {
		held = true
		key := k.(string)
		gr.markUsed(key)
		b := v.(*Breaker)
		b.setRules(gr.lookup(key))
		b.setCandidate(g, gr.candidateFor(key), gr.version)
		return true
	})
	if !held {
		return nil
	}
	return gr.unused()
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

// UnusedOverrides returns, sorted, the keys of the overrides in the
// group's policy document that no breaker of the group has used yet, or
// nil if there are none. An override is used once the group has made a
// breaker for its key; an override for a method ("payment.Charge") is
// also used by a breaker for one of its targets
// ("payment.Charge@10.0.0.7"). Use stays noted when the breaker is
// dropped, and across [Group.SetPolicies] for an override the new
// document keeps.
//
// A key listed here is often a typo ("inventory.GetStok" for
// "inventory.GetStock"), whose breaker runs on the default policy; it may
// also belong to a downstream not called yet. Call it once traffic has
// begun, from a health check or after a reload; [Group.SetPolicies] and
// [Group.LoadPolicies] log the same list when the group has a logger.
func (g *Group) UnusedOverrides() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rules.Load().unused()
}

// LoadPolicies decodes a JSON group policy document (see [GroupPolicy]) and
// applies it with [Group.SetPolicies], which reports its unused overrides.
// On any error nothing is applied.
func (g *Group) LoadPolicies(doc []byte) error {
	gp, err := ParseGroupPolicy(doc)
	if err != nil {
		return err
	}
	return g.SetPolicies(gp)
}
