package breaker

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The label says where the policy in force came from and since when:
// code at creation and after SetPolicies, the holder's origin and
// version after Apply.
func TestGroup_ThePolicyLabelSaysWhereThePolicyInForceCameFrom(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	t0 := gh.clk.Now()
	assert.Equal(t, PolicyLabel{Origin: OriginCode, AppliedAt: t0}, gh.g.PolicyLabel())

	gh.clk.Add(time.Minute)
	hold, err := gh.g.HoldPolicies("file:/etc/app/breakers.json")
	require.NoError(t, err)
	assert.Equal(t, PolicyLabel{Origin: OriginCode, AppliedAt: t0}, gh.g.PolicyLabel(), "taking the hold changes nothing")
	gp, err := ParseGroupPolicy([]byte(`{"default": {"min_requests": 7}}`))
	require.NoError(t, err)
	require.NoError(t, hold.Apply(gp, "file:/etc/app/breakers.json", "sha256:5d41402abc4b2a76"))
	assert.Equal(t, PolicyLabel{Origin: "file:/etc/app/breakers.json", Version: "sha256:5d41402abc4b2a76", AppliedAt: gh.clk.Now()},
		gh.g.PolicyLabel())
	assert.Equal(t, 7, gh.g.Policies().Default.MinRequests)

	gh.clk.Add(time.Minute)
	require.NoError(t, hold.Apply(GroupPolicy{}, "", "v2"))
	assert.Equal(t, PolicyLabel{Origin: "file:/etc/app/breakers.json", Version: "v2", AppliedAt: gh.clk.Now()},
		gh.g.PolicyLabel(), "an empty origin is the holder's")
	hold.Release()
	assert.Equal(t, "v2", gh.g.PolicyLabel().Version, "released, the policy in force keeps its label")

	gh.clk.Add(time.Minute)
	require.NoError(t, gh.g.SetPolicies(GroupPolicy{}))
	assert.Equal(t, PolicyLabel{Origin: OriginCode, AppliedAt: gh.clk.Now()}, gh.g.PolicyLabel())
}

// While a hold lasts, its holder is the only writer: code and a second
// holder are refused with an error that names the holder, and change
// nothing. Released, the group is free again, and the hold writes no more.
func TestGroup_AHoldMakesItsHolderTheOnlyWriter(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	_, err := gh.g.HoldPolicies("")
	require.Error(t, err, "a hold names its holder")

	hold, err := gh.g.HoldPolicies("(unknown)")
	require.NoError(t, err)
	require.NoError(t, hold.Apply(GroupPolicy{}, "etcd:/services/shop/breakers", "42"))
	for name, try := range map[string]func() error{
		"SetPolicies":  func() error { return gh.g.SetPolicies(GroupPolicy{}) },
		"LoadPolicies": func() error { return gh.g.LoadPolicies([]byte(`{}`)) },
		"HoldPolicies": func() error { _, err := gh.g.HoldPolicies("file:/other.json"); return err },
	} {
		err := try()
		require.ErrorIs(t, err, ErrPoliciesHeld, name)
		assert.EqualError(t, err, "breaker: the group's policies are held by etcd:/services/shop/breakers", name)
	}
	assert.Equal(t, "42", gh.g.PolicyLabel().Version)

	bad := GroupPolicy{Default: Policy{ErrorRatio: 2}}
	assert.NotEmpty(t, problemsOf(t, hold.Apply(bad, "etcd:/services/shop/breakers", "43")))
	assert.Equal(t, "42", gh.g.PolicyLabel().Version, "a refused document changes nothing")

	hold.Release()
	hold.Release()
	require.Error(t, hold.Apply(GroupPolicy{}, "etcd:/services/shop/breakers", "44"), "released")
	assert.Equal(t, "42", gh.g.PolicyLabel().Version)
	require.NoError(t, gh.g.SetPolicies(GroupPolicy{}))
	next, err := gh.g.HoldPolicies("file:/other.json")
	require.NoError(t, err)
	next.Release()
	hold.Release()
	_, err = gh.g.HoldPolicies("file:/third.json")
	require.NoError(t, err, "a stale hold's Release does not release another's")
}

// A document applied through a hold reports its unused overrides as one
// set by code does.
func TestGroup_AHeldApplyReportsUnusedOverrides(t *testing.T) {
	var buf bytes.Buffer
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	gh.calls("inventory.GetStock", 1, nil)
	hold, err := gh.g.HoldPolicies("test")
	require.NoError(t, err)
	defer hold.Release()
	gp, err := ParseGroupPolicy([]byte(`{"overrides": {"inventory.GetStok": {}}}`))
	require.NoError(t, err)
	require.NoError(t, hold.Apply(gp, "test", "v1"))
	assert.Contains(t, buf.String(), `level=WARN msg="breaker override unused" breaker.override=inventory.GetStok`)
}

func TestGroup_LoggerIsTheGroupsOrTheDefault(t *testing.T) {
	l := discardLogger()
	g, err := NewGroup(GroupConfig{}, WithLogger(l))
	require.NoError(t, err)
	assert.Same(t, l, g.Logger())
	g, err = NewGroup(GroupConfig{})
	require.NoError(t, err)
	assert.Same(t, slog.Default(), g.Logger())
}
