package breaker

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewGroup_NegativeMaxBreakersIsAnError(t *testing.T) {
	g, err := NewGroup(GroupConfig{MaxBreakers: -1})
	require.EqualError(t, err, "breaker: GroupConfig.MaxBreakers must not be negative, got -1")
	assert.Nil(t, g)

	g, err = NewGroup(GroupConfig{})
	require.NoError(t, err)
	assert.Equal(t, defaultMaxBreakers, g.Status().MaxBreakers, "0 means the default")
}

// GroupConfig.MaxBreakers: past the cap, a call for a key with no breaker
// is not refused, however often it fails: it runs through the overflow
// breaker, which measures and never trips, and is counted. The breakers
// the group holds work on.
func TestGroup_PastMaxBreakersCallsRunThroughTheOverflowBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{MaxBreakers: 3}, WithLogger(discardLogger()))
	for _, k := range []string{"a", "b", "c"} {
		gh.calls(k, 1, nil)
	}
	require.Equal(t, 3, gh.g.Len())

	gh.calls("d", 100, errBoom) // gh.calls fails on a refusal
	gh.calls("e", 1, nil)
	b, err := gh.g.Get("d")
	require.NoError(t, err)
	assert.Equal(t, "(overflow)", b.Name())
	assert.Equal(t, ModeForcedClosed, b.Mode())
	_, ok := gh.g.Lookup("d")
	assert.False(t, ok, "a key past the cap has no breaker")
	assert.Equal(t, 3, gh.g.Len())
	assert.Equal(t, []string{"a", "b", "c"}, sortedKeys(keySet(gh.g)))

	st := gh.g.Status()
	assert.Equal(t, uint64(102), st.OverflowCalls, "100 + 1 calls and one Get")
	assert.Equal(t, uint64(101), st.Overflow.Admitted)
	assert.Equal(t, uint64(100), st.Overflow.Failures)
	assert.Equal(t, Closed, b.State())

	// The breakers the group holds still trip.
	for range 20 {
		_ = gh.g.Do(context.Background(), "a", func(context.Context) error { return errBoom })
	}
	assert.Equal(t, Open, gh.state("a"))

	// The overflow breaker applies the default policy, as it changes.
	require.NoError(t, gh.g.SetPolicies(GroupPolicy{Default: policy(func(p *Policy) { p.CallTimeout = time.Second })}))
	assert.Equal(t, time.Second, b.Policy().CallTimeout)

	// Room made, a key gets a breaker of its own.
	require.True(t, gh.g.Remove("b"))
	nb, err := gh.g.Get("d")
	require.NoError(t, err)
	assert.Equal(t, "d", nb.Name())
	assert.Equal(t, 3, gh.g.Len())
}

// keySet is the set of a group's keys.
func keySet(g *Group) map[string]bool {
	m := map[string]bool{}
	g.Range(func(k string, _ *Breaker) bool { m[k] = true; return true })
	return m
}

// A full group makes room by eviction: the sweep that creation runs at
// most every IdleAfter/2 runs for a key past the cap too.
func TestGroup_EvictionMakesRoomInAFullGroup(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{MaxBreakers: 2, IdleAfter: 10 * time.Minute}, WithLogger(discardLogger()))
	gh.calls("a", 1, nil)
	gh.calls("b", 20, errBoom) // open
	gh.calls("c", 1, nil)
	assert.Equal(t, uint64(1), gh.g.Status().OverflowCalls)
	gh.clk.Add(5 * time.Minute)
	gh.calls("a", 1, nil)
	gh.calls("c", 1, nil) // the sweep due notes the activity; still full
	assert.Equal(t, uint64(2), gh.g.Status().OverflowCalls)
	gh.clk.Add(10 * time.Minute)
	gh.calls("c", 1, nil) // a and b have been idle for 10 minutes
	b, _ := gh.g.Lookup("c")
	require.NotNil(t, b)
	assert.Equal(t, "c", b.Name())
	assert.Equal(t, Evictions{Closed: 1, Open: 1}, gh.g.Status().Evicted)
}

// A full group tells the operator: one Warn record with the cap and the
// calls sent past it, at most once a minute on the group's clock.
func TestGroup_AFullGroupWarnsAtMostOnceAMinute(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	gh := newGroupHarness(t, GroupConfig{MaxBreakers: 1}, WithLogger(l))
	gh.calls("a", 1, nil)
	assert.Empty(t, buf.String())
	for i := range 50 {
		gh.calls("k"+strconv.Itoa(i), 1, errBoom)
	}
	gh.clk.Add(59 * time.Second)
	gh.calls("k", 9, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, buf.String())
	assert.Equal(t, `level=WARN msg="breaker group full" breaker.max_breakers=1 breaker.overflow_calls=1 breaker.overflow_calls_total=1`, lines[0])

	gh.clk.Add(time.Second)
	gh.calls("k", 1, nil)
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	assert.Equal(t, `level=WARN msg="breaker group full" breaker.max_breakers=1 breaker.overflow_calls=59 breaker.overflow_calls_total=60`, lines[1])
}

// A group with no logger warns on slog.Default: a full group must not go
// unnoticed because nobody gave it a logger.
func TestGroup_AFullGroupWithoutALoggerWarnsOnTheDefaultLogger(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	gh := newGroupHarness(t, GroupConfig{MaxBreakers: 1})
	gh.calls("a", 1, nil)
	gh.calls("b", 1, nil)
	assert.Contains(t, buf.String(), `msg="breaker group full"`)
}

// heapBound is the bound TestGroup_AMillionFailingKeysKeepTheHeapBounded
// holds the heap to.
const heapBound = 16 << 20

// GroupConfig.MaxBreakers: a burst of distinct keys, each made to fail
// (per-request keys from URLs or headers), keeps the heap bounded: the
// group holds defaultMaxBreakers breakers and runs the rest through its
// overflow breaker. The README's figure is the line this test logs (go
// test -run TestGroup_AMillionFailingKeysKeepTheHeapBounded -v). Under
// the race detector it makes 100,000 keys, past the cap all the same, so
// that it takes seconds rather than a minute.
func TestGroup_AMillionFailingKeysKeepTheHeapBounded(t *testing.T) {
	keys := 1_000_000
	if raceEnabled {
		keys = 100_000
	}
	g, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	fail := func(context.Context) error { return errBoom }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := []byte("GET /orders/")
	n := len(buf)
	for i := range keys {
		buf = strconv.AppendInt(buf[:n], int64(i), 10)
		// The key is built per call, as a key from a request is; the
		// group keeps a copy of it, never the bytes.
		if err := g.Do(ctx, string(buf), fail); err != errBoom {
			t.Fatalf("call %d: got %v, want the call's own error", i, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	st := g.Status()
	t.Logf("%d distinct failing keys: %d breakers, %d calls through the overflow breaker, heap grew by %.1f MiB (bound %d MiB)",
		keys, st.Breakers, st.OverflowCalls, float64(grew)/(1<<20), heapBound>>20)
	assert.Equal(t, defaultMaxBreakers, st.Breakers)
	assert.Equal(t, uint64(keys-defaultMaxBreakers), st.OverflowCalls)
	assert.Less(t, grew, int64(heapBound))
	runtime.KeepAlive(g)
}

// An idle breaker takes 512 bytes, for a group may hold many thousands of
// idle per-target breakers: three allocations (the breaker, its window, its
// ten slots) that fit the allocator's size classes of 192, 80 and 240
// bytes. What only a breaker that has tripped needs is in its history,
// made at its first transition; the window holds its own outcomes, so
// that a result of an earlier generation cannot land in a later window.
// Regression (afb0ea8): a candidate policy's pointer took it to 528 bytes.
func TestNew_AnIdleBreakerStaysIn512Bytes(t *testing.T) {
	// The allocator's size classes the three allocations fall in.
	require.LessOrEqual(t, unsafe.Sizeof(Breaker{}), uintptr(192), "Breaker")
	// The window's two, 80 and 240 bytes, are
	// TestNew_AWindowFitsItsSizeClasses's.
	b, err := New("idle", DefaultPolicy())
	require.NoError(t, err)
	require.Nil(t, b.hist, "an idle breaker has no history")
	require.Equal(t, 3.0, testing.AllocsPerRun(100, func() { _, _ = New("idle", DefaultPolicy()) }))
}

// A key may be named "(overflow)", the Name of the overflow breaker, so
// the Name cannot tell the two apart, as callers were told to: IsOverflow
// does, for the group's overflow breaker alone.
func TestGroup_IsOverflowTellsTheOverflowBreakerFromAKeyOfItsName(t *testing.T) {
	g, err := NewGroup(GroupConfig{MaxBreakers: 2}, WithLogger(discardLogger()))
	require.NoError(t, err)
	key, err := g.Get("(overflow)")
	require.NoError(t, err)
	_, err = g.Get("a")
	require.NoError(t, err)
	past, err := g.Get("b") // past the cap
	require.NoError(t, err)

	assert.Equal(t, key.Name(), past.Name(), "the same Name")
	assert.NotSame(t, key, past)
	assert.False(t, g.IsOverflow(key), "a key's breaker")
	assert.True(t, g.IsOverflow(past))
	again, err := g.Get("(overflow)")
	require.NoError(t, err)
	assert.Same(t, key, again, "the key keeps its own breaker past the cap")

	other, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	assert.False(t, other.IsOverflow(past), "another group's")
	assert.False(t, g.IsOverflow(nil))
	assert.False(t, (*Group)(nil).IsOverflow(past))
}

// behaviour.md §8 The cap: the overflow breaker stays forced closed. A
// caller that got it for a key past the cap cannot reset it to auto or
// force it open: it would pool the failures of every overflow key and
// refuse them all. Regression: Get(key).Reset() turned it to auto, and
// after 30 failing calls on new keys a call on another new key was
// refused with "(overflow) is open".
func TestGroup_TheOverflowBreakerStaysForcedClosed(t *testing.T) {
	g, err := NewGroup(GroupConfig{MaxBreakers: 1})
	require.NoError(t, err)
	_, err = g.Get("a")
	require.NoError(t, err)
	over, err := g.Get("b")
	require.NoError(t, err)
	require.True(t, g.IsOverflow(over))
	over.Reset()
	assert.Equal(t, ModeForcedClosed, over.Mode(), "Reset keeps it forced closed")
	for _, m := range []Mode{ModeAuto, ModeShadow, ModeForcedOpen} {
		assert.ErrorContains(t, over.SetMode(m), "overflow breaker", "mode %s", m)
	}
	assert.Equal(t, ModeForcedClosed, over.Mode())
	for i := range 30 {
		_ = g.Do(context.Background(), "new-"+strconv.Itoa(i), func(context.Context) error { return errBoom })
	}
	assert.NoError(t, g.Do(context.Background(), "another", func(context.Context) error { return nil }),
		"nothing past the cap is refused")
}
