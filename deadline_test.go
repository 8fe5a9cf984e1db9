package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireRealDeadline checks that ctx has a deadline of d after an instant
// of the real clock between before and after.
func requireRealDeadline(t *testing.T, ctx context.Context, before, after time.Time, d time.Duration) {
	t.Helper()
	dl, ok := ctx.Deadline()
	require.True(t, ok, "no deadline")
	assert.False(t, dl.Before(before.Add(d)), "deadline %v before real now + %v (%v)", dl, d, before.Add(d))
	assert.False(t, dl.After(after.Add(d)), "deadline %v after real now + %v (%v)", dl, d, after.Add(d))
}

func requireNotDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("context done: %v", ctx.Err())
	default:
	}
}

// TestRegression_MockClockCallDeadlineIsRealTime: on a mock clock (which
// reads 1970 unless set) with Policy.Timeout 1s, the call's ctx.Deadline()
// was the mock's now plus 1s. Real I/O compares a deadline with the real
// clock (grpc-go fails such a call at once with DeadlineExceeded), so the
// deadline must read in real time, while the context still expires only
// when the mock passes the timeout.
func TestRegression_MockClockCallDeadlineIsRealTime(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Timeout = time.Second }))
	before := time.Now()
	ctx, done, err := h.b.Allow(context.Background())
	after := time.Now()
	require.NoError(t, err)
	requireRealDeadline(t, ctx, before, after, time.Second)

	requireNotDone(t, ctx)
	h.add(999 * time.Millisecond)
	requireNotDone(t, ctx)
	h.add(time.Millisecond)
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	done(ctx.Err())
	assert.Equal(t, uint64(1), h.b.Counters().Timeouts)
}

// The expiry follows the mock however it was set: a mock set far ahead of
// the real clock still times the call on its own timer.
func TestCallDeadline_MockAheadOfTheRealClock(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Timeout = time.Second }))
	h.clk.Set(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	// The caller's real deadline is later than the call's.
	caller, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	before := time.Now()
	ctx, done, err := h.b.Allow(caller)
	require.NoError(t, err)
	requireRealDeadline(t, ctx, before, time.Now(), time.Second)
	requireNotDone(t, ctx)
	h.add(time.Second)
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	done(ctx.Err())
}

// The caller's deadline, when sooner, is the one the call reports, and the
// caller's cancellation still ends the call, on any clock.
func TestCallDeadline_CallerDeadlineAndCancellation(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Timeout = time.Minute }))
	caller, cancel := context.WithDeadline(context.Background(), time.Now().Add(10*time.Second))
	want, _ := caller.Deadline()
	ctx, done, err := h.b.Allow(caller)
	require.NoError(t, err)
	dl, ok := ctx.Deadline()
	require.True(t, ok)
	assert.Equal(t, want, dl)
	requireNotDone(t, ctx)
	cancel()
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	done(ctx.Err())
	assert.Equal(t, uint64(1), h.b.Counters().Ignored)
}

// lateCancelClock is a clock whose timeout contexts behave as
// *clock.Mock's (benbjohnson/clock v1.3.5): a timer goroutine sets the
// error, then closes Done, and Err reads the error without a lock. Its
// expire starts that goroutine, as advancing the mock does.
type lateCancelClock struct {
	now    time.Time
	expire func()
}

func (c *lateCancelClock) Now() time.Time { return c.now }

func (c *lateCancelClock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx := &lateCancelCtx{Context: parent, done: make(chan struct{})}
	c.expire = func() {
		go func() {
			ctx.err = context.DeadlineExceeded // no lock, as in the mock
			close(ctx.done)
		}()
	}
	return ctx, func() {}
}

type lateCancelCtx struct {
	context.Context
	done chan struct{}
	err  error
}

func (c *lateCancelCtx) Done() <-chan struct{} { return c.done }
func (c *lateCancelCtx) Err() error            { return c.err }

// Scenario: a test on *clock.Mock advanced the clock past Policy.Timeout
// inside the call and read ctx.Err(). The mock cancels the context from a
// timer goroutine of its own and its Err reads the error without a lock;
// when that goroutine ran late, the race detector reported the call's
// ctx.Err() (it failed TestAdaptiveTimeout_HangEverythingDoesNotRaiseIt
// once in CI, once in 30 runs here). The context a breaker hands out now
// reads its parent's error only after Done is closed, which orders the
// two, so a call polling ctx.Err() is race-free on such a clock.
func TestRegression_ClockTimeoutErrIsReadAfterDone(t *testing.T) {
	clk := &lateCancelClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p := DefaultPolicy()
	p.Timeout = 100 * time.Millisecond
	b, err := New("inventory.GetStock", p, WithClock(clk))
	require.NoError(t, err)
	err = b.Do(context.Background(), func(ctx context.Context) error {
		require.NoError(t, ctx.Err(), "before the timeout")
		clk.expire()
		for ctx.Err() == nil { // polls while the timer goroutine writes
		}
		return ctx.Err()
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
