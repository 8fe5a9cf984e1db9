package clockctx

import (
	"context"
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

func requireNotDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("context done: %v", ctx.Err())
	default:
	}
	require.NoError(t, ctx.Err())
}

// The context expires when the clock passes d, however far the clock is
// from the real one, and reports a deadline of real now + d.
func TestWithTimeout_ExpiresOnTheClockReportsRealTime(t *testing.T) {
	for _, at := range []time.Time{time.Unix(0, 0), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)} {
		clk := clock.NewMock()
		clk.Set(at)
		before := time.Now()
		ctx, cancel := WithTimeout(clk, context.Background(), time.Second)
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
func TestWithTimeout_TheParentsDeadlineAndCancellation(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	parent, cancelParent := context.WithDeadline(context.Background(), time.Now().Add(10*time.Second))
	want, _ := parent.Deadline()
	ctx, cancel := WithTimeout(clk, parent, time.Minute)
	defer cancel()
	dl, _ := ctx.Deadline()
	assert.Equal(t, want, dl)
	requireNotDone(t, ctx)
	cancelParent()
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)

	parent, cancelParent = context.WithTimeout(context.Background(), time.Hour)
	defer cancelParent()
	ctx, cancel = WithTimeout(clk, parent, time.Second)
	defer cancel()
	clk.Add(time.Second)
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "the mock timed the call though the parent's real deadline looked sooner")
}
