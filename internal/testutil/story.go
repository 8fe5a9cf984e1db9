package testutil

import (
	"context"
	"sync"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/require"
)

// The keys of the metrics tests' stories.
const (
	Inventory = "inventory.GetStock"
	Pricing   = "pricing.GetPrice"
	Payment   = "payment.Charge"
)

// PlayEveryCount tells the story that moves every count the exporters
// report, on a fresh MockGroup, so that each exporter's test of all its
// series shows the same numbers:
//
//   - T0: Pricing trips; three calls are refused, one of them served by
//     a fallback.
//   - T0+10s: the cooldown is over; the probe times out and the breaker
//     reopens for 20s.
//   - T0+30s: the next probe passes and closes it, after 30s open;
//     Payment runs in shadow mode and trips.
//   - T0+34s: Inventory answers three times, once with an error that is
//     the caller's fault (ignored), and once after 3s (slow).
//   - T0+38s: Payment admits a call it would have refused.
func (m *MockGroup) PlayEveryCount() {
	t := m.t
	t.Helper()
	m.Trip(Pricing)
	m.Refused(Pricing, 2)
	v, err := breaker.Fallback(context.Background(), m.Breaker(Pricing),
		func(context.Context) (int, error) { return 0, nil },
		func(context.Context, error) (int, error) { return 1999, nil })
	require.NoError(t, err)
	require.Equal(t, 1999, v)

	m.Recover(Pricing)
	require.NoError(t, m.Breaker(Payment).SetMode(breaker.ModeShadow))
	m.Trip(Payment)

	m.At(34 * time.Second)
	m.Calls(Inventory, 3, nil)
	m.Calls(Inventory, 1, breaker.Ignore(errBoom))
	m.SlowCall(Inventory, 3*time.Second)

	m.At(38 * time.Second)
	m.Calls(Payment, 1, nil)
}

// Recover ends the outage of key, whose breaker opened at T0: at T0+10s
// the cooldown is over and the probe times out, which reopens the breaker
// for 20s; at T0+30s the next probe passes and closes it, after 30s open.
func (m *MockGroup) Recover(key string) {
	m.t.Helper()
	m.At(10 * time.Second)
	m.Calls(key, 1, context.DeadlineExceeded)
	require.Equal(m.t, breaker.Open, m.Breaker(key).State(), "after a failed probe")
	m.At(30 * time.Second)
	m.Calls(key, 1, nil)
	require.Equal(m.t, breaker.Closed, m.Breaker(key).State(), "after a probe that passed")
}

// CandidatePolicies returns MetricsPolicy for every key, with a candidate
// policy that is MetricsPolicy but for an ErrorRatio of 0.25 on keys: one
// failure in MinRequests calls opens the candidate and not the policy in
// force.
func CandidatePolicies(keys ...string) breaker.GroupPolicy {
	cand := MetricsPolicy()
	cand.ErrorRatio = 0.25
	over := map[string]breaker.Policy{}
	for _, k := range keys {
		over[k] = cand
	}
	return breaker.GroupPolicy{
		Default:   MetricsPolicy(),
		Candidate: &breaker.GroupPolicy{Default: MetricsPolicy(), Overrides: over},
	}
}

// docSource is a policy source that delivers the documents sent on it.
type docSource chan live.Document

func (s docSource) Watch(ctx context.Context, deliver func(live.Document)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-s:
			deliver(d)
		}
	}
}

// Follow has the group follow a source of the test's own until the test
// ends, and returns the follower: deliver hands the source one document
// and returns what became of it, once the group has dealt with it.
func (m *MockGroup) Follow() (f *live.Follower, deliver func(live.Document) live.Result) {
	t := m.t
	t.Helper()
	src := make(docSource)
	done := make(chan live.Change)
	fl, err := live.Follow(context.Background(), m.Group, src, live.OnChange(func(c live.Change) { done <- c }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, fl.Close()) })
	return fl, func(d live.Document) live.Result {
		src <- d
		return (<-done).Result
	}
}

// Hammer trips and resets the breakers of keys at once, one goroutine a
// key, 50 rounds each (4 failures, which trip MetricsPolicy, then Reset),
// while collect runs 20 times on a goroutine of its own. It returns once
// they all are done, with the transitions the group's subscribers were
// told of: 2 a round, the trip and the reset.
func (m *MockGroup) Hammer(collect func(), keys ...string) (transitions int) {
	var mu sync.Mutex
	seen := 0
	unsub := m.Group.Subscribe(func(*breaker.Breaker, breaker.Event) { mu.Lock(); seen++; mu.Unlock() })
	defer unsub()

	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := m.Group.Get(key)
			for i := 0; i < 50; i++ {
				for j := 0; j < 4; j++ {
					_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
				}
				b.Reset()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			collect()
		}
	}()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return seen
}
