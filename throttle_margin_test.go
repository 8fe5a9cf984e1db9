package breaker

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// steadyFault drives a breaker under p at 50 calls/s on a manual clock: a
// minute of health, share of the calls failing for faultFor, then every
// call failing for up to 30 s. It returns the openings in the partial
// fault and how long the hard fault took to open the breaker (-1: never).
func steadyFault(t *testing.T, seed uint64, p Policy, share float64, faultFor time.Duration) (opens uint64, toOpen time.Duration) {
	t.Helper()
	mc := &manualClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	outcomes := rand.New(rand.NewPCG(seed, 11))
	draws := rand.New(rand.NewPCG(seed, 12))
	b, err := New("pricing.Quote", p, WithClock(mc), WithRand(draws.Float64))
	if err != nil {
		t.Fatal(err)
	}
	const step = 20 * time.Millisecond
	run := func(d time.Duration, fail func() bool, stop func() bool) time.Duration {
		start := mc.now
		for mc.now.Sub(start) < d {
			_ = b.Do(context.Background(), func(context.Context) error {
				if fail() {
					return errBoom
				}
				return nil
			})
			if stop != nil && stop() {
				return mc.now.Sub(start)
			}
			mc.now = mc.now.Add(step)
		}
		return -1
	}
	run(time.Minute, func() bool { return false }, nil)
	run(faultFor, func() bool { return outcomes.Float64() < share }, nil)
	opens = b.Counters().Opens
	if b.State() != Closed {
		return opens, 0
	}
	return opens, run(30*time.Second, func() bool { return true }, func() bool { return b.State() == Open })
}

// behaviour.md §4 Throttling: the ratio rule's margin holds as long as the
// window holds calls the throttle refused, also while the probability
// lingers at 0 before throttling ends. Scenario: Throttle.MinRequests 240
// just under the 250 calls a 5 s window holds at 50 calls/s, ErrorRatio
// 0.8, K 2, a steady 70% fault for ten minutes: the throttle's requests
// dip below its floor now and then, its probability lingers at 0 for a
// Window while the window still holds its refusals (a sample of ~170
// calls), and the plain rule tripped on 133 of 166 (0.801): ten openings
// over five seeds. A hard fault still opens it within 5 s.
func TestThrottle_TheMarginHoldsWhileTheWindowHoldsRefusals(t *testing.T) {
	p := DefaultPolicy()
	p.ErrorRatio = 0.8
	p.Throttle.Enabled, p.Throttle.K, p.Throttle.MinRequests = true, 2, 240
	var total uint64
	for seed := uint64(1); seed <= 5; seed++ {
		opens, toOpen := steadyFault(t, seed, p, 0.7, 10*time.Minute)
		total += opens
		if toOpen < 0 || toOpen > 5*time.Second {
			t.Errorf("seed %d: the fault turned hard and the breaker opened after %v, want within 5s", seed, toOpen)
		}
	}
	if total > 0 {
		t.Errorf("%d openings in 50 minutes of a steady 70%% fault, want none", total)
	}
}

// README, when to turn throttling on: the margin is the ratio rule's
// alone. Scenario: ErrorRatio 0.8, K 2 and ConsecutiveFailures 20 on a
// steady 70% fault: runs of 20 failures come by chance among the calls
// the throttle admits, and the breaker opens, as it would without the
// throttle; with the ratio rule alone it stays closed.
func TestThrottle_TheOtherRulesTripOnAPartialFault(t *testing.T) {
	p := DefaultPolicy()
	p.ErrorRatio = 0.8
	p.Throttle.Enabled, p.Throttle.K = true, 2
	p.ConsecutiveFailures = 20
	var total uint64
	for seed := uint64(1); seed <= 5; seed++ {
		opens, _ := steadyFault(t, seed, p, 0.7, 10*time.Minute)
		total += opens
	}
	if total == 0 {
		t.Error("no opening by ConsecutiveFailures 20 in 50 minutes of a steady 70% fault")
	}
}
