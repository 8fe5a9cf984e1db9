package breaker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §3 Outcomes: the caller's own cancellation is ignored.
func TestOutcome_CallerCancellationIsIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		err := h.b.Do(ctx, func(ctx context.Context) error {
			cancel()
			return ctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)
	}
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	assert.Equal(t, uint64(50), h.b.Counters().Ignored)
}

func TestOutcome_CanceledWithoutTheCallerCancellingIsAFailure(t *testing.T) {
	// The downstream's own context.Canceled (say, a server shutting down)
	// is the downstream's fault.
	h := newHarness(t, DefaultPolicy())
	h.calls(20, context.Canceled)
	h.requireState(Open)
}

// behaviour.md §3 Outcomes: a done ctx means fn is not called and nothing
// is counted.
func TestOutcome_ADoneContextIsNotCalledNorCounted(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := h.b.Do(ctx, func(context.Context) error { called = true; return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	assert.Equal(t, Counters{}, h.b.Counters())

	h.trip()
	err = h.b.Do(ctx, func(context.Context) error { return nil })
	assert.ErrorIs(t, err, context.Canceled, "ctx.Err() wins over a refusal")
	assert.Zero(t, h.b.Counters().Rejected)
}

// behaviour.md §3 Outcomes: Ignore marks errors that are not the
// downstream's fault.
func TestOutcome_IgnoredErrorsAreNotCounted(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	invalid := errors.New("invalid argument")
	for i := 0; i < 40; i++ {
		err := h.call(Ignore(invalid))
		require.ErrorIs(t, err, invalid)
		require.Equal(t, "invalid argument", err.Error())
	}
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	assert.Nil(t, Ignore(nil))
	o, ok := markOf(Ignore(invalid))
	assert.True(t, ok && o == Ignored, "Ignore(err) carries Ignored")
	_, ok = markOf(invalid)
	assert.False(t, ok, "an unmarked error carries no mark")
}

// behaviour.md §3 Outcomes: the classifier can be replaced or extended.
func TestOutcome_ACustomClassifierExtendsTheDefault(t *testing.T) {
	errOutOfStock := errors.New("out of stock")
	h := newHarness(t, DefaultPolicy(), WithClassifier(func(err error) Outcome {
		if errors.Is(err, errOutOfStock) {
			return Ignored
		}
		return DefaultClassifier(err)
	}))
	h.calls(30, errOutOfStock)
	h.requireState(Closed)
	h.calls(20, context.DeadlineExceeded)
	h.requireState(Open)
}

// behaviour.md §3 Outcomes: another breaker's refusal, passed on by the
// function, is ignored. It used to count as a failure, so an inner
// breaker that opened tripped the breaker around it, which then refused
// calls the inner one did not guard, and half-open probes that met the
// inner refusal passed as answers.
func TestOutcome_AnInnerBreakersRefusalIsIgnored(t *testing.T) {
	inner, err := New("payments", DefaultPolicy())
	require.NoError(t, err)
	require.NoError(t, inner.SetMode(ModeForcedOpen))
	refused := func(ctx context.Context) error {
		err := inner.Do(ctx, func(context.Context) error { return nil })
		return fmt.Errorf("charge: %w", err)
	}
	h := newHarness(t, DefaultPolicy())
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(context.Background(), refused), ErrOpen)
	}
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	c := h.b.Counters()
	assert.Equal(t, uint64(40), c.Ignored)
	assert.Zero(t, c.Failures+c.Rejected)

	// Half-open, a probe that meets the inner refusal proves nothing
	// either way: its slot is freed and the breaker stays half-open.
	h.trip()
	h.add(DefaultPolicy().OpenFor * 2)
	require.ErrorIs(t, h.b.Do(context.Background(), refused), ErrOpen)
	h.requireState(HalfOpen)
	assert.Zero(t, h.b.Counters().ProbesFailed+h.b.Counters().ProbesPassed)
	h.calls(DefaultPolicy().Probes, nil)
	h.requireState(Closed)
}

func TestOutcome_AClassifierReturningGarbageCountsAFailure(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithClassifier(func(error) Outcome { return Outcome(42) }))
	h.calls(20, errBoom)
	h.requireState(Open)
	assert.Equal(t, "outcome(42)", Outcome(42).String())
}

var errOdd = errors.New("odd")

// panickyClassifier panics on errOdd.
func panickyClassifier(err error) Outcome {
	if errors.Is(err, errOdd) {
		panic("classifier bug")
	}
	return DefaultClassifier(err)
}

// A call whose classifier panics counts as a failure, as a call whose
// function panics does, and the panic goes on: the twentieth failure trips
// the breaker, through Do and through Allow's done, which also releases the
// call's context.
// Regression (c92ab56): the call was not counted at all.
func TestOutcome_APanickingClassifierCountsAFailure(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithClassifier(panickyClassifier))
	h.calls(19, errBoom)
	assert.PanicsWithValue(t, "classifier bug", func() { _ = h.call(errOdd) })
	h.requireState(Open)

	// The two-step form too, and its deadline is released.
	h2 := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second }), WithClassifier(panickyClassifier))
	h2.calls(19, errBoom)
	ctx, done, err := h2.b.Allow(context.Background())
	require.NoError(t, err)
	assert.PanicsWithValue(t, "classifier bug", func() { done(errOdd) })
	h2.requireState(Open)
	assert.ErrorIs(t, ctx.Err(), context.Canceled, "the call's context is released")
}

// behaviour.md §3 Outcomes: Policy.CallTimeout adds a deadline, and a late
// success is a timeout.
func TestOutcome_PolicyTimeoutIsADeadlineAndALateSuccessIsATimeout(t *testing.T) {
	// A minute-long window holds the twenty slow calls below.
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = 800 * time.Millisecond; p.Window = time.Minute }))
	// The deadline expires on the mock clock, through its WithTimeout, but
	// reads in real time (see deadline.go).
	before := time.Now()
	require.NoError(t, h.b.Do(context.Background(), func(ctx context.Context) error {
		requireRealDeadline(t, ctx, before, time.Now(), 800*time.Millisecond)
		return nil
	}))

	// A call that honours its context ends with DeadlineExceeded when the
	// mock clock passes the deadline.
	bl := h.start(context.Background())
	h.add(800 * time.Millisecond)
	assert.ErrorIs(t, <-bl.done, context.DeadlineExceeded)

	// A call that ignores its context and returns nil late is a timeout.
	for i := 0; i < 18; i++ {
		require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
			h.add(801 * time.Millisecond)
			return nil
		}))
	}
	h.requireState(Open)
	assert.Equal(t, uint64(19), h.eventLog()[0].Snapshot.Timeouts)
}

func TestOutcome_ACallExactlyAtTheTimeoutIsInTime(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = time.Second; p.MinRequests = 1 }))
	require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
		h.add(time.Second - 1)
		return nil
	}))
	h.requireState(Closed)
	assert.Equal(t, uint64(1), h.b.Counters().Successes)
}

func TestOutcome_NilArgumentsAreErrorsNotPanics(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	//nolint:staticcheck // a nil context is the point of the test
	assert.EqualError(t, h.b.Do(nil, func(context.Context) error { return nil }), "breaker: nil context") //lint:ignore SA1012 testing nil ctx
	assert.EqualError(t, h.b.Do(context.Background(), nil), "breaker: nil function")
	_, err := Call[int](context.Background(), h.b, nil)
	assert.EqualError(t, err, "breaker: nil function")
	//nolint:staticcheck // a nil context is the point of the test
	_, done, err := h.b.Allow(nil) //lint:ignore SA1012 testing nil ctx
	assert.EqualError(t, err, "breaker: nil context")
	assert.Nil(t, done)
	var nb *Breaker
	assert.EqualError(t, nb.Do(context.Background(), func(context.Context) error { return nil }), "breaker: nil *Breaker")
	_, _, err = nb.Allow(context.Background())
	assert.Error(t, err)
	assert.Equal(t, Counters{}, h.b.Counters())
}

// The caller's own cancellation is ignored when it carries a cause too:
// net/http returns the cause of a context canceled with a cause, not
// context.Canceled.
// Regression (13e139c): such calls counted as failures.
func TestOutcome_ACancellationWithACauseIsIgnored(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	navigatedAway := errors.New("user navigated away")
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithCancelCause(context.Background())
		err := h.b.Do(ctx, func(ctx context.Context) error {
			cancel(navigatedAway)
			return fmt.Errorf("GET /stock: %w", context.Cause(ctx))
		})
		require.ErrorIs(t, err, navigatedAway)
	}
	h.requireState(Closed)
	assert.Equal(t, uint64(30), h.b.Counters().Ignored)
}
