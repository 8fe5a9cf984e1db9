package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
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

// On a mock clock, a call's ctx.Deadline() reads in real time, for real
// I/O compares a deadline with the real clock (grpc-go fails a call whose
// deadline has passed at once, with DeadlineExceeded); the context still
// expires only when the mock passes the timeout.
// Regression (e2e5a13): it was the mock's now (1970 unless set) plus Timeout.
func TestCallDeadline_OnAMockClockReadsInRealTime(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second }))
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
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second }))
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
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Minute }))
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

// A call's context reads the error of its clock's timeout context only
// after Done is closed, which orders the read after the write: a call that
// polls ctx.Err() is race-free on a clock such as *clock.Mock, whose timer
// goroutine sets the error that Err reads without a lock.
// Regression (6cf047f): the race detector caught a call's ctx.Err() on the mock.
func TestCallDeadline_TheClocksErrorIsReadAfterDone(t *testing.T) {
	clk := &lateCancelClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p := DefaultPolicy()
	p.CallTimeout = 100 * time.Millisecond
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

// The context expires when the clock passes d, however far the clock is
// from the real one, and reports a deadline of real now + d.
func TestClockTimeout_ExpiresOnTheClockReportsRealTime(t *testing.T) {
	for _, at := range []time.Time{time.Unix(0, 0), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)} {
		clk := clock.NewMock()
		clk.Set(at)
		before := time.Now()
		ctx, cancel := withClockTimeout(clk, context.Background(), time.Second)
		after := time.Now()
		dl, ok := ctx.Deadline()
		require.True(t, ok)
		assert.False(t, dl.Before(before.Add(time.Second)) || dl.After(after.Add(time.Second)),
			"clock at %v: deadline %v is not real now + 1s", at, dl)
		requireNotDone(t, ctx)
		clk.Add(999 * time.Millisecond)
		requireNotDone(t, ctx)
		clk.Add(time.Millisecond)
		<-ctx.Done()
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		cancel()
	}
}

// A sooner deadline of the parent is the one reported, and the parent's
// cancellation ends the context; the clock still times d on its own,
// whatever the parent's real deadline says.
func TestClockTimeout_TheParentsDeadlineAndCancellation(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	parent, cancelParent := context.WithDeadline(context.Background(), time.Now().Add(10*time.Second))
	want, _ := parent.Deadline()
	ctx, cancel := withClockTimeout(clk, parent, time.Minute)
	defer cancel()
	dl, _ := ctx.Deadline()
	assert.Equal(t, want, dl)
	requireNotDone(t, ctx)
	cancelParent()
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)

	parent, cancelParent = context.WithTimeout(context.Background(), time.Hour)
	defer cancelParent()
	ctx, cancel = withClockTimeout(clk, parent, time.Second)
	defer cancel()
	clk.Add(time.Second)
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "the mock timed the call though the parent's real deadline looked sooner")
}
