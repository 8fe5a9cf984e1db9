package calltrace

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
)

// A Recorder given to a group as its observer records every call of its
// breakers, however made (Do, Allow, Call), as the breaker settled it:
// outcomes, the refusals once it is open, the half-open probe, each at
// the breaker's time with the time the breaker took.
func TestRecorder_AsObserverRecordsEveryCallOfTheGroup(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(t0)
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Clock: clk})
	require.NoError(t, err)
	pol := breaker.DefaultPolicy()
	pol.Jitter = 0
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: pol}},
		breaker.WithClock(clk), breaker.WithObserver(r))
	require.NoError(t, err)
	ctx := context.Background()
	slow := func(context.Context) error { clk.Add(2 * time.Millisecond); return nil }
	for range 20 {
		require.NoError(t, g.Do(ctx, "inv", slow))
	}
	b, err := g.Get("inv")
	require.NoError(t, err)
	for range 20 {
		_, done, err := b.Allow(ctx)
		require.NoError(t, err)
		done(errDown)
	}
	_, err = breaker.Call(ctx, b, func(context.Context) (int, error) { return 1, nil })
	require.ErrorIs(t, err, breaker.ErrOpen)
	clk.Add(pol.OpenFor)
	require.NoError(t, g.Do(ctx, "inv", slow))
	require.NoError(t, r.Close())

	got := readAll(t, buf.Bytes())
	require.Len(t, got, 42)
	assert.Equal(t, Record{Time: t0, Key: "inv", Duration: 2 * time.Millisecond, Outcome: breaker.Success}, got[0])
	assert.Equal(t, Record{Time: t0.Add(40 * time.Millisecond), Key: "inv", Outcome: breaker.Failure}, got[20])
	assert.Equal(t, Record{Time: t0.Add(40 * time.Millisecond), Key: "inv", Refused: true}, got[40])
	assert.Equal(t, Record{Time: t0.Add(40*time.Millisecond + pol.OpenFor), Key: "inv", Duration: 2 * time.Millisecond,
		Outcome: breaker.Success, Probe: true}, got[41])
	assert.Zero(t, r.Dropped())
}

// As an observer, a sampled Recorder keeps one call in four, and a nil
// one records nothing.
func TestRecorder_AsObserverSamples(t *testing.T) {
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Sample: 0.25})
	require.NoError(t, err)
	b, err := breaker.New("inv", breaker.DefaultPolicy(), breaker.WithObserver(r))
	require.NoError(t, err)
	for range 100 {
		require.NoError(t, b.Do(context.Background(), func(context.Context) error { return nil }))
	}
	require.NoError(t, r.Close())
	assert.Len(t, readAll(t, buf.Bytes()), 25)

	var none *Recorder
	none.Observe(breaker.Observation{Name: "inv"})
	assert.Zero(t, none.Written())
}
