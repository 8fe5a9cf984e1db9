package live_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	goodDoc = `{"default": {"open_for": "40s", "max_open_for": "2m"}}`
	badDoc  = `{"default": {"open_for": "5m"}}` // above the default max_open_for
)

// Status.Down holds the record of the source gone or unreadable until it
// delivers a readable document again, whatever becomes of that one; the
// last of several such deliveries is the one shown.
func TestStatus_DownLastsUntilTheSourceDeliversAReadableDocument(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	assert.Nil(t, h.f.Status().Down, "nothing delivered yet")
	h.doc("v1", goodDoc)
	assert.Nil(t, h.f.Status().Down)

	gone := h.send(live.Document{Gone: true})
	st := h.f.Status()
	require.NotNil(t, st.Down)
	assert.Equal(t, gone, *st.Down)
	assert.Equal(t, live.Gone, st.Down.Result)
	assert.Equal(t, "v1", st.Down.InForce, "the version in force keeps running")

	h.send(live.Document{Err: errors.New("permission denied")})
	st = h.f.Status()
	require.NotNil(t, st.Down)
	assert.Equal(t, live.Unreadable, st.Down.Result, "the last of the deliveries while down")
	assert.Equal(t, "permission denied", st.Down.Err)

	// Back with the version in force: unchanged, and no longer down.
	h.doc("v1", goodDoc)
	assert.Nil(t, h.f.Status().Down)

	// Back with a document refused: readable, so no longer down either.
	h.send(live.Document{Gone: true})
	require.NotNil(t, h.f.Status().Down)
	h.doc("v2", badDoc)
	assert.Nil(t, h.f.Status().Down)

	// Back with a new version applied.
	h.send(live.Document{Err: errors.New("connection refused")})
	require.NotNil(t, h.f.Status().Down)
	h.doc("v3", `{"default": {"min_requests": 10}}`)
	assert.Nil(t, h.f.Status().Down)
}

// Status.Rejected holds the record of the last refused document until a
// valid one is delivered, applied or the version in force put back; a
// source that goes, or cannot be read, does not clear it, since nothing
// has been fixed.
func TestStatus_RejectedLastsUntilAValidDocumentEvenThroughAGoneSource(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.doc("v1", goodDoc)
	assert.Nil(t, h.f.Status().Rejected)

	h.doc("v2", badDoc)
	v3 := h.doc("v3", `{"default": {"windw": "5s"}}`)
	st := h.f.Status()
	require.NotNil(t, st.Rejected)
	assert.Equal(t, v3, *st.Rejected, "the last refused")

	h.send(live.Document{Gone: true})
	h.send(live.Document{Err: errors.New("permission denied")})
	st = h.f.Status()
	require.NotNil(t, st.Rejected, "a gone or unreadable source fixes nothing")
	assert.Equal(t, "v3", st.Rejected.Version)
	require.NotNil(t, st.Down)

	// The version in force put back is a valid document.
	h.doc("v1", goodDoc)
	st = h.f.Status()
	assert.Nil(t, st.Rejected)
	assert.Nil(t, st.Down)
	assert.Equal(t, live.Unchanged, st.Last.Result)

	// So is a new one applied.
	h.doc("v4", badDoc)
	require.NotNil(t, h.f.Status().Rejected)
	h.doc("v5", `{"default": {"min_requests": 10}}`)
	assert.Nil(t, h.f.Status().Rejected)
}

// Status gives copies: a reader cannot change the follower's records.
func TestStatus_DownAndRejectedAreCopies(t *testing.T) {
	h := newFollowHarness(t, breaker.GroupConfig{})
	h.doc("v1", goodDoc)
	h.doc("v2", badDoc)
	h.send(live.Document{Gone: true})
	st := h.f.Status()
	require.NotNil(t, st.Down)
	require.NotEmpty(t, st.Rejected.Problems)
	st.Down.InForce = "changed"
	st.Rejected.Problems[0].Problem = "changed"
	again := h.f.Status()
	assert.Equal(t, "v1", again.Down.InForce)
	assert.NotEqual(t, "changed", again.Rejected.Problems[0].Problem)

	data, err := json.Marshal(again)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Contains(t, m, "down")
	assert.Contains(t, m, "rejected")

	h.doc("v1", goodDoc)
	data, err = json.Marshal(h.f.Status())
	require.NoError(t, err)
	m = nil
	require.NoError(t, json.Unmarshal(data, &m))
	assert.NotContains(t, m, "down", "omitted while the source delivers")
	assert.NotContains(t, m, "rejected")
}
