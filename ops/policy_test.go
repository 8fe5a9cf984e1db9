package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docSource delivers the documents the test sends it.
type docSource chan live.Document

func (s docSource) Watch(ctx context.Context, deliver func(live.Document)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-s:
			deliver(d)
		}
	}
}

// The snapshot says which version is in force, since when, what it
// changed, and what became of the last document: a rejected one shows
// beside the version that stays.
func TestSnapshot_ShowsThePolicyInForce(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	src := make(docSource)
	done := make(chan live.Change)
	f, err := live.Follow(context.Background(), gh.g, src, live.OnChange(func(c live.Change) { done <- c }))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()

	gh.clk.Add(time.Minute)
	src <- live.Document{Origin: "file:/etc/shop/breakers.json", Version: "sha256:5d41402abc4b2a76",
		Data: []byte(`{"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`)}
	<-done
	gh.clk.Add(time.Minute)
	src <- live.Document{Origin: "file:/etc/shop/breakers.json", Version: "sha256:7f83b1657ff1fc53",
		Data: []byte(`{"overrides": {"payment.Charge": {"max_open_for": "10s"}}}`)}
	<-done

	data, err := json.Marshal(Snapshot(gh.g, Thresholds{}, f))
	require.NoError(t, err)
	var doc struct {
		Policy struct {
			Origin    string    `json:"origin"`
			Version   string    `json:"version"`
			AppliedAt time.Time `json:"applied_at"`
			Following string    `json:"following"`
			Changes   []struct {
				Path, From, To string
			} `json:"changes"`
			Reloads map[string]int `json:"reloads"`
			Last    struct {
				Result   string `json:"result"`
				Version  string `json:"version"`
				InForce  string `json:"in_force"`
				Problems []struct {
					Field, Problem string
				} `json:"problems"`
			} `json:"last"`
		} `json:"policy"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	p := doc.Policy
	assert.Equal(t, "file:/etc/shop/breakers.json", p.Origin)
	assert.Equal(t, "sha256:5d41402abc4b2a76", p.Version)
	assert.Equal(t, gh.t0.Add(time.Minute), p.AppliedAt)
	assert.Equal(t, "file:/etc/shop/breakers.json", p.Following)
	require.Len(t, p.Changes, 2)
	assert.Equal(t, `overrides["payment.Charge"].open_for`, p.Changes[0].Path)
	assert.Equal(t, "30s", p.Changes[0].From)
	assert.Equal(t, "45s", p.Changes[0].To)
	assert.Equal(t, map[string]int{"applied": 1, "rejected": 1, "gone": 0, "unreadable": 0, "unchanged": 0}, p.Reloads)
	assert.Equal(t, "rejected", p.Last.Result)
	assert.Equal(t, "sha256:7f83b1657ff1fc53", p.Last.Version)
	assert.Equal(t, "sha256:5d41402abc4b2a76", p.Last.InForce)
	require.Len(t, p.Last.Problems, 1)
	assert.Equal(t, `overrides["payment.Charge"].max_open_for`, p.Last.Problems[0].Field)

	var back GroupSnapshot
	require.NoError(t, json.Unmarshal(data, &back), "decodes back")
	assert.Equal(t, live.Rejected, back.Policy.Last.Result)
	assert.Equal(t, "sha256:5d41402abc4b2a76", back.Policy.Version)

	// Without the follower, the snapshot has the group's label alone.
	bare := Snapshot(gh.g, Thresholds{}, nil).Policy
	assert.Equal(t, "sha256:5d41402abc4b2a76", bare.Version)
	assert.Equal(t, gh.t0.Add(time.Minute), bare.AppliedAt)
	assert.Nil(t, bare.Changes)
	assert.Nil(t, bare.Last)
	assert.Equal(t, live.Reloads{}, bare.Reloads)
}

// A group running a candidate shows its version, how many breakers run
// one that differs from their own policy, and what each has done.
func TestSnapshot_ShowsTheCandidateAGroupRuns(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	hold, err := gh.g.HoldPolicies("test")
	require.NoError(t, err)
	defer hold.Release()
	gp, err := breaker.ParseGroupPolicy([]byte(`{"default": {"min_requests": 10},
		"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`))
	require.NoError(t, err)
	require.NoError(t, hold.Apply(gp, "test", "v7"))
	gh.calls("payment.Charge", 1, nil)
	gh.calls("orders.Create", 1, nil)
	ps := Snapshot(gh.g, Thresholds{}, nil).Policy
	require.NotNil(t, ps.Candidate)
	assert.Equal(t, "v7", ps.Candidate.Version)
	assert.Equal(t, 1, ps.Candidate.Breakers)
	require.Contains(t, ps.Candidate.Statuses, "payment.Charge")
	pay := ps.Candidate.Statuses["payment.Charge"]
	assert.Equal(t, "v7", pay.Version)
	assert.Equal(t, breaker.Closed, pay.State)
	assert.Equal(t, 0.2, pay.Policy.ErrorRatio)
	data, err := json.Marshal(ps)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"candidate":{"version":"v7","breakers":1,"statuses":{"payment.Charge":{"version":"v7","state":"closed"`)

	gp, err = gp.Promote()
	require.NoError(t, err)
	require.NoError(t, hold.Apply(gp, "test", "v8"))
	assert.Nil(t, Snapshot(gh.g, Thresholds{}, nil).Policy.Candidate)
}

// The snapshot carries the follower's record of a source that is down and
// of the last rejected document, which a gone source does not clear: what
// the status page's banner and rejection read.
func TestSnapshot_CarriesASourceThatIsDownAndTheRejectionItKeeps(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	src := make(docSource)
	done := make(chan live.Change)
	f, err := live.Follow(context.Background(), gh.g, src, live.OnChange(func(c live.Change) { done <- c }))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	const origin = "file:/etc/shop/breakers.json"
	for _, d := range []live.Document{
		{Origin: origin, Version: "v1", Data: []byte(`{}`)},
		{Origin: origin, Version: "v2", Data: []byte(`{"default": {"min_requests": -1}}`)},
		{Origin: origin, Gone: true},
	} {
		src <- d
		<-done
	}
	ps := Snapshot(gh.g, Thresholds{}, f).Policy
	require.NotNil(t, ps.Down)
	assert.Equal(t, live.Gone, ps.Down.Result)
	assert.Equal(t, "v1", ps.Down.InForce)
	require.NotNil(t, ps.Rejected)
	assert.Equal(t, "v2", ps.Rejected.Version)
	assert.Equal(t, live.Gone, ps.Last.Result)
	data, err := json.Marshal(ps)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"down":{"origin":"file:/etc/shop/breakers.json","version":"","result":"gone"`)
	assert.Contains(t, string(data), `"rejected":{"origin":"file:/etc/shop/breakers.json","version":"v2","result":"rejected"`)

	src <- live.Document{Origin: origin, Version: "v1", Data: []byte(`{}`)} // put back
	<-done
	ps = Snapshot(gh.g, Thresholds{}, f).Policy
	assert.Nil(t, ps.Down)
	assert.Nil(t, ps.Rejected)
}
