package breaker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
