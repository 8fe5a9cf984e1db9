package breaker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In JSON a candidate is a change to the document around it: its default
// onto the document's, each key onto its own override.
func TestGroupPolicy_ACandidateIsReadAsAChangeToTheDocument(t *testing.T) {
	gp, err := ParseGroupPolicy([]byte(`{
		"default":   {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}, "orders.Create": {"probes": 5}},
		"candidate": {
			"default":   {"error_ratio": 0.4},
			"overrides": {"payment.Charge": {"error_ratio": 0.3}, "inventory.GetStock": {"call_timeout": "1s"}}
		}}`))
	require.NoError(t, err)
	require.NotNil(t, gp.Candidate)
	c := gp.Candidate
	want := func(edit func(*Policy)) Policy {
		p := DefaultPolicy()
		p.MinRequests = 10
		edit(&p)
		return p
	}
	assert.Equal(t, want(func(p *Policy) { p.ErrorRatio = 0.4 }), c.Default)
	assert.Equal(t, map[string]Policy{
		"payment.Charge": want(func(p *Policy) {
			p.OpenFor, p.MaxOpenFor, p.ErrorRatio = 45*time.Second, 3*time.Minute, 0.3
		}),
		"orders.Create":      want(func(p *Policy) { p.Probes, p.ErrorRatio = 5, 0.4 }),
		"inventory.GetStock": want(func(p *Policy) { p.CallTimeout, p.ErrorRatio = time.Second, 0.4 }),
	}, c.Overrides)
	assert.Nil(t, c.Candidate)

	// It round-trips through JSON, and promoting it gives the document
	// that publishes it.
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
	promoted, err := gp.Promote()
	require.NoError(t, err)
	assert.Equal(t, *c, promoted)
	_, err = promoted.Promote()
	assert.Error(t, err, "nothing to promote")

	// A candidate of the keys alone leaves the default alone.
	gp, err = ParseGroupPolicy([]byte(`{"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.3}}}}`))
	require.NoError(t, err)
	assert.Equal(t, DefaultPolicy(), gp.Candidate.Default)
}

func TestGroupPolicy_ABadCandidateIsRefusedByPath(t *testing.T) {
	_, err := ParseGroupPolicy([]byte(`{
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}},
		"candidate": {
			"default":   {"error_ratio": 2},
			"overrides": {"payment.Charge": {"max_open_for": "10s", "windw": "1s"}, "": {}},
			"candidate": {},
			"default": {}
		}}`))
	require.Error(t, err)
	assert.Equal(t, []FieldError{
		{Field: "candidate.default", Problem: "duplicate key"},
		{Field: "candidate.overrides", Problem: "empty key"},
		{Field: `candidate.overrides["payment.Charge"].windw`, Problem: "unknown field"},
	}[:1], problemsOf(t, err)[:1])
	fields := map[string]bool{}
	for _, p := range problemsOf(t, err) {
		fields[p.Field] = true
	}
	for _, f := range []string{"candidate.default", "candidate.candidate", "candidate.overrides",
		`candidate.overrides["payment.Charge"].windw`} {
		assert.True(t, fields[f], "%s in %v", f, err)
	}

	// A candidate that raises open_for above the max_open_for it does not
	// set is refused at open_for, the field it edits. Regression: it was
	// refused at max_open_for, a field the candidate does not name.
	_, err = ParseGroupPolicy([]byte(`{"candidate": {"overrides": {"payment.Charge": {"open_for": "3m"}}}}`))
	assert.EqualError(t, err, `breaker: invalid policy: candidate.overrides["payment.Charge"].open_for: 3m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 3m0s`)
	_, err = ParseGroupPolicy([]byte(`{"candidate": {"default": {"open_for": "3m"}}}`))
	assert.EqualError(t, err, `breaker: invalid policy: candidate.default.open_for: 3m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 3m0s`)

	inner := GroupPolicy{Candidate: &GroupPolicy{Candidate: &GroupPolicy{}}}
	assert.EqualError(t, inner.Validate(), "breaker: invalid policy: candidate.candidate: a candidate has no candidate of its own")
}

// A group runs a document's candidate whatever the program links: the
// shadow is the core's (Breaker.Candidate), and this package's tests link
// no package that reports on it. A program that did not link package
// candidate used to refuse a document with one.
func TestGroup_ACandidateRunsWithoutAnyPackageLinked(t *testing.T) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	require.NoError(t, err)
	require.NoError(t, g.LoadPolicies([]byte(`{"default": {"min_requests": 10}, "candidate": {"default": {"min_requests": 5}}}`)))
	require.NotNil(t, g.Policies().Candidate)
	b, err := g.Get("payment.Charge")
	require.NoError(t, err)
	c := b.Candidate()
	require.NotNil(t, c)
	for range 5 {
		_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
	}
	assert.Equal(t, Closed, b.State())
	assert.Equal(t, Open, c.Shadow().State(), "the candidate's min_requests of 5 is met")
	assert.Equal(t, ModeShadow, c.Shadow().Mode())
	assert.Equal(t, uint64(1), c.Differences())
	_, moved := c.LastTransition()
	assert.True(t, moved)

	_, err = NewGroup(GroupConfig{Policies: GroupPolicy{Candidate: &GroupPolicy{}}})
	assert.NoError(t, err)
}

// A candidate's probe runs on the context of the breaker in force, which
// is closed, so it is no probe there and makes no mark: a mark nobody can
// see would only keep every closed call of the process looking for one.
func TestCandidate_AProbeOfTheCandidateMakesNoMark(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	shadow := pay.Candidate().Shadow()
	require.Equal(t, Open, shadow.State())
	h.clk.Add(30 * time.Second) // the candidate's cooldown
	before := liveProbes.Load()
	for i := 0; i < 3; i++ { // the candidate's probes
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
			assert.False(t, IsProbe(ctx))
			assert.Equal(t, before, liveProbes.Load())
			return nil
		}))
	}
	assert.Equal(t, Closed, shadow.State())
	assert.Equal(t, Closed, pay.State())
}

// A candidate runs on the same outcomes as the policy in force, warmup
// included. A new pod's cold start, which the breaker in force leaves out
// of its window (GroupConfig.ColdTargets), used to count in the
// candidate's, so that a candidate differing only in min_requests opened
// on it and was reported as differing.
func TestCandidate_ColdTargetsAreColdForTheCandidateToo(t *testing.T) {
	h := newDocHarness(t, GroupConfig{ColdTargets: true})
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"default": {"min_requests": 5}}}`)
	key := TargetKey("inventory.GetStock", "10.0.0.7:443")
	h.calls(key, 10, errBoom)
	b := mustGet(t, h.g, key)
	shadow := b.Candidate().Shadow()
	assert.Equal(t, Closed, b.State())
	assert.Equal(t, uint64(10), b.Counters().Exempt)
	assert.Equal(t, Closed, shadow.State(), "the candidate counted the cold start")
	assert.Equal(t, uint64(10), shadow.Counters().Exempt)

	// Past the warmup, both count, and the candidate opens first.
	h.clk.Add(time.Minute)
	h.calls(key, 5, errBoom)
	assert.Equal(t, Closed, b.State())
	assert.Equal(t, Open, shadow.State())
}

// MarkCold marks the breaker's candidate too, by the candidate's own
// Warmup, even where the policy in force has none; it used to mark the
// breaker in force alone.
func TestCandidate_MarkColdMarksTheCandidate(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10},
		"overrides": {"orders.Create": {"warmup": "0s"}},
		"candidate": {"default": {"min_requests": 5}, "overrides": {"orders.Create": {"warmup": "30s"}}}}`)
	for _, key := range []string{"payment.Charge", "orders.Create"} {
		b := mustGet(t, h.g, key)
		b.MarkCold()
		h.calls(key, 5, errBoom)
		shadow := b.Candidate().Shadow()
		assert.Equal(t, Closed, shadow.State(), key)
		assert.Equal(t, uint64(5), shadow.Counters().Exempt, key)
	}
	assert.Equal(t, uint64(5), mustGet(t, h.g, "payment.Charge").Counters().Exempt)
	assert.Zero(t, mustGet(t, h.g, "orders.Create").Counters().Exempt, "no warmup in force")
}

// A candidate that comes to a breaker whose target is cold is cold from
// the same mark, by its own Warmup; a call's own mark (WithInstanceStart)
// reaches the candidate in the caller's context.
func TestCandidate_ALateCandidateAndACallsMarkAreCold(t *testing.T) {
	h := newDocHarness(t, GroupConfig{ColdTargets: true})
	h.doc("v1", `{"default": {"min_requests": 10}}`)
	key := TargetKey("inventory.GetStock", "10.0.0.7:443")
	b := mustGet(t, h.g, key)
	h.clk.Add(20 * time.Second) // 40s of the warmup left
	h.doc("v2", `{"default": {"min_requests": 10}, "candidate": {"default": {"min_requests": 5, "warmup": "30s"}}}`)
	shadow := b.Candidate().Shadow()
	h.calls(key, 5, errBoom)
	assert.Equal(t, uint64(5), shadow.Counters().Exempt, "cold for 10s more")
	h.clk.Add(10 * time.Second) // the candidate's warmup is over, not the breaker's
	h.calls(key, 5, errBoom)
	assert.Equal(t, Open, shadow.State())
	assert.Equal(t, uint64(10), b.Counters().Exempt)

	pay := mustGet(t, h.g, "payment.Charge")
	started := WithInstanceStart(context.Background(), h.g.Now())
	for i := 0; i < 5; i++ {
		_ = pay.Do(started, func(context.Context) error { return errBoom })
	}
	ps := pay.Candidate().Shadow()
	assert.Equal(t, Closed, ps.State())
	assert.Equal(t, uint64(5), ps.Counters().Exempt)
}

// The candidate looks for a call's WithInstanceStart mark on every call.
// It used to sample plain successes for one, as a breaker that has seen
// none does, so that when its candidate came to a breaker that had seen
// marks, the marked successes after an unmarked one went into the
// candidate's window while the breaker left them out.
func TestCandidate_SeesEveryMarkedSuccessTheBreakerSees(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10}}`)
	pay := mustGet(t, h.g, "payment.Charge")
	started := WithInstanceStart(context.Background(), h.g.Now())
	require.NoError(t, pay.Do(started, func(context.Context) error { return nil }))
	require.Equal(t, uint64(1), pay.Counters().Exempt, "the breaker has seen a mark")
	h.doc("v2", `{"default": {"min_requests": 10}, "candidate": {"default": {"min_requests": 5}}}`)
	shadow := pay.Candidate().Shadow()
	require.NoError(t, pay.Do(context.Background(), func(context.Context) error { return nil }))
	for range 5 {
		require.NoError(t, pay.Do(started, func(context.Context) error { return nil }))
	}
	assert.Equal(t, uint64(6), pay.Counters().Exempt)
	assert.Equal(t, uint64(5), shadow.Counters().Exempt)
	assert.Equal(t, pay.Snapshot(), shadow.Snapshot())
}
