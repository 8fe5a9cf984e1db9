package breaker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestGates_ConcurrentFailuresTripOnTheLastWindow: goroutines fail at once
// on a breaker whose counters are striped, after a first phase of
// successes. Once they have all returned, the breaker is open exactly
// when the window's rules hold: the failures that skipped their check
// never skipped the one that had to trip it, and no gate let a breaker
// trip on a window that did not meet a rule. (During the failures the
// window only gets closer to the rules, so a check after the last failure
// decides for the whole run.)
func TestGates_ConcurrentFailuresTripOnTheLastWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := DefaultPolicy()
		p.ErrorRatio = rapid.SampledFrom([]float64{0.1, 0.5, 0.9, 1}).Draw(t, "ratio")
		p.MinRequests = rapid.IntRange(0, 200).Draw(t, "min_requests")
		p.ErrorCount = rapid.SampledFrom([]int{0, 0, 50, 300}).Draw(t, "error_count")
		workers := rapid.IntRange(2, 8).Draw(t, "workers")
		oks := rapid.IntRange(0, 100).Draw(t, "successes_each")
		fails := rapid.IntRange(0, 100).Draw(t, "failures_each")
		clk := clock.NewMock()
		b, err := New("gates", p, WithClock(clk))
		require.NoError(t, err)
		b.win.Load().Spread()
		ctx := context.Background()
		run := func(n int, err error) {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < n; i++ {
						_ = b.Do(ctx, func(context.Context) error { return err })
					}
				}()
			}
			close(start)
			wg.Wait()
		}
		run(oks, nil)
		run(fails, errBoom)
		var want bool
		if b.State() == Closed {
			want = b.tripReason(b.rules.Load(), b.Snapshot(), b.opt.tb.Now(), b.state.Load().gen()) != ""
		} else {
			// Open: the window that tripped it met a rule, and the
			// rest of the run could only add failures to it.
			st := b.Status()
			want = b.tripReason(b.rules.Load(), st.Outage.Trip.Window, b.opt.tb.Now(), b.state.Load().gen()) != ""
			require.True(t, want, "tripped on %+v, which meets no rule of %+v", st.Outage.Trip.Window, p)
		}
		require.Equal(t, want, b.State() == Open, "state %v, window %+v, policy %+v", b.State(), b.Snapshot(), p)
	})
}

// shapes runs f on a breaker whose counters have not spread (their base
// has one gate) and on one whose counters are striped (a gate a stripe).
func shapes(t *testing.T, p Policy, f func(t *testing.T, h *harness)) {
	for _, striped := range []bool{false, true} {
		name := "base"
		if striped {
			name = "striped"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, p)
			if striped {
				h.b.win.Load().Spread() // later windows spread too (nextWindow)
			}
			f(t, h)
		})
	}
}

// TestGates_SerialTripIsExact: one caller's failures trip the breaker on
// the very failure that makes the ratio hold, as on a breaker that checks
// after every failure.
func TestGates_SerialTripIsExact(t *testing.T) {
	shapes(t, DefaultPolicy(), func(t *testing.T, h *harness) { // ErrorRatio 0.5, MinRequests 20
		h.calls(100, nil)
		for i := 0; i < 99; i++ {
			require.Error(t, h.call(errBoom))
			require.Equal(t, Closed, h.b.State(), "after %d failures", i+1)
		}
		require.Error(t, h.call(errBoom)) // 100 of 200: 0.5
		h.requireState(Open)
	})
}

// TestGates_WindowMoveMakesTheNextFailureCheck: gates are worked out for
// one oldest bucket. When the window moves on and drops its successes, the
// next failure checks, though its counters are far below their gate.
func TestGates_WindowMoveMakesTheNextFailureCheck(t *testing.T) {
	shapes(t, DefaultPolicy(), func(t *testing.T, h *harness) { // ErrorRatio 0.5, MinRequests 20
		h.calls(1000, nil) // the first bucket
		h.add(defaultWindow - defaultWindow/defaultBuckets)
		h.calls(25, errBoom) // the first bucket is still in the window: 25 of 1,025
		h.requireState(Closed)
		h.add(defaultWindow / defaultBuckets) // the successes leave the window
		require.Error(t, h.call(errBoom))     // 26 of 26
		h.requireState(Open)
	})
}

// TestGates_SetPolicyMakesTheNextFailureCheck: a gate worked out under one
// policy does not let a failure skip the check under a stricter one.
func TestGates_SetPolicyMakesTheNextFailureCheck(t *testing.T) {
	shapes(t, DefaultPolicy(), func(t *testing.T, h *harness) {
		h.calls(100, nil)
		h.calls(20, errBoom) // 20 of 120 under ErrorRatio 0.5: gates far away
		h.requireState(Closed)
		p := DefaultPolicy()
		p.ErrorRatio = 0.17
		require.NoError(t, h.b.SetPolicy(p))
		require.Error(t, h.call(errBoom)) // 21 of 121 >= 0.17
		h.requireState(Open)
	})
}

// TestGates_IgnoredCallsAreCountedPerStripe: an ignored outcome is counted
// in the striped tally and still shows in Counters.
func TestGates_IgnoredCallsAreCountedPerStripe(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.b.tally.Spread()
	ignored := Ignore(errors.New("not found"))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				_ = h.b.Do(context.Background(), func(context.Context) error { return ignored })
			}
		}()
	}
	wg.Wait()
	c := h.b.Counters()
	assert.Equal(t, uint64(1000), c.Ignored)
	assert.Equal(t, uint64(1000), c.Admitted)
	assert.Equal(t, Snapshot{}, h.b.Snapshot())
}

// TestGates_FailureThatCompletesTheSampleChecksTheSlowRule: a slow call
// leaves the window one call short of MinRequests; the failure that
// completes the sample makes the slow-call rule hold, though no number of
// failures could make the error ratio hold. It must check.
func TestGates_FailureThatCompletesTheSampleChecksTheSlowRule(t *testing.T) {
	shapes(t, policy(func(p *Policy) {
		p.ErrorRatio = 1
		p.MinRequests = 3
		p.SlowCall = 100 * time.Millisecond
		p.SlowRatio = 0.2
	}), func(t *testing.T, h *harness) {
		require.NoError(t, h.call(nil))
		require.NoError(t, h.b.Do(context.Background(), func(context.Context) error {
			h.add(time.Second) // slow
			return nil
		}))
		h.requireState(Closed) // 1 slow of 2, short of MinRequests
		require.Error(t, h.call(errBoom))
		h.requireState(Open) // 1 slow of 3 >= 0.2
	})
}

// TestGates_AfterChurnConcurrentFailuresTripOnTheLastWindow is
// TestGates_ConcurrentFailuresTripOnTheLastWindow after a first phase that
// moves everything the gates are worked out from: calls of both outcomes
// from several goroutines while another moves the clock across buckets and
// swaps the policy. The second phase is failures only, at one instant, so
// the window only gets closer to the rules, and once they have all
// returned the breaker is open exactly when the window meets a rule.
// Each check steps the mock clock 20 times, so the suite runs 40 checks;
// BREAKER_LONG=1 runs rapid's 100.
func TestGates_AfterChurnConcurrentFailuresTripOnTheLastWindow(t *testing.T) {
	rapidChecks(t, 40)
	rapid.Check(t, func(t *rapid.T) {
		draw := func(label string) Policy {
			p := DefaultPolicy()
			p.ErrorRatio = rapid.SampledFrom([]float64{0.2, 0.5, 0.9, 1}).Draw(t, label+".ratio")
			p.MinRequests = rapid.IntRange(0, 300).Draw(t, label+".min_requests")
			p.ErrorCount = rapid.SampledFrom([]int{0, 0, 80, 400}).Draw(t, label+".error_count")
			return p
		}
		p1, p2 := draw("first"), draw("second")
		workers := rapid.IntRange(2, 6).Draw(t, "workers")
		calls := rapid.IntRange(10, 200).Draw(t, "calls_each")
		share := rapid.IntRange(1, 10).Draw(t, "failure_one_in")
		fails := rapid.IntRange(1, 120).Draw(t, "failures_each") // a check comes with a failure
		clk := clock.NewMock()
		b, err := New("gates", p1, WithClock(clk))
		require.NoError(t, err)
		b.win.Load().Spread()
		ctx := context.Background()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < calls; i++ {
					var err error
					if (i+w)%share == 0 {
						err = errBoom
					}
					_ = b.Do(ctx, func(context.Context) error { return err })
				}
			}(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				clk.Add(137 * time.Millisecond) // across buckets of 500 ms
				p := p1
				if i%2 == 0 {
					p = p2
				}
				_ = b.SetPolicy(p)
			}
		}()
		wg.Wait()
		if b.State() != Closed {
			b.Reset()
		}
		// Between the phases the window moves on and the policy changes:
		// the gates the first phase left are for neither.
		clk.Add(time.Duration(rapid.IntRange(0, 6000).Draw(t, "gap_ms")) * time.Millisecond)
		if rapid.Bool().Draw(t, "swap_policy") {
			_ = b.SetPolicy(draw("last"))
		}
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < fails; i++ {
					_ = b.Do(ctx, func(context.Context) error { return errBoom })
				}
			}()
		}
		close(start)
		wg.Wait()
		r := b.rules.Load()
		if b.State() == Closed {
			require.Empty(t, b.tripReason(r, b.Snapshot(), b.opt.tb.Now(), b.state.Load().gen()), "closed on a window that meets a rule: %+v, policy %+v", b.Snapshot(), b.Policy())
		} else {
			st := b.Status()
			require.NotEmpty(t, b.tripReason(r, st.Outage.Trip.Window, b.opt.tb.Now(), b.state.Load().gen()), "tripped on %+v, which meets no rule of %+v", st.Outage.Trip.Window, b.Policy())
		}
	})
}
