package breaker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Do, Call and Allow are three forms of one call: the same admission, the
// same outcomes (behaviour.md §3) and the same state machine (behaviour.md
// §4).
func TestAllow_TwoStepHasTheSameSemanticsAsDo(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	for i := 0; i < 20; i++ {
		ctx, done, err := h.b.Allow(context.Background())
		require.NoError(t, err)
		require.NotNil(t, ctx)
		done(errBoom)
		done(nil) // a second report is ignored
	}
	h.requireState(Open)
	assert.Equal(t, uint64(20), h.b.Counters().Failures)
	_, done, err := h.b.Allow(context.Background())
	require.ErrorIs(t, err, ErrOpen)
	assert.Nil(t, done)

	h.at(30 * time.Second)
	var dones []func(error)
	for i := 0; i < 3; i++ {
		ctx, done, err := h.b.Allow(context.Background())
		require.NoError(t, err)
		require.True(t, IsProbe(ctx))
		dones = append(dones, done)
	}
	_, _, err = h.b.Allow(context.Background())
	require.ErrorIs(t, err, ErrOpen)
	for _, d := range dones {
		d(nil)
	}
	h.requireState(Closed)

	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = h.b.Allow(cctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestAllow_TimeoutDeadlineAndLateResult(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second; p.MinRequests = 1; p.ErrorRatio = 1 }))
	before := time.Now()
	ctx, done, err := h.b.Allow(context.Background())
	after := time.Now()
	require.NoError(t, err)
	requireRealDeadline(t, ctx, before, after, time.Second)
	h.add(2 * time.Second)
	done(nil) // late
	h.requireState(Open)
	assert.Equal(t, uint64(1), h.b.Counters().Timeouts)
}

func TestCall_ReturnsTheTypedValue(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	n, err := Call(context.Background(), h.b, func(context.Context) (int, error) { return 42, nil })
	require.NoError(t, err)
	assert.Equal(t, 42, n)
	s, err := Call(context.Background(), h.b, func(context.Context) (string, error) { return "partial", errBoom })
	assert.Equal(t, "partial", s, "fn's results come back unchanged")
	assert.ErrorIs(t, err, errBoom)
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	s, err = Call(context.Background(), h.b, func(context.Context) (string, error) { return "x", nil })
	assert.Empty(t, s)
	assert.ErrorIs(t, err, ErrOpen)
}

// behaviour.md §1 Shape: the hot path allocates nothing. Benchmarks report
// it; this test fails if it ever changes.
func TestDo_AllocatesNothingOnTheHotPaths(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	closed, err := New("allocs.Closed", DefaultPolicy())
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = closed.Do(ctx, ok) }), "Do, closed")
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		_, _ = Call(ctx, closed, func(context.Context) (int, error) { return 1, nil })
	}), "Call, closed")

	open, err := New("allocs.Open", policy(func(p *Policy) { p.OpenFor = time.Hour; p.MaxOpenFor = time.Hour }))
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		_ = open.Do(ctx, func(context.Context) error { return errBoom })
	}
	require.Equal(t, Open, open.State())
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = open.Do(ctx, ok) }), "Do, refused")

	g, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	_ = g.Do(ctx, "allocs.Group", ok)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = g.Do(ctx, "allocs.Group", ok) }), "Group.Do, existing key")
}

// TestAllow_OneAllocationAndDoneOnce: a closed-state Allow and its done
// allocate one object (they were two: a permit and its method value),
// and a done called twice counts once, even when it is called again after
// many more permits have been handed out (the once-flags come from shared
// blocks, never reused).
func TestAllow_OneAllocationAndDoneOnce(t *testing.T) {
	b, err := New("allow", DefaultPolicy())
	require.NoError(t, err)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(500, func() {
		_, done, err := b.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done(nil)
	})
	assert.LessOrEqual(t, allocs, 1.0, "allocations per Allow + done")

	before := b.Counters().Successes
	dones := make([]func(error), 300)
	for i := range dones {
		_, done, err := b.Allow(ctx)
		require.NoError(t, err)
		dones[i] = done
	}
	for _, done := range dones {
		done(nil)
	}
	for _, done := range dones {
		done(errBoom) // later calls do nothing
	}
	c := b.Counters()
	assert.Equal(t, before+300, c.Successes)
	assert.Zero(t, c.Failures)
}

// No flag is handed out twice, from one goroutine or many, across more
// flags than a block holds; each starts false.
func TestOnceFlag_NeverHandsOutAFlagTwice(t *testing.T) {
	const goroutines, each = 4, 3 * flagsPerBlock
	var mu sync.Mutex
	seen := map[*atomic.Bool]bool{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]*atomic.Bool, 0, each)
			for i := 0; i < each; i++ {
				f := newOnceFlag()
				require.False(t, f.Load(), "a flag handed out set")
				f.Store(true)
				mine = append(mine, f)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range mine {
				require.False(t, seen[f], "a flag handed out twice")
				seen[f] = true
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*each)
}

// A flag costs a block's allocation spread over the block's flags.
func TestOnceFlag_AllocatesOnceABlock(t *testing.T) {
	allocs := testing.AllocsPerRun(10*flagsPerBlock, func() { _ = newOnceFlag() })
	assert.Less(t, allocs, 0.1)
}
