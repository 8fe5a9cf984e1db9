package breaker

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// recordWhileReading runs writers that each call do until stop, and one
// reader that calls check until the writers have made at least calls
// calls. check returns a description of a broken invariant, or "".
func recordWhileReading(t *testing.T, writers, calls int, do func(w, i int), check func() string) {
	t.Helper()
	var stop atomic.Bool
	var made atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				do(w, i)
				made.Add(1)
			}
		}(w)
	}
	var broken string
	for reads := 0; made.Load() < int64(calls) || reads < 1000; reads++ {
		if broken = check(); broken != "" {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Empty(t, broken)
}

// snapshotBroken says which ordering of a snapshot does not hold.
func snapshotBroken(s Snapshot) string {
	if s.Timeouts > s.Failures || s.Failures > s.Counted || s.Slow > s.Counted {
		return fmt.Sprintf("torn snapshot %+v: want Timeouts <= Failures <= Counted and Slow <= Counted", s)
	}
	return ""
}

// Bug: a failure was recorded as several adds (counted, then failures,
// then timeouts) and Counters derived Successes as counted minus failures,
// so a Counters call that ran between the adds saw Successes drop by one,
// or wrap to about 1.8e19 when every call failed; a Prometheus counter fed
// from it went backwards. Scenario: writers record failures, timeouts and
// successes on a breaker that never trips while a reader calls Counters in
// a loop; every field of every read must be at least its previous value.
func TestRegression_CountersNeverGoDownWhileCallsAreRecorded(t *testing.T) {
	p := policy(func(p *Policy) { p.SlowCall = time.Nanosecond; p.SlowRatio = 1 })
	b, err := New("counters.Monotonic", p)
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedClosed))
	ctx := context.Background()
	outcomes := []error{context.DeadlineExceeded, errBoom, context.DeadlineExceeded, nil}
	var prev Counters
	recordWhileReading(t, 4, 200_000, func(w, i int) {
		err := outcomes[(w+i)%len(outcomes)]
		_ = b.Do(ctx, func(context.Context) error { return err })
	}, func() string {
		c := b.Counters()
		if c.Admitted < prev.Admitted || c.Successes < prev.Successes || c.Failures < prev.Failures ||
			c.Timeouts < prev.Timeouts || c.Slow < prev.Slow || c.Ignored < prev.Ignored {
			return fmt.Sprintf("counters went down:\nbefore %+v\nafter  %+v", prev, c)
		}
		if c.Slow > c.Admitted {
			return fmt.Sprintf("more slow calls than admitted ones: %+v", c)
		}
		prev = c
		return ""
	})
}

// Bug: Snapshot read the cumulative counted, failures and timeouts totals
// one after another while a failure added to each in turn, so a snapshot
// taken between the adds showed more failures than counted calls (an error
// ratio above 1) or more timeouts than failures. Scenario: writers record
// only timeouts and failures, some of them slow, on a breaker that never
// trips, while a reader takes snapshots; each must hold Timeouts <=
// Failures <= Counted and Slow <= Counted.
func TestRegression_SnapshotIsNeverTorn(t *testing.T) {
	p := policy(func(p *Policy) { p.SlowCall = time.Nanosecond; p.SlowRatio = 1 })
	b, err := New("snapshot.Torn", p)
	require.NoError(t, err)
	require.NoError(t, b.SetMode(ModeForcedClosed))
	ctx := context.Background()
	recordWhileReading(t, 4, 200_000, func(w, i int) {
		err := errBoom
		if (w+i)%2 == 0 {
			err = context.DeadlineExceeded
		}
		_ = b.Do(ctx, func(context.Context) error { return err })
	}, func() string { return snapshotBroken(b.Snapshot()) })
}

// Bug: the trip rules summed the window the same torn way, so a breaker
// could trip on a snapshot with more failures than calls and store it in
// its OpenError and Event. Scenario: writers send only timeouts until the
// breaker trips, over and over; the snapshot of every trip, in the event
// and in the refusal, must be ordered, and a pure-timeout window must show
// Timeouts == Failures == Counted.
func TestRegression_TripSnapshotIsNeverTorn(t *testing.T) {
	ctx := context.Background()
	timeout := func(context.Context) error { return context.DeadlineExceeded }
	for round := 0; round < 200; round++ {
		var evs []Event
		var mu sync.Mutex
		b, err := New("trip.Torn", policy(func(p *Policy) { p.MinRequests = 50; p.OpenFor = time.Hour; p.MaxOpenFor = time.Hour }),
			OnTransition(func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }))
		require.NoError(t, err)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b.Do(ctx, timeout) == context.DeadlineExceeded {
				}
			}()
		}
		wg.Wait()
		var oe *OpenError
		require.ErrorAs(t, b.Do(ctx, timeout), &oe)
		require.Empty(t, snapshotBroken(oe.Snapshot), "round %d: open error", round)
		require.Equal(t, oe.Snapshot.Counted, oe.Snapshot.Timeouts, "round %d: only timeouts were recorded: %+v", round, oe.Snapshot)
		mu.Lock()
		require.Len(t, evs, 1)
		require.Equal(t, oe.Snapshot, evs[0].Snapshot, "round %d", round)
		mu.Unlock()
	}
}

// Bug: with a clock that has no monotonic reading, a step back left every
// call behind the window's newest bucket, so all of them landed in it
// until the clock caught up: the window froze for as long as the step.
// Scenario: the clock reads t0+1h, then steps back to t0; a second of
// successes is recorded, then ten seconds pass and twenty timeouts come.
// The successes must have left the window, and the timeouts trip it.
func TestRegression_ClockSteppingBackDoesNotFreezeTheWindow(t *testing.T) {
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

// Bug: a cooldown ended when the clock reached the deadline, so a clock
// that stepped back an hour kept an open breaker refusing for an hour and
// its RetryAfter said so. Scenario: trip at t0+1h (cooldown 30 s), step
// the clock back to t0: 29 s later it is still open, 30 s later it lets
// probes through. Times reported are the breaker's own: the clock's
// readings until the step, then continuing from there.
func TestRegression_ClockSteppingBackDoesNotStretchTheCooldown(t *testing.T) {
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
	since, ok := h.b.OpenSince()
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

// Bug: a clock that read the zero time when the breaker was created put
// every later reading about two thousand years on, past what
// time.Time.Sub can represent; Sub saturated, the breaker's time stood
// still at its maximum, and every cooldown ended at once. Scenario: such a
// clock, then a trip: the breaker must stay open for its 30 s cooldown and
// its window must slide.
func TestRegression_ZeroTimeFirstReadingKeepsTimingWorking(t *testing.T) {
	clk := clockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b, err := New("zero.First", DefaultPolicy(), WithClock(&zeroFirst{next: clk}), WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	requireTimingWorks(t, b, clk)
}

// Bug: the same saturation after a forward jump of more than the 292
// years a time.Duration holds. Scenario: the clock jumps 300 years on,
// then the breaker trips: its cooldown and window must work as before.
func TestRegression_HugeForwardJumpKeepsTimingWorking(t *testing.T) {
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

// Bug: WithInstanceStart set instanceMarks, a package-level flag that the
// closed path of every breaker in the process read: one caller marking its
// contexts changed the cost of every other breaker's calls, state shared
// the way hystrix-go's global registry shares it. Scenario: the package's
// own source declares no package-level variable of a sync/atomic type,
// but for liveProbes, which no caller sets: it counts the probes in flight,
// each of which ends with its result or its half-open episode, and is 0
// whenever no breaker of the process is probing.
func TestRegression_NoProcessWideFlag(t *testing.T) {
	fset := gotoken.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != gotoken.VAR {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if v.Type == nil {
					continue
				}
				if sel, ok := v.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "atomic" && v.Names[0].Name != "liveProbes" {
						t.Errorf("%s: package-level %s of type atomic.%s is state shared by every breaker",
							fset.Position(v.Pos()), v.Names[0].Name, sel.Sel.Name)
					}
				}
			}
		}
	}
}

// A breaker whose calls all carry an instance mark sees it on the first
// call, so the successes of a cold instance are left out from the start.
func TestWarmup_MarkedSuccessesAreExemptFromTheFirstCall(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	for i := 0; i < 30; i++ {
		require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	}
	require.Zero(t, h.b.Snapshot().Counted)
	require.Equal(t, uint64(30), h.b.Counters().Exempt)
}

// A breaker that has so far seen only unmarked calls still finds the mark
// on every failure, and, once it has, on every success.
func TestWarmup_MarkIsFoundOnFailuresAfterUnmarkedCalls(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(5, nil) // unmarked: counted
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(cold, func(context.Context) error { return errBoom }), errBoom)
	}
	h.requireState(Closed)
	for i := 0; i < 10; i++ {
		require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	}
	require.Equal(t, Snapshot{Counted: 5}, h.b.Snapshot())
	require.Equal(t, uint64(50), h.b.Counters().Exempt)
}

// A breaker that has seen no mark looks again after instanceSample.
func TestWarmup_MarkedSuccessIsFoundBySampling(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(1, nil) // unmarked, sampled: no mark
	h.add(time.Duration(instanceSample))
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	require.Equal(t, uint64(1), h.b.Counters().Exempt)
	require.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot())
}

// Scenario: a group of per-target breakers holds 10,000 idle ones. The
// candidate policy's pointer took Breaker from 224 to 232 bytes, which
// the allocator serves from its 240-byte class, and an idle breaker from
// 512 to 528 bytes (breaker, window, ten slots). The cooldown's doublings
// and the probes passed, which only a breaker that has tripped needs,
// moved to its history to make room.
func TestRegression_IdleBreakerStaysIn512Bytes(t *testing.T) {
	// The allocator's size classes the three allocations fall in.
	require.LessOrEqual(t, unsafe.Sizeof(Breaker{}), uintptr(224), "Breaker")
	require.LessOrEqual(t, unsafe.Sizeof(window{}), uintptr(48), "window")
	require.LessOrEqual(t, DefaultBuckets*unsafe.Sizeof(slot{}), uintptr(240), "slots")
	b, err := New("idle", DefaultPolicy())
	require.NoError(t, err)
	require.Nil(t, b.hist, "an idle breaker has no history")
	require.Equal(t, 3.0, testing.AllocsPerRun(100, func() { _, _ = New("idle", DefaultPolicy()) }))
}
