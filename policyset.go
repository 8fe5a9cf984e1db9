package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

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
