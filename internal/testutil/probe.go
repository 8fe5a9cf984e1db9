package testutil

import (
	"context"
	"errors"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/require"
)

// InsideAProbe runs fn as the half-open probe of another breaker, as a
// call that a caller's own breaker wraps: that breaker, on clk under
// Policy, trips, its cooldown passes (clk moves OpenFor on) and fn runs
// with its probe's context. InsideAProbe fails the test if that call was
// not a probe, and returns what it returned.
func InsideAProbe(t testing.TB, clk *clock.Mock, fn func(ctx context.Context) error) error {
	t.Helper()
	p := Policy()
	outer, err := breaker.New("app.Stock", p, breaker.WithClock(clk))
	require.NoError(t, err)
	for i := 0; i < p.MinRequests; i++ {
		_ = outer.Do(context.Background(), func(context.Context) error { return errors.New("down") })
	}
	clk.Add(p.OpenFor)
	probed := false
	err = outer.Do(context.Background(), func(ctx context.Context) error {
		probed = breaker.IsProbe(ctx)
		return fn(ctx)
	})
	require.True(t, probed, "the outer call was a probe")
	return err
}
