package live_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A followed document is applied whole: every key's changed fields are
// in the record, and the breakers keep their state and window.
func TestFollow_AppliesADocumentAndKeepsStateAndWindow(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.calls("orders.Create", 5, nil)
	h.calls("orders.Create", 3, errBoom)
	h.calls("payment.Charge", 20, errBoom) // trips
	pay, _ := h.g.Get("payment.Charge")
	require.Equal(t, breaker.Open, pay.State())
	before := mustGet(t, h.g, "orders.Create").Snapshot()

	c := h.doc("v2", `{"default": {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	assert.Equal(t, live.Applied, c.Result)
	assert.Equal(t, "test:policies", c.Origin)
	assert.Equal(t, "v2", c.Version)
	assert.Equal(t, "v2", c.InForce)
	assert.Equal(t, h.clk.Now(), c.Time)
	assert.Equal(t, []live.FieldChange{
		{Key: "default", Path: "default.min_requests", Field: "min_requests", From: "20", To: "10"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].min_requests`, Field: "min_requests", From: "20", To: "10"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].open_for`, Field: "open_for", From: "30s", To: "45s"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].max_open_for`, Field: "max_open_for", From: "2m0s", To: "3m0s"},
	}, c.Changes)

	assert.Equal(t, 45*time.Second, pay.Policy().OpenFor, "in force")
	assert.Equal(t, breaker.Open, pay.State(), "state kept")
	assert.Equal(t, before, mustGet(t, h.g, "orders.Create").Snapshot(), "window kept")
	assert.Equal(t, 10, mustGet(t, h.g, "orders.Create").Policy().MinRequests)

	assert.Equal(t, breaker.PolicyLabel{Origin: "test:policies", Version: "v2", AppliedAt: h.clk.Now()}, h.g.PolicyLabel())
	st := h.f.Status()
	assert.Equal(t, "test:policies", st.Following)
	assert.Equal(t, live.Reloads{Applied: 1}, st.Reloads)
	require.NotNil(t, st.Last)
	assert.Equal(t, c, *st.Last)
	require.NotNil(t, st.Applied)
	assert.Equal(t, c, *st.Applied)

	c = h.doc("v3", `{"default": {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	assert.Equal(t, live.Applied, c.Result)
	assert.Empty(t, c.Changes, "the same policy under a new version changes nothing")
}

// A change inside the adaptive timeout, a nested object, is named by its
// path, and the fields after it are still compared.
func TestFollow_AChangeInsideTheAdaptiveTimeoutIsNamedByItsPath(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	c := h.doc("v2", `{"default": {"adaptive_timeout": {"enabled": true, "max": "2s"}, "open_for": "45s", "max_open_for": "3m"}}`)
	require.Equal(t, live.Applied, c.Result, "%+v", c)
	assert.Equal(t, []live.FieldChange{
		{Key: "default", Path: "default.adaptive_timeout.enabled", Field: "adaptive_timeout.enabled", From: "false", To: "true"},
		{Key: "default", Path: "default.adaptive_timeout.max", Field: "adaptive_timeout.max", From: "0s", To: "2s"},
		{Key: "default", Path: "default.open_for", Field: "open_for", From: "30s", To: "45s"},
		{Key: "default", Path: "default.max_open_for", Field: "max_open_for", From: "2m0s", To: "3m0s"},
	}, c.Changes)
}

// A bad document changes nothing, and its record names every problem by
// path while the version in force stays.
func TestFollow_RejectedDocumentKeepsThePolicyInForce(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.doc("v1", `{"overrides": {"payment.Charge": {"open_for": "30s"}}}`)
	h.calls("payment.Charge", 5, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	snap := pay.Snapshot()

	c := h.doc("v2", `{"default": {"error_ratio": 2},
		"overrides": {"payment.Charge": {"max_open_for": "10s"}, "orders.Create": {"windw": "5s"}}}`)
	assert.Equal(t, live.Rejected, c.Result)
	assert.Equal(t, "v2", c.Version)
	assert.Equal(t, "v1", c.InForce)
	assert.Empty(t, c.Changes)
	assert.Equal(t, []breaker.FieldError{
		{Field: "default.error_ratio", Problem: "must be in (0, 1], got 2"},
		{Field: `overrides["orders.Create"].windw`, Problem: "unknown field"},
		{Field: `overrides["payment.Charge"].max_open_for`, Problem: "must be at least open_for (30s), got 10s"},
	}, c.Problems)
	assert.Equal(t, breaker.DefaultPolicy(), pay.Policy())
	assert.Equal(t, snap, pay.Snapshot())
	assert.Equal(t, "v1", h.g.PolicyLabel().Version)
	st := h.f.Status()
	assert.Equal(t, live.Reloads{Applied: 1, Rejected: 1}, st.Reloads)
	assert.Equal(t, live.Rejected, st.Last.Result)
	assert.Equal(t, "v1", st.Applied.Version, "the record of the version in force stays")
}

func TestFollow_GoneOrUnreadableDocumentKeepsThePolicyInForce(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.doc("v1", `{"default": {"open_for": "40s", "max_open_for": "2m"}}`)

	c := h.send(live.Document{Gone: true})
	assert.Equal(t, live.Gone, c.Result)
	assert.Equal(t, "v1", c.InForce)
	c = h.send(live.Document{Err: errors.New("permission denied")})
	assert.Equal(t, live.Unreadable, c.Result)
	assert.Equal(t, "permission denied", c.Err)
	assert.Equal(t, "v1", c.InForce)

	assert.Equal(t, 40*time.Second, mustGet(t, h.g, "orders.Create").Policy().OpenFor)
	assert.Equal(t, "v1", h.g.PolicyLabel().Version)
	assert.Equal(t, live.Reloads{Applied: 1, Gone: 1, Unreadable: 1}, h.f.Status().Reloads)
}

// A group follows one source: a second one, or policies set by code,
// cannot quietly replace what the first published.
func TestFollow_ASecondSourceIsRefused(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.doc("v1", `{"default": {"open_for": "40s", "max_open_for": "2m"}}`)

	_, err := live.Follow(context.Background(), h.g, newChanSource("etcd:/other"))
	require.ErrorIs(t, err, breaker.ErrPoliciesHeld)
	assert.Contains(t, err.Error(), "test:policies", "names the source in force")
	require.ErrorIs(t, h.g.SetPolicies(breaker.GroupPolicy{}), breaker.ErrPoliciesHeld)
	require.ErrorIs(t, h.g.LoadPolicies([]byte(`{}`)), breaker.ErrPoliciesHeld)
	assert.Equal(t, 40*time.Second, h.g.Policies().Default.OpenFor)

	require.NoError(t, h.f.Close())
	assert.Equal(t, "", h.f.Status().Following)
	assert.Equal(t, "v1", h.g.PolicyLabel().Version, "kept after Close")
	require.NoError(t, h.g.SetPolicies(breaker.GroupPolicy{}))
	label := h.g.PolicyLabel()
	assert.Equal(t, breaker.OriginCode, label.Origin)
	assert.Equal(t, "", label.Version)

	other := newChanSource("etcd:/other")
	f, err := live.Follow(context.Background(), h.g, other)
	require.NoError(t, err, "after Close another source may be followed")
	require.NoError(t, f.Close())
}

func TestFollow_StopsWithItsContextAndCloseLeavesNoGoroutine(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	f, err := live.Follow(ctx, g, newChanSource("test:a"))
	require.NoError(t, err)
	cancel()
	<-f.Done()
	assert.NoError(t, f.Err())
	assert.NoError(t, f.Close(), "Close after the context ended")
	assert.NoError(t, f.Close(), "twice")

	f, err = live.Follow(context.Background(), g, newChanSource("test:b"))
	require.NoError(t, err, "the group is free again")
	require.NoError(t, f.Close())

	_, err = live.Follow(nil, g, newChanSource("test:c")) //nolint:staticcheck // a nil ctx is refused
	assert.Error(t, err)
	_, err = live.Follow(context.Background(), nil, newChanSource("test:c"))
	assert.Error(t, err)
	_, err = live.Follow(context.Background(), g, nil)
	assert.Error(t, err)
}

// A subscriber, which runs on the follower's goroutine, stops the
// follower by cancelling the context given to Follow: Close would wait
// for the subscriber itself.
func TestFollow_ASubscriberStopsTheFollowerThroughItsContext(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := newChanSource("test:stop")
	f, err := live.Follow(ctx, g, src, live.OnChange(func(c live.Change) {
		if c.Result == live.Rejected {
			cancel() // a bad push: stop following, keep what is in force
		}
	}))
	require.NoError(t, err)
	src.docs <- live.Document{Version: "v1", Data: []byte(`{"default": {"min_requests": 7}}`)}
	src.docs <- live.Document{Version: "v2", Data: []byte(`{"default": {"min_requests": -1}}`)}
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not stop")
	}
	require.NoError(t, f.Close())
	assert.Equal(t, live.Reloads{Applied: 1, Rejected: 1}, f.Status().Reloads)
	assert.Equal(t, "v1", g.PolicyLabel().Version)
	require.NoError(t, g.SetPolicies(breaker.GroupPolicy{}), "the group is free again")
}

type panicSource struct{}

func (panicSource) Watch(context.Context, func(live.Document)) error { panic("source bug") }

func TestFollow_ASourceThatGivesUpOrPanicsStopsTheFollower(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	broken := errors.New("no such store")
	f, err := live.Follow(context.Background(), g, &chanSource{stop: broken})
	require.NoError(t, err)
	<-f.Done()
	assert.ErrorIs(t, f.Err(), broken)
	assert.ErrorIs(t, f.Close(), broken)

	f, err = live.Follow(context.Background(), g, panicSource{})
	require.NoError(t, err)
	<-f.Done()
	assert.ErrorContains(t, f.Err(), "source bug")
	assert.Equal(t, "", f.Status().Following)
	require.NoError(t, g.SetPolicies(breaker.GroupPolicy{}), "the group is free again")
}

// A reload never waits for the calls in flight, nor they for it.
func TestFollow_AReloadDoesNotWaitForCallsInFlight(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.calls("orders.Create", 1, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = h.g.Do(context.Background(), "orders.Create", func(context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	c := h.doc("v2", `{"default": {"min_requests": 5}}`)
	assert.Equal(t, live.Applied, c.Result, "applied while a call is running")
	close(release)
	wg.Wait()
	b := mustGet(t, h.g, "orders.Create")
	assert.Equal(t, 5, b.Policy().MinRequests)
	assert.Equal(t, uint64(2), b.Snapshot().Counted, "the call in flight counts in the kept window")
}

func TestFollow_APolicySubscriberThatPanicsDoesNotStopTheFollower(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	unsub := h.f.Subscribe(func(live.Change) { panic("subscriber bug") })
	c := h.doc("v2", `{"default": {"min_requests": 5}}`)
	assert.Equal(t, live.Applied, c.Result)
	unsub()
	unsub()
	c = h.doc("v3", `{"default": {"min_requests": 6}}`)
	assert.Equal(t, live.Applied, c.Result)
	assert.NotNil(t, h.f.Subscribe(nil))
}

// A followed document that is not one well-formed document is refused
// and reported, and no breaker goes back to the defaults.
func TestFollow_MalformedDocumentsAreRefusedAndChangeNothing(t *testing.T) {
	const good = `{"default": {"min_requests": 7}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
	huge := []byte(`{"default": {"min_requests": 7}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}` +
		strings.Repeat(" ", breaker.MaxPolicyDocumentSize))
	for _, c := range []struct {
		name, data, field, problem string
	}{
		{"duplicate field", `{"default": {"min_requests": 7, "min_requests": 70}}`,
			"default.min_requests", "duplicate key"},
		{"duplicate override", `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}, "payment.Charge": {}}}`,
			`overrides["payment.Charge"]`, "duplicate key"},
		{"duplicate default", `{"default": {"min_requests": 7}, "default": {}}`,
			"default", "duplicate key"},
		{"empty", ``, "(document)", "got an empty document"},
		{"white space", " \n\t ", "(document)", "got an empty document"},
		{"null", `null`, "(document)", "got null"},
		{"trailing garbage", good + `}`, "(document)", "and nothing after it, got more at byte"},
		{"a second document", good + good, "(document)", "and nothing after it"},
		{"over 1 MiB", string(huge), "(document)", "more than 1048576 bytes (1 MiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFollowHarness(t, breaker.GroupConfig{})
			require.Equal(t, live.Applied, h.doc("v1", good).Result)
			pay := mustGet(t, h.g, "payment.Charge")
			other := mustGet(t, h.g, "orders.Create")

			rec := h.doc("v2", c.data)
			assert.Equal(t, live.Rejected, rec.Result)
			assert.Equal(t, "v1", rec.InForce)
			require.NotEmpty(t, rec.Problems)
			assert.Equal(t, c.field, rec.Problems[0].Field)
			assert.Contains(t, rec.Problems[0].Problem, c.problem)
			assert.Equal(t, 45*time.Second, pay.Policy().OpenFor, "not reset to the defaults")
			assert.Equal(t, 7, other.Policy().MinRequests, "not reset to the defaults")
			assert.Equal(t, "v1", h.g.PolicyLabel().Version)

			_, err := breaker.ParseGroupPolicy([]byte(c.data))
			assert.Error(t, err, "refused by ParseGroupPolicy too")
		})
	}
	_, err := breaker.ParseGroupPolicy([]byte(strings.Repeat(" ", breaker.MaxPolicyDocumentSize-2) + "{}"))
	assert.NoError(t, err, "a document of exactly the limit is read")
}

// A push that lowers open_for and max_open_for during an outage cuts the
// cooldown that is running, through a live source as through SetPolicy:
// a breaker whose cooldown had doubled to 2m probes once the new maximum,
// 20s, has passed since that cooldown began. It used to wait out the 2m.
func TestFollow_APushDuringAnOutageCutsTheRunningCooldown(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	require.Equal(t, live.Applied, h.doc("v1", `{"default": {"strict_probes": true}}`).Result)
	h.calls("payment.Charge", 20, errBoom) // trips: 30s
	pay := mustGet(t, h.g, "payment.Charge")
	h.clk.Add(30 * time.Second)
	h.calls("payment.Charge", 1, errBoom) // the probe fails: 1m
	h.clk.Add(time.Minute)
	h.calls("payment.Charge", 1, errBoom) // and again: 2m
	st := pay.Status()
	require.Equal(t, 2*time.Minute, st.Cooldown)
	require.Equal(t, breaker.ReasonErrorRatio, st.Outage.Trip.Reason)
	reopened := h.clk.Now()

	h.clk.Add(5 * time.Second)
	c := h.doc("v2", `{"default": {"strict_probes": true, "open_for": "10s", "max_open_for": "20s"}}`)
	require.Equal(t, live.Applied, c.Result)
	st = pay.Status()
	assert.Equal(t, 20*time.Second, st.Cooldown)
	require.NotNil(t, st.Until)
	assert.Equal(t, reopened.Add(20*time.Second), *st.Until)
	assert.Equal(t, breaker.ReasonErrorRatio, st.Outage.Trip.Reason, "the outage keeps its cause")
	h.clk.Add(15 * time.Second)
	assert.Equal(t, breaker.HalfOpen, pay.State())

	// A push that raises them leaves the running cooldown alone.
	h.calls("payment.Charge", 1, errBoom) // reopened for 20s (10s doubled, capped)
	require.Equal(t, 20*time.Second, pay.Status().Cooldown)
	require.Equal(t, live.Applied, h.doc("v3", `{"default": {"strict_probes": true, "open_for": "1m", "max_open_for": "5m"}}`).Result)
	assert.Equal(t, 20*time.Second, pay.Status().Cooldown)
}

// A subscriber added once the follower runs sees the records from then
// on; Status has the ones before.
func TestFollow_ALateSubscriberSeesTheRecordsFromThenOn(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	require.Equal(t, live.Applied, h.doc("v1", `{"default": {"min_requests": 7}}`).Result)
	late := make(chan live.Change, 1)
	defer h.f.Subscribe(func(c live.Change) { late <- c })()
	require.Equal(t, live.Rejected, h.doc("v2", `{"default": {"min_requests": -1}}`).Result)
	assert.Equal(t, "v2", (<-late).Version)
	st := h.f.Status()
	assert.Equal(t, "v1", st.Applied.Version)
	assert.Equal(t, "v2", st.Last.Version)
	st.Last.Problems[0].Field = "changed by the reader"
	assert.Equal(t, "default.min_requests", h.f.Status().Last.Problems[0].Field, "Status returns copies")
}

// A throttle pushed through a followed source reaches the running
// breakers at once, and its change record names the nested fields.
func TestFollow_APushedThrottleActsOnTheRunningBreakers(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	// MinRequests 6: the throttle's floor, 3·MinRequests, is 18.
	require.Equal(t, live.Applied, h.doc("v1", `{"default": {"error_ratio": 0.9, "min_requests": 6}}`).Result)
	h.calls("orders.Create", 3, nil)
	h.calls("orders.Create", 17, errBoom) // 85% failed, under the ratio
	b := mustGet(t, h.g, "orders.Create")
	require.Equal(t, breaker.Closed, b.State())
	require.Zero(t, b.Status().ThrottleProbability)

	// A throttle alone (error_ratio 0): its floor is 3·MinRequests, 18.
	c := h.doc("v2", `{"default": {"error_ratio": 0, "min_requests": 6, "throttle": {"enabled": true}}}`)
	require.Equal(t, live.Applied, c.Result, "%+v", c)
	assert.Contains(t, c.Changes, live.FieldChange{Key: "default", Path: "default.throttle.enabled", Field: "throttle.enabled", From: "false", To: "true"})
	// p = (20 - 2·3) / 21, judged from the window the breaker already has.
	assert.InDelta(t, 14.0/21, b.Status().ThrottleProbability, 1e-9)
	assert.Equal(t, breaker.Closed, b.State())
}
