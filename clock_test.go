package breaker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An instance start time comes from the clock, not from the breaker: after
// the clock steps back, an instance that started 30 s ago by the clock is
// 30 s old, not an hour and a half.
func TestClock_InstanceStartAfterAStepBack(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(time.Hour)
	h.calls(1, nil)
	h.clk.Set(h.t0) // back an hour
	cold := WithInstanceStart(context.Background(), h.t0.Add(-30*time.Second))
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(cold, func(context.Context) error { return errBoom }), errBoom)
	}
	h.requireState(Closed)
	require.Equal(t, uint64(40), h.b.Counters().Exempt)
}

// A clock stepped back and forth while calls run: under -race, nothing
// races, no reported time is before the clock's first reading, and every
// snapshot stays ordered.
func TestClock_StepsRacingWithCalls(t *testing.T) {
	clk := clock.NewMock()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk.Set(t0)
	var mu sync.Mutex
	var backwards []string
	b, err := New("clock.Racing", policy(func(p *Policy) { p.OpenFor = time.Second; p.MaxOpenFor = 2 * time.Second }),
		WithClock(clk), OnTransition(func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Time.Before(t0) {
				backwards = append(backwards, "event before the clock's first reading: "+e.Time.String())
			}
			if s := snapshotBroken(e.Snapshot); s != "" {
				backwards = append(backwards, s)
			}
		}))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var working atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		working.Add(1)
		go func(w int) {
			defer wg.Done()
			defer working.Add(-1)
			ctx := context.Background()
			for i := 0; i < 2000; i++ {
				err := error(nil)
				if (w+i)%3 == 0 {
					err = errBoom
				}
				_ = b.Do(ctx, func(context.Context) error { return err })
				if s := snapshotBroken(b.Snapshot()); s != "" {
					t.Error(s)
					return
				}
			}
		}(w)
	}
	for i := 0; working.Load() > 0; i++ {
		step := time.Duration(i%7-2) * 300 * time.Millisecond // mostly forward, sometimes back
		if i%50 == 0 {
			step = -time.Hour
		}
		clk.Set(clk.Now().Add(step))
		_ = b.State()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, backwards)
}

// behaviour.md §5 Window and time, and §7 Errors and bad input: a clock
// that goes backwards is harmless: no panic, no lost count, no early end of
// a cooldown.
func TestClock_GoingBackwardsIsHarmless(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(time.Hour)
	h.calls(10, nil)
	h.clk.Set(h.t0.Add(time.Minute)) // 59 minutes back
	h.calls(9, errBoom)
	assert.Equal(t, Snapshot{Counted: 19, Failures: 9}, h.b.Snapshot(), "counted in the newest bucket")
	h.calls(1, errBoom)
	h.requireState(Open)
	h.clk.Set(h.t0) // further back: the cooldown must not end
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.clk.Set(h.t0.Add(time.Minute + 30*time.Second))
	h.requireState(HalfOpen)
}

// The window slides on the breaker's own time, which a clock without a
// monotonic reading only pauses when it steps back. The clock reads t0+1h,
// then t0; a second of successes is recorded, then ten seconds pass and
// twenty timeouts come: the successes have left the window, and the
// timeouts trip it.
// Regression (5affcc8): a step back froze the window for as long as the step.
func TestClock_SteppingBackDoesNotFreezeTheWindow(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(time.Hour)
	h.calls(1, nil)
	h.clk.Set(h.t0) // back an hour
	for i := 0; i < 100; i++ {
		h.calls(10, nil)
		h.add(10 * time.Millisecond)
	}
	require.Equal(t, uint64(1001), h.b.Snapshot().Counted)
	h.add(10 * time.Second)
	require.Equal(t, Snapshot{}, h.b.Snapshot(), "ten seconds on, the window must have slid")
	h.calls(20, context.DeadlineExceeded)
	h.requireState(Open)
	require.Equal(t, Snapshot{Counted: 20, Failures: 20, Timeouts: 20}, h.eventLog()[0].Snapshot)
}

// A cooldown lasts its length on the breaker's own time, however the clock
// steps. Trip at t0+1h (cooldown 30 s), step the clock back to t0: 29 s
// later the breaker is still open, 30 s later it lets probes through. The
// times it reports are its own: the clock's readings until the step, then
// continuing from there.
// Regression (5affcc8): a step back of an hour kept the breaker open an hour.
func TestClock_SteppingBackDoesNotStretchTheCooldown(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(time.Hour)
	h.trip()
	h.clk.Set(h.t0) // back an hour
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	require.Equal(t, h.t0.Add(time.Hour), oe.Since)
	require.Equal(t, h.t0.Add(time.Hour+30*time.Second), oe.Until)
	require.Equal(t, 30*time.Second, oe.RetryAfter())
	h.add(29 * time.Second)
	h.requireState(Open)
	h.add(time.Second)
	h.requireState(HalfOpen)
	since, ok := openSince(h.b)
	require.True(t, ok)
	require.Equal(t, h.t0.Add(time.Hour), since)
	ev := h.eventLog()
	require.Equal(t, h.t0.Add(time.Hour+30*time.Second), ev[len(ev)-1].Time)
}

// zeroFirst is a clock that reads the zero time once, as a clock not yet
// set does, then follows next.
type zeroFirst struct {
	read atomic.Bool
	next Clock
}

func (z *zeroFirst) Now() time.Time {
	if z.read.CompareAndSwap(false, true) {
		return time.Time{}
	}
	return z.next.Now()
}

// A clock that reads the zero time when the breaker is created, as a clock
// not yet set does, leaves its timing whole: after a trip the breaker stays
// open for its 30 s cooldown, and its window slides.
// Regression (5affcc8): later readings overflowed Sub; every cooldown ended at once.
func TestClock_AZeroFirstReadingKeepsTimingWorking(t *testing.T) {
	clk := clockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b, err := New("zero.First", DefaultPolicy(), WithClock(&zeroFirst{next: clk}), WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	requireTimingWorks(t, b, clk)
}

// The same after the clock jumps 300 years on, more than a time.Duration
// holds: the cooldown and the window work as before.
// Regression (5affcc8): Sub saturated, and the breaker's time stood still.
func TestClock_AHugeForwardJumpKeepsTimingWorking(t *testing.T) {
	clk := clockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b, err := New("huge.Jump", DefaultPolicy(), WithClock(clk), WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	require.NoError(t, b.Do(context.Background(), func(context.Context) error { return nil }))
	clk.Set(clk.Now().AddDate(300, 0, 0))
	requireTimingWorks(t, b, clk)
}

// requireTimingWorks checks that b's window slides and its cooldown lasts
// its 30 s on clk.
func requireTimingWorks(t *testing.T, b *Breaker, clk *clock.Mock) {
	t.Helper()
	ctx := context.Background()
	fail := func(context.Context) error { return errBoom }
	for i := 0; i < 10; i++ {
		require.ErrorIs(t, b.Do(ctx, fail), errBoom)
	}
	clk.Add(10 * time.Second)
	require.Zero(t, b.Snapshot().Counted, "the window must slide")
	for i := 0; i < 20; i++ {
		require.ErrorIs(t, b.Do(ctx, fail), errBoom)
	}
	require.Equal(t, Open, b.State())
	clk.Add(29 * time.Second)
	require.Equal(t, Open, b.State(), "29 s into a 30 s cooldown")
	clk.Add(time.Second)
	require.Equal(t, HalfOpen, b.State())
}

func clockAt(t0 time.Time) *clock.Mock {
	clk := clock.NewMock()
	clk.Set(t0)
	return clk
}
