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

// wallClock reads the wall clock without its monotonic reading, as a
// user's clock returning time.Now().UTC() does.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now().UTC() }

// Readings that race (one goroutine's reading overtaken by another's) are
// not steps back: the breaker's time must keep to the clock's, not creep
// ahead of it by the size of every race.
func TestClock_ConcurrentReadersOfAWallClockDoNotDrift(t *testing.T) {
	tb := newTimebase(wallClock{})
	start := tb.user.origin.Load().at
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := 0; i < 50_000; i++ {
				now := tb.now()
				if now < last {
					t.Errorf("time went back from %d to %d", last, now)
					return
				}
				last = now
			}
		}()
	}
	wg.Wait()
	ahead := time.Duration(tb.now()) - time.Now().UTC().Sub(start)
	assert.Less(t, ahead, time.Millisecond, "the breaker's time ran ahead of the clock")
}

// The breaker's time as the contract describes it, step by step: a step
// back is a pause, later readings go on at the clock's rate, reported
// times are the first reading plus the breaker's time.
func TestClock_StepBackIsAPause(t *testing.T) {
	clk := clock.NewMock()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk.Set(t0)
	tb := newTimebase(clk)
	steps := []struct {
		set  time.Duration // clock reading, from t0
		want time.Duration // breaker time
	}{
		{0, 0},
		{10 * time.Second, 10 * time.Second},
		{-time.Hour, 10 * time.Second}, // back: a pause
		{-time.Hour + time.Second, 11 * time.Second},
		{-2 * time.Hour, 11 * time.Second}, // further back
		{-2*time.Hour + 5*time.Second, 16 * time.Second},
		{time.Minute, 16*time.Second + 2*time.Hour + 55*time.Second}, // forward is time
	}
	for i, s := range steps {
		clk.Set(t0.Add(s.set))
		got := tb.now()
		require.Equal(t, int64(s.want), got, "step %d: clock at t0%+v", i, s.set)
		require.Equal(t, t0.Add(s.want), tb.time(got), "step %d: reported time", i)
	}
}

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
