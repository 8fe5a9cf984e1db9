package breaker

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"sync"
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

			found := g.load(regressionKey) // Get's map lookup...
			require.Same(t, old, found)
			d.drop(t, gh)                     // ...the drop...
			g.cache.put(regressionKey, found) // ...and Get's re-cache.

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

// GroupConfig.IdleAfter: a half-open breaker whose only call is a probe
// still in flight has been asked for nothing since, and is dropped. The
// probe's result, when it comes, gives no verdict and makes no breaker;
// the next call finds a new, closed breaker for the key.
func TestGroup_AProbeOfADroppedBreakerGivesNoVerdict(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: time.Hour})
	gh.calls(regressionKey, 20, errBoom)
	gh.clk.Add(30 * time.Second)
	old, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	_, done, err := old.Allow(context.Background())
	require.NoError(t, err)
	require.Equal(t, HalfOpen, old.State())
	gh.g.EvictIdle()
	gh.clk.Add(time.Hour)
	require.Equal(t, 1, gh.g.EvictIdle())
	assert.Equal(t, Evictions{HalfOpen: 1}, gh.g.Status().Evicted)

	done(nil)
	assert.Zero(t, gh.g.Len(), "a stale probe makes no breaker")
	c := old.Counters()
	assert.Zero(t, c.ProbesPassed, "no verdict")
	assert.Equal(t, uint64(1), c.Successes)

	cur, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	assert.NotSame(t, old, cur)
	assert.Equal(t, Closed, cur.State())
}

// recorder is a subscriber that keeps the transitions it sees.
type recorder struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 64)} }

func (r *recorder) see(_ *Breaker, e Event) {
	r.mu.Lock()
	r.got = append(r.got, e.Name+" "+e.From.String()+">"+e.To.String())
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// Scenario: a subscriber that panicked took the event from every
// subscriber after it, and its panic came out of whatever call happened to
// cause the transition: a Do, a metrics scrape, or the watcher's goroutine
// (package ops tests that one), where nothing recovers it and the process
// died.
func TestRegression_APanickingSubscriberHidesNoEventAndCrashesNothing(t *testing.T) {
	t.Run("caller", func(t *testing.T) {
		var buf bytes.Buffer
		gh := newGroupHarness(t, GroupConfig{}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		gh.g.Subscribe(func(*Breaker, Event) { panic("subscriber bug") })
		rec := newRecorder()
		gh.g.Subscribe(rec.see)
		require.NotPanics(t, func() { gh.calls("inventory.GetStock", 20, errBoom) })
		assert.Equal(t, []string{"inventory.GetStock closed>open"}, rec.seen())
		assert.Contains(t, buf.String(), `level=ERROR msg="breaker: subscriber panicked" breaker.name=inventory.GetStock panic="subscriber bug"`)
	})
	t.Run("no_logger", func(t *testing.T) {
		var buf bytes.Buffer
		defer slog.SetDefault(slog.Default())
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
		gh := newGroupHarness(t, GroupConfig{})
		gh.g.Subscribe(func(*Breaker, Event) { panic("subscriber bug") })
		require.NotPanics(t, func() { gh.calls("inventory.GetStock", 20, errBoom) })
		assert.Contains(t, buf.String(), `msg="breaker: subscriber panicked"`, "reported to slog.Default()")
	})
}

// Scenario: dispatch read the subscriber list once per event, so a
// subscriber removed while an event was being delivered (by an earlier
// subscriber, or by another goroutine) was still called with it after
// its unsubscribe had returned.
func TestRegression_NoDeliveryAfterUnsubscribeReturns(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	rec := newRecorder()
	var unsubscribe func()
	gh.g.Subscribe(func(*Breaker, Event) { unsubscribe() })
	unsubscribe = gh.g.Subscribe(rec.see)
	gh.calls("inventory.GetStock", 20, errBoom)
	assert.Empty(t, rec.seen())
}

// Scenario: code kept a *Breaker from before its key was removed, and
// forced it open. The group's subscribers got that transition under the
// key's name, so a metrics adapter counted it for the key's new breaker,
// which had never left Closed. Subscribers now see the group's breakers
// only, and Subscribe tells them which one.
func TestRegression_SubscribersSeeNoTransitionOfADroppedBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	rec := newRecorder()
	gh.g.Subscribe(rec.see)
	var from []*Breaker
	gh.g.Subscribe(func(b *Breaker, _ Event) { from = append(from, b) })

	old, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	require.True(t, gh.g.Remove(regressionKey))
	require.NoError(t, old.SetMode(ModeForcedOpen))
	assert.Empty(t, rec.seen())

	cur, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	require.NoError(t, cur.SetMode(ModeForcedOpen))
	assert.Equal(t, []string{regressionKey + " closed>open"}, rec.seen())
	assert.Equal(t, []*Breaker{cur}, from)
}

// Scenario: a sweep had marked a breaker dropped and not yet taken it out
// of the map when Get, with a key that missed the cache, found it there
// and returned it. A call on it was forwarded to the key's current
// breaker, which Get again found to be the dropped one: the call went
// round until the sweep finished, and a diverted result was recorded
// into the dropped breaker itself. Here the test holds the group's lock
// between the two steps of the drop, as the sweep does.
func TestRegression_GetNeverReturnsABreakerBeingDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	old, err := gh.g.Get(regressionKey)
	require.NoError(t, err)

	gh.g.mu.Lock()
	_, dropped := old.drop(false)
	require.True(t, dropped)
	got := make(chan *Breaker)
	go func() {
		b, _ := gh.g.Get(regressionBuilt)
		got <- b
	}()
	var early *Breaker
	select {
	case early = <-got:
	case <-time.After(100 * time.Millisecond):
		// Get is waiting for the drop to finish, as it should.
	}
	gh.g.forgetLocked(regressionKey, old)
	gh.g.mu.Unlock()
	if early == nil {
		early = <-got
	}
	assert.NotSame(t, old, early, "Get returned a dropped breaker")
	assert.Equal(t, []*Breaker{early}, reachable(gh.g, regressionKey))
}

// TestRace_GroupLookupsDropsAndDeliveries runs lookups with the constant
// key and with an equal built one, long and short calls, streams, Remove,
// idle sweeps, SetPolicies, Status over Range and subscribers coming and going, all
// at once. Run under -race. When everything has stopped, the key has one
// breaker, found by every lookup and by Range, and it is not dropped.
func TestRace_GroupLookupsDropsAndDeliveries(t *testing.T) {
	steps := 400
	if testing.Short() {
		steps = 100
	}
	gh := newGroupHarness(t, GroupConfig{IdleAfter: time.Second})
	g := gh.g
	ctx := context.Background()
	var wg sync.WaitGroup
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < steps; i++ {
				f(i)
			}
		}()
	}
	fail := func(i int) error {
		if i%3 == 0 {
			return errBoom
		}
		return nil
	}
	run(func(i int) { _ = g.Do(ctx, regressionKey, func(context.Context) error { return fail(i) }) })
	run(func(i int) { _ = g.Do(ctx, regressionBuilt, func(context.Context) error { return fail(i) }) })
	run(func(i int) {
		b, err := g.Get(regressionKey)
		require.NoError(t, err)
		_, done, err := b.Allow(ctx)
		if err == nil {
			runtime.Gosched()
			done(fail(i))
		}
	})
	run(func(i int) {
		switch i % 4 {
		case 0:
			g.Remove(regressionKey)
		case 1:
			gh.clk.Add(time.Second)
			g.EvictIdle()
		case 2:
			_ = g.SetPolicies(GroupPolicy{Default: policy(func(p *Policy) { p.MinRequests = 5 + i%7 })})
		default: // what ops.Snapshot reads
			g.Range(func(_ string, b *Breaker) bool { _ = b.Status(); return true })
		}
	})
	run(func(int) {
		unsubscribe := g.Subscribe(func(b *Breaker, e Event) {
			assert.Equal(t, b.Name(), e.Name)
		})
		runtime.Gosched()
		unsubscribe()
	})
	wg.Wait()

	b1, err := g.Get(regressionKey)
	require.NoError(t, err)
	b2, err := g.Get(regressionBuilt)
	require.NoError(t, err)
	assert.Same(t, b1, b2)
	assert.False(t, b1.dropped())
	assert.Equal(t, []*Breaker{b1}, reachable(g, regressionKey))
}

// A call admitted before its breaker tripped, still running when the
// tripped breaker is removed, returns a result that was stale anyway: it
// is counted nowhere in a window, and makes no new breaker for a key that
// was removed on purpose. A call admitted just before the drop does make
// one (see TestRegression_EvictionLosesNoOutcomeOfACallInFlight).
func TestGroup_AStaleResultAfterRemoveMakesNoBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	b, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	release, wait := startCall(t, b.Do)
	gh.calls(regressionKey, 20, errBoom)
	require.Equal(t, Open, b.State())
	require.True(t, gh.g.Remove(regressionKey))
	release <- nil
	require.NoError(t, wait())
	assert.Zero(t, gh.g.Len())
}

// Scenario: Range (and so ops.Snapshot, ops.Alerts and the metrics adapters) ran
// while an idle sweep had marked a breaker dropped and not yet taken it
// out of the map, and reported the dropped breaker as one of the group's.
// The test holds the group's lock between the two steps, as the sweep
// does.
func TestRegression_RangeSkipsABreakerBeingDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	old, err := gh.g.Get(regressionKey)
	require.NoError(t, err)
	gh.g.mu.Lock()
	_, dropped := old.drop(false)
	require.True(t, dropped)
	seen := reachable(gh.g, regressionKey)
	gh.g.forgetLocked(regressionKey, old)
	gh.g.mu.Unlock()
	assert.Empty(t, seen)
}

// Scenario: after a forced open was released, OpenSince gave the release
// but a refusal's OpenError.Since still gave the start of the forced open,
// so a client's error and the breaker's status disagreed about when the
// outage began.
func TestRegression_RefusalAfterReleaseAgreesWithOpenSince(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Probes = 1 }))
	require.NoError(t, h.b.SetMode(ModeForcedOpen))
	h.add(2 * time.Hour)
	require.NoError(t, h.b.SetMode(ModeAuto))
	_, done, err := h.b.Allow(context.Background()) // the probe
	require.NoError(t, err)
	defer done(nil)
	var oe *OpenError
	require.ErrorAs(t, h.call(nil), &oe)
	since, ok := h.b.OpenSince()
	require.True(t, ok)
	assert.Equal(t, h.t0.Add(2*time.Hour), since)
	assert.Equal(t, since, oe.Since)
}
