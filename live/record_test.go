package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every document ends in one log record, loud enough for its result.
func TestFollow_EveryDocumentIsLogged(t *testing.T) {
	logs := &testutil.LogBuffer{}
	h := newFollowHarness(t, breaker.GroupConfig{}, breaker.WithLogger(testutil.TextLogger(logs)))
	h.calls("payment.Charge", 1, nil)
	h.doc("v2", `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)
	h.doc("v3", `{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`)
	h.send(live.Document{Gone: true})
	h.send(live.Document{Err: errors.New("connection refused")})
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
	logs := &testutil.LogBuffer{}
	prev := slog.Default()
	slog.SetDefault(testutil.TextLogger(logs))
	defer slog.SetDefault(prev)
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	src := newChanSource("test:default")
	rec := make(chan live.Change, 1)
	f, err := live.Follow(context.Background(), g, src, live.OnChange(func(c live.Change) { rec <- c }))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	src.docs <- live.Document{Version: "v1", Data: []byte(`{"default": {"min_requests": 30}}`)}
	<-rec
	assert.Contains(t, logs.String(), `msg="breaker policy applied" breaker.origin=test:default breaker.version=v1 breaker.changes.default.min_requests="20 → 30"`)
}

// The version in force delivered again (a refused edit undone, so the
// file's hash is the one in force) changes nothing: it is counted and
// recorded as unchanged, logged at Info as put back (at Debug when
// nothing was refused before it), and the version in force keeps its
// record of when it was applied and what it changed, where it used to be
// logged as applied with no changes and lose that record.
func TestFollow_TheVersionInForceDeliveredAgainIsUnchanged(t *testing.T) {
	logs := &testutil.LogBuffer{}
	h := newFollowHarness(t, breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(logs,
		&slog.HandlerOptions{Level: slog.LevelDebug}))))
	const v2 = `{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
	applied := h.doc("v2", v2)
	require.Equal(t, live.Applied, applied.Result)
	require.NotEmpty(t, applied.Changes)
	at := h.clk.Now()
	h.clk.Add(time.Minute)
	require.Equal(t, live.Rejected, h.doc("v3", `{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`).Result)
	h.clk.Add(time.Minute)

	c := h.doc("v2", v2)
	assert.Equal(t, live.Unchanged, c.Result)
	assert.Equal(t, "v2", c.InForce)
	assert.Empty(t, c.Changes)
	label := h.g.PolicyLabel()
	assert.Equal(t, "v2", label.Version)
	assert.Equal(t, at, label.AppliedAt, "applied when it first was")
	st := h.f.Status()
	require.NotNil(t, st.Applied)
	assert.Equal(t, applied.Changes, st.Applied.Changes, "what the version in force changed is kept")
	assert.Equal(t, live.Reloads{Applied: 1, Rejected: 1, Unchanged: 1}, st.Reloads)
	require.NotNil(t, st.Last)
	assert.Equal(t, live.Unchanged, st.Last.Result, "the refused version is no longer the last word")
	assert.Contains(t, logs.String(), `level=INFO msg="breaker policy put back, unchanged" breaker.origin=test:policies breaker.version=v2 breaker.in_force=v2 breaker.after=rejected breaker.rejected=v3`)
	assert.Equal(t, 1, strings.Count(logs.String(), "breaker policy applied"))
	assert.Equal(t, live.Unchanged, h.doc("v2", v2).Result, "a plain re-delivery")
	assert.Contains(t, logs.String(), `level=DEBUG msg="breaker policy unchanged" breaker.origin=test:policies breaker.version=v2 breaker.in_force=v2`+"\n")

	// Another version of the same content is applied: the version in
	// force is the one delivered, and it changed nothing.
	c = h.doc("v4", v2)
	assert.Equal(t, live.Applied, c.Result)
	assert.Empty(t, c.Changes)
}

// A candidate that changes one field is logged as that field, from the
// value in force, as a reload of the document itself is; and so is its
// going. Its record used to list every field of every key (72 attributes
// for three keys), each as " → value", and as many again when it went.
func TestFollow_ACandidateIsLoggedAsWhatItChanges(t *testing.T) {
	logs := &testutil.LogBuffer{}
	h := newFollowHarness(t, breaker.GroupConfig{}, breaker.WithLogger(testutil.TextLogger(logs)))
	const overrides = `"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}, "orders.Create": {"probes": 5}}`
	require.Equal(t, live.Applied, h.doc("v1", `{"default": {"slow_call": "200ms", "slow_ratio": 0.5}, `+overrides+`}`).Result)
	c := h.doc("v2", `{"default": {"slow_call": "200ms", "slow_ratio": 0.5}, `+overrides+`, "candidate": {"default": {"slow_call": "300ms"}}}`)
	require.Equal(t, live.Applied, c.Result)
	var paths []string
	for _, fc := range c.Changes {
		paths = append(paths, fc.Path+" "+fc.From+" → "+fc.To)
	}
	assert.Equal(t, []string{
		`candidate.default.slow_call 200ms → 300ms`,
		`candidate.overrides["orders.Create"].slow_call 200ms → 300ms`,
		`candidate.overrides["payment.Charge"].slow_call 200ms → 300ms`,
	}, paths)
	c = h.doc("v3", `{"default": {"slow_call": "200ms", "slow_ratio": 0.5}, `+overrides+`}`)
	require.Len(t, c.Changes, 3)
	assert.Equal(t, live.FieldChange{Key: "default", Path: "candidate.default.slow_call", Field: "slow_call",
		From: "300ms", To: ""}, c.Changes[0])
	records := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, records, 3)
	assert.Equal(t, `level=INFO msg="breaker policy applied" breaker.origin=test:policies breaker.version=v2 `+
		`breaker.changes.candidate.default.slow_call="200ms → 300ms" `+
		`"breaker.changes.candidate.overrides[\"orders.Create\"].slow_call"="200ms → 300ms" `+
		`"breaker.changes.candidate.overrides[\"payment.Charge\"].slow_call"="200ms → 300ms"`, records[1])
}

// A candidate's fields show in the record under candidate.: one that
// comes, from the value in force; promoting it shows as the document's
// own fields changing and the candidate's going, to "".
func TestFollow_ACandidateShowsInTheChangesUnderItsPath(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	const doc = `{"default": {"min_requests": 10}, "candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`
	c := h.doc("v7", doc)
	require.Equal(t, live.Applied, c.Result)
	assert.Contains(t, c.Changes, live.FieldChange{Key: "payment.Charge",
		Path: `candidate.overrides["payment.Charge"].error_ratio`, Field: "error_ratio", From: "0.5", To: "0.2"})
	assert.Contains(t, c.Changes, live.FieldChange{Key: "default",
		Path: "default.min_requests", Field: "min_requests", From: "20", To: "10"})

	gp, err := breaker.ParseGroupPolicy([]byte(doc))
	require.NoError(t, err)
	promoted, err := gp.Promote()
	require.NoError(t, err)
	data, err := json.Marshal(promoted)
	require.NoError(t, err)
	c = h.doc("v8", string(data))
	require.Equal(t, live.Applied, c.Result)
	assert.Contains(t, c.Changes, live.FieldChange{Key: "payment.Charge",
		Path: `overrides["payment.Charge"].error_ratio`, Field: "error_ratio", From: "0.5", To: "0.2"})
	assert.Contains(t, c.Changes, live.FieldChange{Key: "payment.Charge",
		Path: `candidate.overrides["payment.Charge"].error_ratio`, Field: "error_ratio", From: "0.2", To: ""})
	for _, fc := range c.Changes {
		assert.False(t, strings.HasPrefix(fc.Path, "default."), "the default did not change: %+v", fc)
	}
}
