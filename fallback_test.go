package breaker

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

func TestFallbackResult_FallsBackForARefusalMadeElsewhereAndCountsIt(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	// A refusal that reached us through other code, wrapped on the way.
	refusal := h.b.Do(context.Background(), func(context.Context) error { return nil })
	wrapped := fmt.Errorf("GET /stock/42: %w", refusal)
	v, err := FallbackResult(context.Background(), "", wrapped, func(_ context.Context, err error) (string, error) {
		assert.ErrorIs(t, err, ErrOpen)
		return "cached", nil
	})
	assert.Equal(t, "cached", v)
	assert.NoError(t, err)
	assert.Equal(t, uint64(1), h.b.Counters().Fallbacks)

	v, err = FallbackResult(context.Background(), "fresh", errBoom, func(context.Context, error) (string, error) { return "cached", nil })
	assert.Equal(t, "fresh", v, "not a refusal: unchanged")
	assert.ErrorIs(t, err, errBoom)
	v, err = FallbackResult(context.Background(), "fresh", nil, func(context.Context, error) (string, error) { return "cached", nil })
	assert.Equal(t, "fresh", v)
	assert.NoError(t, err)
	_, err = FallbackResult[string](context.Background(), "", refusal, nil)
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

func TestFallbackResultOnFailure_ServesFailuresAndTimeoutsOnTheirBreaker(t *testing.T) {
	ctx := context.Background()
	for _, row := range []struct {
		o    Outcome
		want bool
	}{{Failure, true}, {Timeout, true}, {Ignored, false}, {Success, false}} {
		b, err := New("x", DefaultPolicy())
		require.NoError(t, err)
		var got error
		callErr := fmt.Errorf("wrapped: %w", &carried{err: errBoom, b: b, o: row.o})
		v, err := FallbackResultOnFailure(ctx, 1, callErr, func(_ context.Context, err error) (int, error) {
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

func TestFallbackResultOnFailure_LeavesOtherResultsAlone(t *testing.T) {
	b, err := New("x", DefaultPolicy())
	require.NoError(t, err)
	called := false
	fb := func(context.Context, error) (int, error) { called = true; return 2, nil }

	v, err := FallbackResultOnFailure(context.Background(), 1, nil, fb)
	assert.Equal(t, 1, v)
	assert.NoError(t, err)

	v, err = FallbackResultOnFailure(context.Background(), 1, errBoom, fb)
	assert.Equal(t, 1, v)
	assert.Same(t, errBoom, err, "an error that carries no breaker")

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	failed := &carried{err: errBoom, b: b, o: Failure}
	v, err = FallbackResultOnFailure(gone, 1, failed, fb)
	assert.Equal(t, 1, v)
	assert.Same(t, failed, err, "the caller has gone")

	assert.False(t, called)
	assert.Zero(t, b.Counters().Fallbacks)

	_, err = FallbackResultOnFailure[int](context.Background(), 1, failed, nil)
	assert.ErrorContains(t, err, "nil fallback")
}

func TestFallbackResultOnFailure_ServesRefusals(t *testing.T) {
	b, err := New("x", DefaultPolicy())
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedOpen))
	refusal := b.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refusal, ErrOpen)
	v, err := FallbackResultOnFailure(context.Background(), 1, refusal, func(context.Context, error) (int, error) { return 2, nil })
	assert.NoError(t, err)
	assert.Equal(t, 2, v)
	assert.Equal(t, uint64(1), b.Counters().Fallbacks)
	assert.Equal(t, uint64(1), b.Counters().Rejected)
}

// FallbackResultOnFailure's doc: with ctx done it returns v and err unchanged,
// the caller having gone. A refusal reached the fallback all the same,
// and was counted, because refusals were handed to FallbackResult before the
// context was looked at.
func TestFallbackResultOnFailure_LeavesARefusalAloneWhenTheCallerHasGone(t *testing.T) {
	b, err := New("x", DefaultPolicy())
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedOpen))
	refusal := b.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refusal, ErrOpen)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := FallbackResultOnFailure(gone, 1, refusal, func(context.Context, error) (int, error) { return 2, nil })
	assert.Same(t, refusal, err)
	assert.Equal(t, 1, v)
	assert.Zero(t, b.Counters().Fallbacks)
}

// nested is an outer breaker whose calls go through an inner one, as a
// handler guarded as a whole calls a dependency guarded on its own.
type nested struct {
	outer, inner *Breaker
	fbCalls      int   // calls of the fallback
	fbErr        error // the error the fallback was given
}

func newNested(t *testing.T, outerOpts ...Option) *nested {
	t.Helper()
	outer, err := New("checkout", DefaultPolicy(), outerOpts...)
	require.NoError(t, err)
	inner, err := New("payments", DefaultPolicy())
	require.NoError(t, err)
	return &nested{outer: outer, inner: inner}
}

// fn is the outer call: it goes through the inner breaker.
func (n *nested) fn(ctx context.Context) (string, error) {
	return Call(ctx, n.inner, func(context.Context) (string, error) { return "fresh", nil })
}

func (n *nested) fallback(_ context.Context, err error) (string, error) {
	n.fbCalls++
	n.fbErr = err
	return "cached", nil
}

// counts is the part of Counters the nested tests compare.
type counts struct {
	Admitted, Failures, Ignored, Rejected, Fallbacks uint64
}

func countsOf(b *Breaker) counts {
	c := b.Counters()
	return counts{c.Admitted, c.Failures, c.Ignored, c.Rejected, c.Fallbacks}
}

// TestFallback_NestedBreakersFallBackOnTheirOwnRefusal: each fallback
// helper falls back on the refusal of the breaker it is given, and counts
// the fallback on the breaker that refused. An inner breaker's refusal,
// returned by fn, is fn's error: Fallback returns it unchanged (it used to
// serve the fallback and count it, and a failure, on the outer breaker),
// the outer breaker's default classifier ignores it, and so
// FallbackOnFailure does not fall back on it either; FallbackResult does, on the
// inner breaker.
func TestFallback_NestedBreakersFallBackOnTheirOwnRefusal(t *testing.T) {
	ctx := context.Background()
	helpers := []struct {
		name string
		call func(n *nested) (string, error)
	}{
		{"Fallback", func(n *nested) (string, error) { return Fallback(ctx, n.outer, n.fn, n.fallback) }},
		{"FallbackOnFailure", func(n *nested) (string, error) { return FallbackOnFailure(ctx, n.outer, n.fn, n.fallback) }},
		{"FallbackResult", func(n *nested) (string, error) {
			v, err := Call(ctx, n.outer, n.fn)
			return FallbackResult(ctx, v, err, n.fallback)
		}},
		{"FallbackResultOnFailure", func(n *nested) (string, error) {
			v, err := Call(ctx, n.outer, n.fn)
			return FallbackResultOnFailure(ctx, v, err, n.fallback)
		}},
	}
	for _, h := range helpers {
		t.Run(h.name+"/inner refuses", func(t *testing.T) {
			n := newNested(t)
			require.NoError(t, n.inner.SetMode(ModeForcedOpen))
			v, err := h.call(n)
			refuser := func() *Breaker {
				var oe *OpenError
				if errors.As(n.fbErr, &oe) {
					return oe.b
				}
				return nil
			}
			if strings.HasPrefix(h.name, "FallbackResult") {
				require.NoError(t, err)
				assert.Equal(t, "cached", v)
				assert.Equal(t, 1, n.fbCalls)
				assert.Same(t, n.inner, refuser(), "the fallback gets the inner refusal")
				assert.Equal(t, counts{Rejected: 1, Fallbacks: 1}, countsOf(n.inner))
			} else {
				var oe *OpenError
				require.ErrorAs(t, err, &oe, "the inner refusal comes back unchanged")
				assert.Same(t, n.inner, oe.b)
				assert.Equal(t, "", v)
				assert.Zero(t, n.fbCalls, "fallback called")
				assert.Equal(t, counts{Rejected: 1}, countsOf(n.inner))
			}
			assert.Equal(t, counts{Admitted: 1, Ignored: 1}, countsOf(n.outer),
				"the outer breaker admitted the call, and an inner refusal says nothing of its downstream")
		})
		t.Run(h.name+"/outer refuses", func(t *testing.T) {
			n := newNested(t)
			require.NoError(t, n.outer.SetMode(ModeForcedOpen))
			v, err := h.call(n)
			require.NoError(t, err)
			assert.Equal(t, "cached", v)
			assert.Equal(t, 1, n.fbCalls)
			var oe *OpenError
			require.ErrorAs(t, n.fbErr, &oe)
			assert.Same(t, n.outer, oe.b)
			assert.Equal(t, counts{Rejected: 1, Fallbacks: 1}, countsOf(n.outer))
			assert.Equal(t, counts{}, countsOf(n.inner), "the inner breaker never saw the call")
		})
	}
}

// TestFallbackOnFailure_FallsBackOnAnInnerRefusalItsClassifierCounts: an
// outer breaker whose classifier counts an inner refusal as a failure
// falls back on it as on any failure, and counts the fallback on itself.
func TestFallbackOnFailure_FallsBackOnAnInnerRefusalItsClassifierCounts(t *testing.T) {
	n := newNested(t, WithClassifier(func(error) Outcome { return Failure }))
	require.NoError(t, n.inner.SetMode(ModeForcedOpen))
	v, err := FallbackOnFailure(context.Background(), n.outer, n.fn, n.fallback)
	require.NoError(t, err)
	assert.Equal(t, "cached", v)
	assert.ErrorIs(t, n.fbErr, ErrOpen)
	assert.Equal(t, counts{Admitted: 1, Failures: 1, Fallbacks: 1}, countsOf(n.outer))
	assert.Equal(t, counts{Rejected: 1}, countsOf(n.inner))

	v, err = Fallback(context.Background(), n.outer, n.fn, n.fallback)
	assert.ErrorIs(t, err, ErrOpen, "Fallback falls back on its own breaker's refusal only")
	assert.Equal(t, "", v)
	assert.Equal(t, 1, n.fbCalls)
	assert.Equal(t, counts{Admitted: 2, Failures: 2, Fallbacks: 1}, countsOf(n.outer))
}

// TestFallback_CountedOnTheKeysCurrentBreakerAfterADrop: a *Breaker kept
// after its group dropped it makes its calls on the key's current breaker,
// and the fallbacks served for them are counted there too. They used to be
// counted on the dropped breaker, which no snapshot or metric shows.
func TestFallback_CountedOnTheKeysCurrentBreakerAfterADrop(t *testing.T) {
	ctx := context.Background()
	g, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	kept, err := g.Get("inventory.GetStock")
	require.NoError(t, err)
	require.True(t, g.Remove("inventory.GetStock"))
	cur, err := g.Get("inventory.GetStock")
	require.NoError(t, err)
	require.NotSame(t, kept, cur)
	cached := func(context.Context, error) (int, error) { return -1, nil }

	v, err := FallbackOnFailure(ctx, kept, func(context.Context) (int, error) { return 0, errBoom }, cached)
	require.NoError(t, err)
	assert.Equal(t, -1, v)
	_, err = FallbackResultOnFailure(ctx, 0, &carried{err: errBoom, b: kept, o: Failure}, cached)
	require.NoError(t, err)
	require.NoError(t, cur.SetMode(ModeForcedOpen))
	v, err = Fallback(ctx, kept, func(context.Context) (int, error) { return 1, nil }, cached)
	require.NoError(t, err)
	assert.Equal(t, -1, v)

	c := cur.Counters()
	assert.Equal(t, uint64(1), c.Failures)
	assert.Equal(t, uint64(1), c.Rejected)
	assert.Equal(t, uint64(3), c.Fallbacks)
	assert.Zero(t, kept.Counters().Fallbacks)
}

// TestFallback_CountsOnlyFallbacksThatServedSomething: Counters.Fallbacks
// counts the fallbacks that answered with anything but the error they were
// given: a value, or an error of their own (a "try later", which may wrap
// the cause). A cache miss that hands the refusal or the failure back
// served nothing. Such a fallback used to be counted (10 → 11) before it
// ran. An error type that == cannot compare is compared without a panic.
func TestFallback_CountsOnlyFallbacksThatServedSomething(t *testing.T) {
	ctx := context.Background()
	b, err := New("inventory.GetStock", DefaultPolicy())
	require.NoError(t, err)
	errTryLater := errors.New("try later")
	fallbacks := []struct {
		name   string
		fb     func(context.Context, error) (int, error)
		served bool
	}{
		{"cached value", func(context.Context, error) (int, error) { return 3, nil }, true},
		{"try later", func(context.Context, error) (int, error) { return 0, errTryLater }, true},
		{"cache miss", func(_ context.Context, err error) (int, error) { return 0, err }, false},
		{"try later, wrapping the cause", func(_ context.Context, err error) (int, error) {
			return 0, fmt.Errorf("try later: %w", err)
		}, true},
		{"an uncomparable error", func(context.Context, error) (int, error) { return 0, uncomparable{"no stock"} }, true},
	}
	fails := func(context.Context) (int, error) { return 0, errBoom }
	helpers := []struct {
		name string
		call func(fb func(context.Context, error) (int, error)) error
	}{
		{"Fallback refused", func(fb func(context.Context, error) (int, error)) error {
			require.NoError(t, b.SetMode(ModeForcedOpen))
			_, err := Fallback(ctx, b, fails, fb)
			return err
		}},
		{"FallbackOnFailure", func(fb func(context.Context, error) (int, error)) error {
			require.NoError(t, b.SetMode(ModeAuto))
			_, err := FallbackOnFailure(ctx, b, fails, fb)
			return err
		}},
		{"FallbackResult", func(fb func(context.Context, error) (int, error)) error {
			require.NoError(t, b.SetMode(ModeForcedOpen))
			v, err := Call(ctx, b, fails)
			_, err = FallbackResult(ctx, v, err, fb)
			return err
		}},
		{"FallbackResultOnFailure", func(fb func(context.Context, error) (int, error)) error {
			_, err := FallbackResultOnFailure(ctx, 0, &carried{err: errBoom, b: b, o: Failure}, fb)
			return err
		}},
		{"FallbackOnFailure, uncomparable failure", func(fb func(context.Context, error) (int, error)) error {
			require.NoError(t, b.SetMode(ModeAuto))
			_, err := FallbackOnFailure(ctx, b, func(context.Context) (int, error) { return 0, uncomparable{"boom"} }, fb)
			return err
		}},
	}
	for _, h := range helpers {
		for _, f := range fallbacks {
			before := b.Counters().Fallbacks
			_ = h.call(f.fb)
			want := before
			if f.served {
				want++
			}
			assert.Equal(t, want, b.Counters().Fallbacks, "%s, %s", h.name, f.name)
		}
	}
}

// uncomparable is an error that == panics on.
type uncomparable []string

func (u uncomparable) Error() string { return u[0] }
