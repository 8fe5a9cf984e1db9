package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// regressionKey is a constant, so every Get below passes the very string
// the breaker is created with and takes the key cache; regressionBuilt is
// an equal string with bytes of its own, which takes the map.
const regressionKey = "inventory.GetStock@10.0.0.7"

var regressionBuilt = string([]byte(regressionKey))

// reachable returns the breakers Range visits for key.
func reachable(g *Group, key string) []*Breaker {
	var out []*Breaker
	g.Range(func(k string, b *Breaker) bool {
		if k == key {
			out = append(out, b)
		}
		return true
	})
	return out
}

// groupDrops are the two ways a group drops a breaker.
var groupDrops = []struct {
	name string
	cfg  GroupConfig
	// prepare runs before the breaker is used; drop drops it.
	prepare, drop func(t *testing.T, gh *groupHarness)
}{
	{
		name:    "remove",
		prepare: func(*testing.T, *groupHarness) {},
		drop: func(t *testing.T, gh *groupHarness) {
			require.True(t, gh.g.Remove(regressionKey))
		},
	},
	{
		name: "evict",
		cfg:  GroupConfig{IdleAfter: time.Minute},
		prepare: func(t *testing.T, gh *groupHarness) {
			gh.g.EvictIdle() // notes the activity
		},
		drop: func(t *testing.T, gh *groupHarness) {
			gh.clk.Add(time.Minute)
			require.Equal(t, 1, gh.g.EvictIdle())
		},
	},
}

// Scenario: Get(k) misses the key cache (a colliding key had taken k's
// slot) and finds breaker b in the map; before it puts b back into the
// slot, Remove(k) or an idle sweep drops b. Get then re-cached b: every
// later Get with that very string returned the dropped b, while an equal
// string built elsewhere found no breaker and created a second one. Two
// live breakers for one key, one of them invisible to Range, Snapshot,
// SetPolicies and the metrics. The steps of Get are run here in that
// order.
func TestRegression_GetRacingADropNeverRecachesTheDroppedBreaker(t *testing.T) {
	for _, d := range groupDrops {
		t.Run(d.name, func(t *testing.T) {
			gh := newGroupHarness(t, d.cfg)
			g := gh.g
			old, err := g.Get(regressionKey)
			require.NoError(t, err)
			d.prepare(t, gh)

			slot := g.cache.slot(regressionKey)
			found := g.load(regressionKey) // Get's map lookup...
			require.Same(t, old, found)
			d.drop(t, gh)                         // ...the drop...
			g.recache(slot, regressionKey, found) // ...and Get's re-cache.

			b1, err := g.Get(regressionKey)
			require.NoError(t, err)
			b2, err := g.Get(regressionBuilt)
			require.NoError(t, err)
			assert.NotSame(t, old, b1, "Get returned the dropped breaker")
			assert.Same(t, b1, b2, "two breakers for one key")
			assert.Equal(t, []*Breaker{b2}, reachable(g, regressionKey))
		})
	}
}

// startCall starts g.Do(key) with a function that blocks until the
// returned release is sent the call's result, and returns once the call
// has been admitted. wait returns Do's error.
func startCall(t *testing.T, do func(context.Context, func(context.Context) error) error) (release chan<- error, wait func() error) {
	t.Helper()
	rel := make(chan error)
	in := make(chan struct{})
	out := make(chan error, 1)
	go func() {
		out <- do(context.Background(), func(context.Context) error {
			close(in)
			return <-rel
		})
	}()
	<-in
	return rel, func() error { return <-out }
}

// Scenario: a breaker's idleness counted only calls that had returned, so a
// breaker whose only calls were still running (a long Do, a stream opened
// with Allow) looked idle and was evicted; when the calls ended, their
// outcomes went into the dropped breaker, and the breaker the group made
// next for the key never saw them. The same happened to a call made after
// the eviction through a *Breaker kept from before it.
func TestRegression_EvictionLosesNoOutcomeOfACallInFlight(t *testing.T) {
	cfg := GroupConfig{IdleAfter: time.Minute}
	cases := []struct {
		name string
		// begin starts a call on b that is still running at the eviction;
		// end finishes it with err.
		begin func(t *testing.T, b *Breaker) (end func(err error))
	}{
		{"do", func(t *testing.T, b *Breaker) func(error) {
			release, wait := startCall(t, b.Do)
			return func(err error) {
				release <- err
				require.ErrorIs(t, wait(), err)
			}
		}},
		{"do_with_timeout", func(t *testing.T, b *Breaker) func(error) {
			require.NoError(t, b.SetPolicy(policy(func(p *Policy) { p.Timeout = time.Hour })))
			release, wait := startCall(t, b.Do)
			return func(err error) {
				release <- err
				require.ErrorIs(t, wait(), err)
			}
		}},
		{"allow", func(t *testing.T, b *Breaker) func(error) {
			_, done, err := b.Allow(context.Background())
			require.NoError(t, err)
			return done
		}},
		{"kept_pointer", func(t *testing.T, b *Breaker) func(error) {
			return func(err error) {
				require.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return err }), err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gh := newGroupHarness(t, cfg)
			old, err := gh.g.Get(regressionKey)
			require.NoError(t, err)
			gh.g.EvictIdle()
			end := tc.begin(t, old)
			gh.clk.Add(time.Minute)
			gh.g.EvictIdle()
			end(errBoom)

			cur, err := gh.g.Get(regressionKey)
			require.NoError(t, err)
			c := cur.Counters()
			c.OpenTime = 0
			assert.Equal(t, Counters{Admitted: 1, Failures: 1}, c, "the group's breaker for the key")
			assert.Equal(t, uint64(1), cur.Snapshot().Failures, "the failure is in the window")
			assert.Equal(t, []*Breaker{cur}, reachable(gh.g, regressionKey))
		})
	}
}
