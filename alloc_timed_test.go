package breaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
)

// TestAllocs_TimedCallCostsOnlyItsDeadline: with Policy.CallTimeout set, a
// closed-state call allocates what context.WithTimeout allocates (the
// deadline's context, its timer and its cancel function) and nothing
// more: the breaker's own share is 0. The README's claim about
// allocations names this cost; this test holds the breaker to it, and
// fails if the deadline's cost changes without the README being told.
func TestAllocs_TimedCallCostsOnlyItsDeadline(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }

	bare := testing.AllocsPerRun(1000, func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = ok(c)
		cancel()
	})

	p := breaker.DefaultPolicy()
	p.CallTimeout = time.Second
	b, err := breaker.New("allocs.Timed", p)
	require.NoError(t, err)
	do := testing.AllocsPerRun(1000, func() { _ = b.Do(ctx, ok) })
	call := testing.AllocsPerRun(1000, func() {
		_, _ = breaker.Call(ctx, b, func(context.Context) (int, error) { return 1, nil })
	})

	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	require.NoError(t, err)
	_ = g.Do(ctx, "allocs.Timed", ok)
	group := testing.AllocsPerRun(1000, func() { _ = g.Do(ctx, "allocs.Timed", ok) })

	t.Logf("allocs per call: context.WithTimeout alone %.0f; Do %.0f, Call %.0f, Group.Do %.0f", bare, do, call, group)
	assert.Equal(t, 4.0, bare, "context.WithTimeout's allocations, as the README states them")
	assert.Equal(t, bare, do, "Do with CallTimeout: the deadline's allocations, none of the breaker's")
	assert.Equal(t, bare, call, "Call with CallTimeout")
	assert.Equal(t, bare, group, "Group.Do with CallTimeout, existing key")
}
