package breaker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// observations keeps what an Observer is given.
type observations struct {
	mu   sync.Mutex
	list []Observation
}

func (o *observations) Observe(ob Observation) {
	o.mu.Lock()
	o.list = append(o.list, ob)
	o.mu.Unlock()
}

func (o *observations) take() []Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.list
	o.list = nil
	return l
}

// An observer sees each call once the breaker has settled it: its start
// and duration on the breaker's clock, the outcome counted, a refusal,
// a probe, and the state after; through Do and Allow alike.
func TestObserver_SeesEachCallAsTheBreakerSettledIt(t *testing.T) {
	obs := &observations{}
	h := newHarness(t, policy(func(p *Policy) { p.MinRequests = 5; p.CallTimeout = 0 }), WithObserver(obs))
	start := h.clk.Now()
	require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
		h.add(30 * time.Millisecond)
		return nil
	}))
	assert.Equal(t, []Observation{{Breaker: h.b, Name: "inventory.GetStock", Start: start, Duration: 30 * time.Millisecond,
		Outcome: Success, State: Closed}}, obs.take())

	h.calls(4, errBoom) // trips on the fourth: 4 of 5 failed
	got := obs.take()
	require.Len(t, got, 4)
	assert.Equal(t, Failure, got[0].Outcome)
	assert.Equal(t, Closed, got[2].State)
	assert.Equal(t, Open, got[3].State, "the state after the call that tripped it")

	assert.ErrorIs(t, h.call(nil), ErrOpen)
	assert.Equal(t, []Observation{{Breaker: h.b, Name: "inventory.GetStock", Start: h.clk.Now(), Refused: true, State: Open}}, obs.take())

	h.add(time.Minute) // past the cooldown: a probe, through Allow
	_, done, err := h.b.Allow(context.Background())
	require.NoError(t, err)
	assert.Empty(t, obs.take(), "observed when done")
	h.add(time.Millisecond)
	done(nil)
	done(nil) // once
	got = obs.take()
	require.Len(t, got, 1)
	assert.True(t, got[0].Probe)
	assert.Equal(t, Success, got[0].Outcome)
	assert.Equal(t, time.Millisecond, got[0].Duration)
	assert.Equal(t, HalfOpen, got[0].State)
	assert.Nil(t, got[0].Candidate)
}

// A call whose function panics is observed as the failure the breaker
// counts, and the panic goes on.
func TestObserver_APanickingCallIsObservedAsAFailure(t *testing.T) {
	obs := &observations{}
	h := newHarness(t, DefaultPolicy(), WithObserver(obs))
	assert.Panics(t, func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { panic("boom") })
	})
	got := obs.take()
	require.Len(t, got, 1)
	assert.Equal(t, Failure, got[0].Outcome)
	assert.Equal(t, uint64(1), h.b.Counters().Failures)
}

// A throttled refusal is observed as throttled, the breaker closed.
func TestObserver_SeesAThrottledRefusal(t *testing.T) {
	obs := &observations{}
	h := newThrottleHarness(t, throttlePolicy(nil), &draws{fixed: 0}, WithObserver(obs))
	h.calls(3, nil)
	h.calls(17, errBoom) // 85% failed: under error_ratio, throttling
	obs.take()
	require.True(t, h.attempt(nil), "the throttle refused none")
	got := obs.take()
	require.Len(t, got, 1)
	assert.True(t, got[0].Refused)
	assert.True(t, got[0].Throttled)
	assert.Equal(t, Closed, got[0].State)
}

// countObserver counts, allocating nothing.
type countObserver struct{ n int }

func (c *countObserver) Observe(Observation) { c.n++ }

// The closed path allocates nothing, with an observer as without one
// (behaviour.md §1 Shape).
func TestObserver_TheClosedPathAllocatesNothingWithOrWithout(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	plain, err := New("allocs.Plain", DefaultPolicy())
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = plain.Do(ctx, ok) }), "without an observer")

	c := &countObserver{}
	watched, err := New("allocs.Watched", DefaultPolicy(), WithObserver(c))
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = watched.Do(ctx, ok) }), "with an observer")
	assert.NotZero(t, c.n)
	assert.Equal(t, Closed, watched.State())
}

// BenchmarkObserver is a closed-state Do on a breaker without an observer
// and on one with an observer that counts: the cost of the observed path.
func BenchmarkObserver(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"none", nil},
		{"observer", []Option{WithObserver(&countObserver{})}},
	} {
		br, err := New("bench.Observer", DefaultPolicy(), c.opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = br.Do(ctx, ok)
			}
		})
	}
}

// A classifier that panics on an observed call settles it once, as a
// failure, through Do and through Allow's done, and the panic goes on.
// The observed path first settled such a call twice: finish abandoned it,
// then Do's deferred abandon counted it again.
func TestObserver_APanickingClassifierSettlesTheCallOnce(t *testing.T) {
	obs := &observations{}
	h := newHarness(t, DefaultPolicy(), WithObserver(obs),
		WithClassifier(func(error) Outcome { panic("classifier") }))
	assert.Panics(t, func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { return errBoom })
	})
	_, done, err := h.b.Allow(context.Background())
	require.NoError(t, err)
	assert.Panics(t, func() { done(errBoom) })
	c := h.b.Counters()
	assert.Equal(t, uint64(2), c.Failures)
	assert.Equal(t, uint64(2), c.Admitted)
	got := obs.take()
	require.Len(t, got, 2)
	assert.Equal(t, Failure, got[0].Outcome)
	assert.Equal(t, Failure, got[1].Outcome)
}
