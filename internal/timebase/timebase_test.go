package timebase

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wallClock reads the wall clock without its monotonic reading, as a
// user's clock returning time.Now().UTC() does.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now().UTC() }

// Readings that race (one goroutine's reading overtaken by another's) are
// not steps back: the base's time must keep to the clock's, not creep
// ahead of it by the size of every race.
func TestBase_ConcurrentReadersOfAWallClockDoNotDrift(t *testing.T) {
	tb := New(wallClock{})
	start := tb.user.origin.Load().at
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := 0; i < 50_000; i++ {
				now := tb.Now()
				if now < last {
					t.Errorf("time went back from %d to %d", last, now)
					return
				}
				last = now
			}
		}()
	}
	wg.Wait()
	ahead := time.Duration(tb.Now()) - time.Now().UTC().Sub(start)
	assert.Less(t, ahead, time.Millisecond, "the base's time ran ahead of the clock")
}

// The breaker's time as the contract describes it, step by step: a step
// back is a pause, later readings go on at the clock's rate, reported
// times are the first reading plus the base's time.
func TestBase_StepBackIsAPause(t *testing.T) {
	clk := clock.NewMock()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk.Set(t0)
	tb := New(clk)
	steps := []struct {
		set  time.Duration // clock reading, from t0
		want time.Duration // base time
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
		got := tb.Now()
		require.Equal(t, int64(s.want), got, "step %d: clock at t0%+v", i, s.set)
		require.Equal(t, t0.Add(s.want), tb.Time(got), "step %d: reported time", i)
	}
}

// The real clock's base carries a monotonic reading, so that a wall-clock
// step cannot move it, and its offsets never decrease.
func TestBase_RealClockIsMonotonic(t *testing.T) {
	assert.Contains(t, processStart.String(), " m=", "the real clock's base has no monotonic reading")
	tb := New(nil)
	assert.Nil(t, tb.Clock())
	a := tb.Now()
	b := tb.Now()
	assert.GreaterOrEqual(t, b, a)
	assert.Equal(t, processStart.Add(time.Duration(a)), tb.Time(a))
}

// settable is a clock that reads the zero time until it is set.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settable) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *settable) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// A first reading of the zero time (a clock not yet set) and a jump of
// 300 years, more than a time.Duration holds, are pauses: the base's time
// goes on from where it was at the clock's rate, and reported times follow
// the clock again.
func TestBase_ReadingsTooFarOffArePauses(t *testing.T) {
	clk := &settable{}
	tb := New(clk) // the first reading: the zero time
	clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.Equal(t, int64(0), tb.Now(), "a reading 2025 years on from the first is a pause")
	clk.Add(time.Second)
	require.Equal(t, int64(time.Second), tb.Now())
	require.Equal(t, clk.Now(), tb.Time(tb.Now()), "reported times follow the clock again")

	clk.Set(clk.Now().AddDate(300, 0, 0))
	require.Equal(t, int64(time.Second), tb.Now(), "a 300-year jump is a pause")
	clk.Add(time.Second)
	require.Equal(t, int64(2*time.Second), tb.Now())
	require.Equal(t, clk.Now(), tb.Time(tb.Now()))
}

// Offset maps a reading taken from the clock to the offset it stands for
// now, after a step back too, and saturates rather than overflows.
func TestBase_Offset(t *testing.T) {
	clk := clock.NewMock()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk.Set(t0)
	tb := New(clk)
	clk.Add(time.Minute)
	require.Equal(t, int64(time.Minute), tb.Now())
	require.Equal(t, int64(30*time.Second), tb.Offset(t0.Add(30*time.Second)))
	clk.Set(t0) // back a minute: a pause
	require.Equal(t, int64(time.Minute), tb.Now())
	require.Equal(t, int64(time.Minute-time.Second), tb.Offset(t0.Add(-time.Second)),
		"a reading a second before the step stands for a second before now")
	require.Equal(t, int64(math.MaxInt64), tb.Offset(t0.AddDate(300, 0, 0)))
}

func TestAddSat(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64, 1, math.MinInt64 + 1},
		{math.MaxInt64, math.MinInt64, -1},
	} {
		assert.Equal(t, c.want, AddSat(c.a, c.b), "AddSat(%d, %d)", c.a, c.b)
	}
}

// Bucket indices and ring slots of offsets before 0 round down, as those
// after it do: offset -1 is in bucket -1, not 0, and bucket -1 sits in the
// last slot of the ring.
func TestFloorDivMod(t *testing.T) {
	for _, c := range []struct{ a, b, div, mod int64 }{
		{0, 5, 0, 0},
		{4, 5, 0, 4},
		{5, 5, 1, 0},
		{-1, 5, -1, 4},
		{-5, 5, -1, 0},
		{-6, 5, -2, 4},
		{math.MinInt64, 1, math.MinInt64, 0},
		{math.MaxInt64, 2, math.MaxInt64 / 2, 1},
	} {
		assert.Equal(t, c.div, FloorDiv(c.a, c.b), "FloorDiv(%d, %d)", c.a, c.b)
		assert.Equal(t, c.mod, FloorMod(c.a, c.b), "FloorMod(%d, %d)", c.a, c.b)
		assert.Equal(t, c.a, FloorDiv(c.a, c.b)*c.b+FloorMod(c.a, c.b), "a = div·b + mod for %d, %d", c.a, c.b)
	}
}
