package breaker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFallback_ServesOnlyRefusalsAndCountsThemApart(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	cached := func(_ context.Context, err error) (int, error) {
		var oe *OpenError
		require.ErrorAs(t, err, &oe, "the fallback receives the refusal")
		assert.Equal(t, ReasonErrorRatio, oe.Reason)
		assert.Equal(t, 30*time.Second, oe.RetryAfter())
		return -1, nil
	}
	fails := func(context.Context) (int, error) { return 0, errBoom }
	for i := 0; i < 20; i++ {
		_, err := Fallback(context.Background(), h.b, fails, cached)
		require.ErrorIs(t, err, errBoom, "a failure is not a refusal: no fallback")
	}
	h.requireState(Open)
	n, err := Fallback(context.Background(), h.b, func(context.Context) (int, error) { return 7, nil }, cached)
	require.NoError(t, err)
	assert.Equal(t, -1, n)
	c := h.b.Counters()
	assert.Equal(t, uint64(1), c.Fallbacks)
	assert.Equal(t, uint64(1), c.Rejected)
	assert.Equal(t, uint64(20), c.Failures, "fallbacks are not outcomes")
	assert.Equal(t, Snapshot{Counted: 20, Failures: 20}, h.b.Snapshot(), "nor do they enter the window")
}

func TestFallbackOnFailure_AlsoServesFailuresAndTimeoutsButNotIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	var got []error
	fb := func(_ context.Context, err error) (string, error) {
		got = append(got, err)
		return "stale", nil
	}
	call := func(err error) (string, error) {
		return FallbackOnFailure(context.Background(), h.b, func(context.Context) (string, error) { return "fresh", err }, fb)
	}
	v, err := call(nil)
	assert.Equal(t, "fresh", v)
	assert.NoError(t, err)
	v, err = call(errBoom)
	assert.Equal(t, "stale", v)
	assert.NoError(t, err)
	_, _ = call(context.DeadlineExceeded)
	invalid := Ignore(errors.New("bad sku"))
	v, err = call(invalid)
	assert.Equal(t, "fresh", v, "an ignored error is the caller's: no fallback")
	assert.ErrorIs(t, err, invalid)
	assert.Equal(t, []error{errBoom, context.DeadlineExceeded}, got)
	assert.Equal(t, uint64(2), h.b.Counters().Fallbacks)
	assert.Equal(t, uint64(1), h.b.Counters().Failures, "the failure itself still counts")
}

func TestFallback_NoFallbackWhenTheCallerHasGone(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Fallback(ctx, h.b, func(context.Context) (int, error) { return 1, nil },
		func(context.Context, error) (int, error) { called = true; return 0, nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	_, err = Fallback[int](context.Background(), h.b, func(context.Context) (int, error) { return 1, nil }, nil)
	assert.EqualError(t, err, "breaker: nil fallback")
	assert.Zero(t, h.b.Counters().Fallbacks)
}

func TestRecover_FallsBackForARefusalMadeElsewhereAndCountsIt(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	// A refusal that reached us through other code, wrapped on the way.
	refusal := h.b.Do(context.Background(), func(context.Context) error { return nil })
	wrapped := fmt.Errorf("GET /stock/42: %w", refusal)
	v, err := Recover(context.Background(), "", wrapped, func(_ context.Context, err error) (string, error) {
		assert.ErrorIs(t, err, ErrOpen)
		return "cached", nil
	})
	assert.Equal(t, "cached", v)
	assert.NoError(t, err)
	assert.Equal(t, uint64(1), h.b.Counters().Fallbacks)

	v, err = Recover(context.Background(), "fresh", errBoom, func(context.Context, error) (string, error) { return "cached", nil })
	assert.Equal(t, "fresh", v, "not a refusal: unchanged")
	assert.ErrorIs(t, err, errBoom)
	v, err = Recover(context.Background(), "fresh", nil, func(context.Context, error) (string, error) { return "cached", nil })
	assert.Equal(t, "fresh", v)
	assert.NoError(t, err)
	_, err = Recover[string](context.Background(), "", refusal, nil)
	assert.EqualError(t, err, "breaker: nil fallback")
	assert.Equal(t, uint64(1), h.b.Counters().Fallbacks)
}

// carried is an error as the integrations return it: the call's error with
// the breaker that guarded it and the outcome it counted.
type carried struct {
	err error
	b   *Breaker
	o   Outcome
}

func (e *carried) Error() string                       { return e.err.Error() }
func (e *carried) Unwrap() error                       { return e.err }
func (e *carried) BreakerOutcome() (*Breaker, Outcome) { return e.b, e.o }

func TestRecoverOnFailure_ServesFailuresAndTimeoutsOnTheirBreaker(t *testing.T) {
	ctx := context.Background()
	for _, row := range []struct {
		o    Outcome
		want bool
	}{{Failure, true}, {Timeout, true}, {Ignored, false}, {Success, false}} {
		b, err := New("x", DefaultPolicy())
		require.NoError(t, err)
		var got error
		callErr := fmt.Errorf("wrapped: %w", &carried{err: errBoom, b: b, o: row.o})
		v, err := RecoverOnFailure(ctx, 1, callErr, func(_ context.Context, err error) (int, error) {
			got = err
			return 2, nil
		})
		if row.want {
			assert.NoError(t, err, "%v", row.o)
			assert.Equal(t, 2, v)
			assert.ErrorIs(t, got, errBoom)
			assert.Equal(t, uint64(1), b.Counters().Fallbacks, "%v", row.o)
		} else {
			assert.Same(t, callErr, err, "%v", row.o)
			assert.Equal(t, 1, v)
			assert.NoError(t, got, "%v: fallback called", row.o)
			assert.Zero(t, b.Counters().Fallbacks, "%v", row.o)
		}
	}
}

func TestRecoverOnFailure_LeavesOtherResultsAlone(t *testing.T) {
	b, err := New("x", DefaultPolicy())
	require.NoError(t, err)
	called := false
	fb := func(context.Context, error) (int, error) { called = true; return 2, nil }

	v, err := RecoverOnFailure(context.Background(), 1, nil, fb)
	assert.Equal(t, 1, v)
	assert.NoError(t, err)

	v, err = RecoverOnFailure(context.Background(), 1, errBoom, fb)
	assert.Equal(t, 1, v)
	assert.Same(t, errBoom, err, "an error that carries no breaker")

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	failed := &carried{err: errBoom, b: b, o: Failure}
	v, err = RecoverOnFailure(gone, 1, failed, fb)
	assert.Equal(t, 1, v)
	assert.Same(t, failed, err, "the caller has gone")

	assert.False(t, called)
	assert.Zero(t, b.Counters().Fallbacks)

	_, err = RecoverOnFailure[int](context.Background(), 1, failed, nil)
	assert.ErrorContains(t, err, "nil fallback")
}

func TestRecoverOnFailure_ServesRefusals(t *testing.T) {
	b, err := New("x", DefaultPolicy())
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedOpen))
	refusal := b.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refusal, ErrOpen)
	v, err := RecoverOnFailure(context.Background(), 1, refusal, func(context.Context, error) (int, error) { return 2, nil })
	assert.NoError(t, err)
	assert.Equal(t, 2, v)
	assert.Equal(t, uint64(1), b.Counters().Fallbacks)
	assert.Equal(t, uint64(1), b.Counters().Rejected)
}
