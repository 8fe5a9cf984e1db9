package breaker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chanSource delivers what the test sends it, one document at a time.
type chanSource struct {
	origin string
	docs   chan PolicyDocument
	stop   error // returned at once if set
}

func newChanSource(origin string) *chanSource {
	return &chanSource{origin: origin, docs: make(chan PolicyDocument)}
}

func (s *chanSource) Watch(ctx context.Context, deliver func(PolicyDocument)) error {
	if s.stop != nil {
		return s.stop
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-s.docs:
			if d.Origin == "" {
				d.Origin = s.origin
			}
			deliver(d)
		}
	}
}

// followHarness is a group on a mock clock following a chanSource, with
// the policy records it produces.
type followHarness struct {
	t   *testing.T
	g   *Group
	clk *clock.Mock
	src *chanSource
	f   *Follower
	rec chan PolicyChange
}

func newFollowHarness(t *testing.T, cfg GroupConfig, opts ...Option) *followHarness {
	t.Helper()
	h := &followHarness{t: t, clk: clock.NewMock(), src: newChanSource("test:policies"), rec: make(chan PolicyChange, 16)}
	h.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g, err := NewGroup(cfg, append([]Option{WithClock(h.clk), WithRand(func() float64 { return 0.5 }),
		WithLogger(discardLogger())}, opts...)...)
	require.NoError(t, err)
	h.g = g
	unsub := g.SubscribePolicy(func(c PolicyChange) { h.rec <- c })
	t.Cleanup(unsub)
	h.f, err = g.Follow(context.Background(), h.src)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.f.Close() })
	return h
}

// send delivers a document and returns its record.
func (h *followHarness) send(d PolicyDocument) PolicyChange {
	h.t.Helper()
	h.src.docs <- d
	select {
	case c := <-h.rec:
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no policy record")
		return PolicyChange{}
	}
}

func (h *followHarness) doc(version, data string) PolicyChange {
	h.t.Helper()
	return h.send(PolicyDocument{Version: version, Data: []byte(data)})
}

func (h *followHarness) calls(key string, n int, err error) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		_ = h.g.Do(context.Background(), key, func(context.Context) error { return err })
	}
}

// A followed document is applied whole: every key's changed fields are
// in the record, and the breakers keep their state and window.
func TestFollow_AppliesADocumentAndKeepsStateAndWindow(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	h.calls("orders.Create", 5, nil)
	h.calls("orders.Create", 3, errBoom)
	h.calls("payment.Charge", 20, errBoom) // trips
	pay, _ := h.g.Get("payment.Charge")
	require.Equal(t, Open, pay.State())
	before := mustGet(t, h.g, "orders.Create").Snapshot()

	c := h.doc("v2", `{"default": {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	assert.Equal(t, PolicyApplied, c.Result)
	assert.Equal(t, "test:policies", c.Origin)
	assert.Equal(t, "v2", c.Version)
	assert.Equal(t, "v2", c.InForce)
	assert.Equal(t, h.clk.Now(), c.Time)
	assert.Equal(t, []PolicyFieldChange{
		{Key: "default", Path: "default.min_requests", Field: "min_requests", From: "20", To: "10"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].min_requests`, Field: "min_requests", From: "20", To: "10"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].open_for`, Field: "open_for", From: "30s", To: "45s"},
		{Key: "payment.Charge", Path: `overrides["payment.Charge"].max_open_for`, Field: "max_open_for", From: "2m0s", To: "3m0s"},
	}, c.Changes)

	assert.Equal(t, 45*time.Second, pay.Policy().OpenFor, "in force")
	assert.Equal(t, Open, pay.State(), "state kept")
	assert.Equal(t, before, mustGet(t, h.g, "orders.Create").Snapshot(), "window kept")
	assert.Equal(t, 10, mustGet(t, h.g, "orders.Create").Policy().MinRequests)

	st := h.g.PolicyStatus()
	assert.Equal(t, "test:policies", st.Origin)
	assert.Equal(t, "v2", st.Version)
	assert.Equal(t, h.clk.Now(), st.AppliedAt)
	assert.Equal(t, c.Changes, st.Changes)
	assert.Equal(t, "test:policies", st.Following)
	assert.Equal(t, PolicyReloads{Applied: 1}, st.Reloads)
	require.NotNil(t, st.Last)
	assert.Equal(t, c, *st.Last)

	c = h.doc("v3", `{"default": {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	assert.Equal(t, PolicyApplied, c.Result)
	assert.Empty(t, c.Changes, "the same policy under a new version changes nothing")
}

// A bad document changes nothing, and its record names every problem by
// path while the version in force stays.
func TestFollow_RejectedDocumentKeepsThePolicyInForce(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	h.doc("v1", `{"overrides": {"payment.Charge": {"open_for": "30s"}}}`)
	h.calls("payment.Charge", 5, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	snap := pay.Snapshot()

	c := h.doc("v2", `{"default": {"error_ratio": 2},
		"overrides": {"payment.Charge": {"max_open_for": "10s"}, "orders.Create": {"windw": "5s"}}}`)
	assert.Equal(t, PolicyRejected, c.Result)
	assert.Equal(t, "v2", c.Version)
	assert.Equal(t, "v1", c.InForce)
	assert.Empty(t, c.Changes)
	assert.Equal(t, []FieldError{
		{Field: "default.error_ratio", Problem: "must be in (0, 1], got 2"},
		{Field: `overrides["orders.Create"].windw`, Problem: "unknown field"},
		{Field: `overrides["payment.Charge"].max_open_for`, Problem: "must be at least open_for (30s), got 10s"},
	}, c.Problems)
	assert.Equal(t, DefaultPolicy(), pay.Policy())
	assert.Equal(t, snap, pay.Snapshot())
	st := h.g.PolicyStatus()
	assert.Equal(t, "v1", st.Version)
	assert.Equal(t, PolicyReloads{Applied: 1, Rejected: 1}, st.Reloads)
	assert.Equal(t, PolicyRejected, st.Last.Result)
}

func TestFollow_GoneOrUnreadableDocumentKeepsThePolicyInForce(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"open_for": "40s", "max_open_for": "2m"}}`)

	c := h.send(PolicyDocument{Gone: true})
	assert.Equal(t, PolicyGone, c.Result)
	assert.Equal(t, "v1", c.InForce)
	c = h.send(PolicyDocument{Err: errors.New("permission denied")})
	assert.Equal(t, PolicyUnreadable, c.Result)
	assert.Equal(t, "permission denied", c.Err)
	assert.Equal(t, "v1", c.InForce)

	assert.Equal(t, 40*time.Second, mustGet(t, h.g, "orders.Create").Policy().OpenFor)
	st := h.g.PolicyStatus()
	assert.Equal(t, "v1", st.Version)
	assert.Equal(t, PolicyReloads{Applied: 1, Gone: 1, Unreadable: 1}, st.Reloads)
}

// A group follows one source: a second one, or policies set by code,
// cannot quietly replace what the first published.
func TestFollow_ASecondSourceIsRefused(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"open_for": "40s", "max_open_for": "2m"}}`)

	_, err := h.g.Follow(context.Background(), newChanSource("etcd:/other"))
	require.ErrorIs(t, err, ErrFollowing)
	assert.Contains(t, err.Error(), "test:policies", "names the source in force")
	require.ErrorIs(t, h.g.SetPolicies(GroupPolicy{}), ErrFollowing)
	require.ErrorIs(t, h.g.LoadPolicies([]byte(`{}`)), ErrFollowing)
	assert.Equal(t, 40*time.Second, h.g.Policies().Default.OpenFor)

	require.NoError(t, h.f.Close())
	assert.Equal(t, "", h.g.PolicyStatus().Following)
	assert.Equal(t, "v1", h.g.PolicyStatus().Version, "kept after Close")
	require.NoError(t, h.g.SetPolicies(GroupPolicy{}))
	st := h.g.PolicyStatus()
	assert.Equal(t, OriginCode, st.Origin)
	assert.Equal(t, "", st.Version)

	other := newChanSource("etcd:/other")
	f, err := h.g.Follow(context.Background(), other)
	require.NoError(t, err, "after Close another source may be followed")
	require.NoError(t, f.Close())
}

func TestFollow_StopsWithItsContextAndCloseLeavesNoGoroutine(t *testing.T) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	f, err := g.Follow(ctx, newChanSource("test:a"))
	require.NoError(t, err)
	cancel()
	<-f.Done()
	assert.NoError(t, f.Err())
	assert.NoError(t, f.Close(), "Close after the context ended")
	assert.NoError(t, f.Close(), "twice")

	f, err = g.Follow(context.Background(), newChanSource("test:b"))
	require.NoError(t, err, "the group is free again")
	f.Stop()
	<-f.Done()

	_, err = g.Follow(nil, newChanSource("test:c")) //nolint:staticcheck // a nil ctx is refused
	assert.Error(t, err)
	_, err = g.Follow(context.Background(), nil)
	assert.Error(t, err)
}

type panicSource struct{}

func (panicSource) Watch(context.Context, func(PolicyDocument)) error { panic("source bug") }

func TestFollow_ASourceThatGivesUpOrPanicsStopsTheFollower(t *testing.T) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	require.NoError(t, err)
	broken := errors.New("no such store")
	f, err := g.Follow(context.Background(), &chanSource{stop: broken})
	require.NoError(t, err)
	<-f.Done()
	assert.ErrorIs(t, f.Err(), broken)
	assert.ErrorIs(t, f.Close(), broken)

	f, err = g.Follow(context.Background(), panicSource{})
	require.NoError(t, err)
	<-f.Done()
	assert.ErrorContains(t, f.Err(), "source bug")
	assert.Equal(t, "", g.PolicyStatus().Following)
}

// A reload never waits for the calls in flight, nor they for it.
func TestFollow_AReloadDoesNotWaitForCallsInFlight(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
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
	assert.Equal(t, PolicyApplied, c.Result, "applied while a call is running")
	close(release)
	wg.Wait()
	b := mustGet(t, h.g, "orders.Create")
	assert.Equal(t, 5, b.Policy().MinRequests)
	assert.Equal(t, uint64(2), b.Snapshot().Counted, "the call in flight counts in the kept window")
}

func TestFollow_APolicySubscriberThatPanicsDoesNotStopTheFollower(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	unsub := h.g.SubscribePolicy(func(PolicyChange) { panic("subscriber bug") })
	c := h.doc("v2", `{"default": {"min_requests": 5}}`)
	assert.Equal(t, PolicyApplied, c.Result)
	unsub()
	unsub()
	c = h.doc("v3", `{"default": {"min_requests": 6}}`)
	assert.Equal(t, PolicyApplied, c.Result)
	assert.NotNil(t, h.g.SubscribePolicy(nil))
}

func mustGet(t *testing.T, g *Group, key string) *Breaker {
	t.Helper()
	b, err := g.Get(key)
	require.NoError(t, err)
	return b
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lockedBuffer is a log sink written by the follower's goroutine while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// slogTo logs as text to w, without the time, so that records compare.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// Every document ends in one log record, loud enough for its result.
func TestFollow_EveryDocumentIsLogged(t *testing.T) {
	logs := &lockedBuffer{}
	h := newFollowHarness(t, GroupConfig{}, WithLogger(slogTo(logs)))
	h.calls("payment.Charge", 1, nil)
	h.doc("v2", `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	h.doc("v3", `{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`)
	h.send(PolicyDocument{Gone: true})
	h.send(PolicyDocument{Err: errors.New("connection refused")})
	h.doc("v4", `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	assert.Equal(t, `level=INFO msg="breaker policy applied" breaker.origin=test:policies breaker.version=v2 `+
		`"breaker.changes.overrides[\"payment.Charge\"].open_for"="30s → 45s" "breaker.changes.overrides[\"payment.Charge\"].max_open_for"="2m0s → 3m0s"
level=ERROR msg="breaker policy rejected" breaker.origin=test:policies breaker.version=v3 breaker.in_force=v2 `+
		`"breaker.problems.overrides[\"payment.Charge\"].max_open_for"="must be at least open_for (30s), got 10s"
level=WARN msg="breaker policy gone" breaker.origin=test:policies breaker.in_force=v2
level=WARN msg="breaker policy unreadable" breaker.origin=test:policies breaker.in_force=v2 breaker.error="connection refused"
level=INFO msg="breaker policy applied" breaker.origin=test:policies breaker.version=v4 breaker.changes=none
`, logs.String())
}

// A group without a logger still logs its policy records, to the default
// logger: a change of policy is never silent.
func TestFollow_WithoutALoggerRecordsGoToTheDefaultLogger(t *testing.T) {
	logs := &lockedBuffer{}
	prev := slog.Default()
	slog.SetDefault(slogTo(logs))
	defer slog.SetDefault(prev)
	g, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	src := newChanSource("test:default")
	rec := make(chan PolicyChange, 1)
	defer g.SubscribePolicy(func(c PolicyChange) { rec <- c })()
	f, err := g.Follow(context.Background(), src)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	src.docs <- PolicyDocument{Version: "v1", Data: []byte(`{"default": {"min_requests": 30}}`)}
	<-rec
	assert.Contains(t, logs.String(), `msg="breaker policy applied" breaker.origin=test:default breaker.version=v1 breaker.changes.default.min_requests="20 → 30"`)
}

// A followed document that is not one well-formed document is refused
// and reported, and no breaker goes back to the defaults.
func TestFollow_MalformedDocumentsAreRefusedAndChangeNothing(t *testing.T) {
	const good = `{"default": {"min_requests": 7}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
	huge := []byte(`{"default": {"min_requests": 7}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}` +
		strings.Repeat(" ", MaxPolicyDocumentSize))
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
			h := newFollowHarness(t, GroupConfig{})
			require.Equal(t, PolicyApplied, h.doc("v1", good).Result)
			pay := mustGet(t, h.g, "payment.Charge")
			other := mustGet(t, h.g, "orders.Create")

			rec := h.doc("v2", c.data)
			assert.Equal(t, PolicyRejected, rec.Result)
			assert.Equal(t, "v1", rec.InForce)
			require.NotEmpty(t, rec.Problems)
			assert.Equal(t, c.field, rec.Problems[0].Field)
			assert.Contains(t, rec.Problems[0].Problem, c.problem)
			assert.Equal(t, 45*time.Second, pay.Policy().OpenFor, "not reset to the defaults")
			assert.Equal(t, 7, other.Policy().MinRequests, "not reset to the defaults")
			assert.Equal(t, "v1", h.g.PolicyStatus().Version)

			_, err := ParseGroupPolicy([]byte(c.data))
			assert.Error(t, err, "refused by ParseGroupPolicy too")
		})
	}
	_, err := ParseGroupPolicy([]byte(strings.Repeat(" ", MaxPolicyDocumentSize-2) + "{}"))
	assert.NoError(t, err, "a document of exactly the limit is read")
}

// The version in force delivered again (a refused edit undone, so the
// file's hash is the one in force) changes nothing: it is counted and
// recorded as unchanged, logged at Debug, and the version in force keeps
// its record of when it was applied and what it changed, where it used to
// be logged as applied with no changes and lose that record.
func TestFollow_TheVersionInForceDeliveredAgainIsUnchanged(t *testing.T) {
	logs := &lockedBuffer{}
	h := newFollowHarness(t, GroupConfig{}, WithLogger(slog.New(slog.NewTextHandler(logs,
		&slog.HandlerOptions{Level: slog.LevelDebug}))))
	const v2 = `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
	applied := h.doc("v2", v2)
	require.Equal(t, PolicyApplied, applied.Result)
	require.NotEmpty(t, applied.Changes)
	at := h.clk.Now()
	h.clk.Add(time.Minute)
	require.Equal(t, PolicyRejected, h.doc("v3", `{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`).Result)
	h.clk.Add(time.Minute)

	c := h.doc("v2", v2)
	assert.Equal(t, PolicyUnchanged, c.Result)
	assert.Equal(t, "v2", c.InForce)
	assert.Empty(t, c.Changes)
	st := h.g.PolicyStatus()
	assert.Equal(t, "v2", st.Version)
	assert.Equal(t, at, st.AppliedAt, "applied when it first was")
	assert.Equal(t, applied.Changes, st.Changes, "what the version in force changed is kept")
	assert.Equal(t, PolicyReloads{Applied: 1, Rejected: 1, Unchanged: 1}, st.Reloads)
	require.NotNil(t, st.Last)
	assert.Equal(t, PolicyUnchanged, st.Last.Result, "the refused version is no longer the last word")
	assert.Contains(t, logs.String(), `level=DEBUG msg="breaker policy unchanged" breaker.origin=test:policies breaker.version=v2 breaker.in_force=v2`)
	assert.Equal(t, 1, strings.Count(logs.String(), "breaker policy applied"))

	// Another version of the same content is applied: the version in
	// force is the one delivered, and it changed nothing.
	c = h.doc("v4", v2)
	assert.Equal(t, PolicyApplied, c.Result)
	assert.Empty(t, c.Changes)
}

// A push that lowers open_for and max_open_for during an outage cuts the
// cooldown that is running, through a live source as through SetPolicy:
// a breaker whose cooldown had doubled to 2m probes once the new maximum,
// 20s, has passed since that cooldown began. It used to wait out the 2m.
func TestFollow_APushDuringAnOutageCutsTheRunningCooldown(t *testing.T) {
	h := newFollowHarness(t, GroupConfig{})
	require.Equal(t, PolicyApplied, h.doc("v1", `{"default": {"strict_probes": true}}`).Result)
	h.calls("payment.Charge", 20, errBoom) // trips: 30s
	pay := mustGet(t, h.g, "payment.Charge")
	h.clk.Add(30 * time.Second)
	h.calls("payment.Charge", 1, errBoom) // the probe fails: 1m
	h.clk.Add(time.Minute)
	h.calls("payment.Charge", 1, errBoom) // and again: 2m
	st := pay.Status()
	require.Equal(t, 2*time.Minute, st.Cooldown)
	require.Equal(t, ReasonErrorRatio, st.TripReason)
	reopened := h.clk.Now()

	h.clk.Add(5 * time.Second)
	c := h.doc("v2", `{"default": {"strict_probes": true, "open_for": "10s", "max_open_for": "20s"}}`)
	require.Equal(t, PolicyApplied, c.Result)
	st = pay.Status()
	assert.Equal(t, 20*time.Second, st.Cooldown)
	require.NotNil(t, st.ProbeAt)
	assert.Equal(t, reopened.Add(20*time.Second), *st.ProbeAt)
	assert.Equal(t, ReasonErrorRatio, st.TripReason, "the outage keeps its cause")
	h.clk.Add(15 * time.Second)
	assert.Equal(t, HalfOpen, pay.State())

	// A push that raises them leaves the running cooldown alone.
	h.calls("payment.Charge", 1, errBoom) // reopened for 20s (10s doubled, capped)
	require.Equal(t, 20*time.Second, pay.Status().Cooldown)
	require.Equal(t, PolicyApplied, h.doc("v3", `{"default": {"strict_probes": true, "open_for": "1m", "max_open_for": "5m"}}`).Result)
	assert.Equal(t, 20*time.Second, pay.Status().Cooldown)
}
