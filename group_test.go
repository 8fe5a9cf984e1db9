package breaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupHarness is a group on a mock clock with exact cooldowns. Its
// watcher, if a test starts one, runs on ticks the test makes (unless the
// config brings its own Tick).
type groupHarness struct {
	t     *testing.T
	g     *Group
	clk   *clock.Mock
	t0    time.Time
	ticks *watchTicks
}

func newGroupHarness(t *testing.T, cfg GroupConfig, opts ...Option) *groupHarness {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	ticks := &watchTicks{t: t, clk: clk, c: make(chan time.Time)}
	if cfg.Tick == nil {
		cfg.Tick = ticks.source
	}
	g, err := NewGroup(cfg, append([]Option{WithClock(clk), WithRand(func() float64 { return 0.5 })}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return &groupHarness{t: t, g: g, clk: clk, t0: clk.Now(), ticks: ticks}
}

// watchWait bounds every wait on the watcher. A passing test never
// reaches it; a failing one fails after it instead of hanging.
const watchWait = 10 * time.Second

// watchTicks is the tick source a group harness gives its watcher
// (GroupConfig.Tick). The test makes every tick from the mock clock: tick
// moves the clock on by the watch interval and hands the watcher the new
// time. The channel is unbuffered, so a tick is taken only when the
// watcher is between rounds: handing it one is how the test knows where
// the watcher is, with no sleep and no real ticker.
type watchTicks struct {
	t        *testing.T
	clk      *clock.Mock
	c        chan time.Time
	interval atomic.Int64 // of the latest Watch
	starts   atomic.Int32 // calls of source
	stops    atomic.Int32 // calls of the stop functions it returned
}

func (wt *watchTicks) source(interval time.Duration) (<-chan time.Time, func()) {
	wt.interval.Store(int64(interval))
	wt.starts.Add(1)
	return wt.c, func() { wt.stops.Add(1) }
}

// hand gives the watcher a tick at the clock's current time and returns
// once the watcher has taken it: its previous round is over and the next
// has begun.
func (wt *watchTicks) hand() {
	wt.t.Helper()
	select {
	case wt.c <- wt.clk.Now():
	case <-time.After(watchWait):
		wt.t.Fatalf("the watcher took no tick at %v in %v", wt.clk.Now(), watchWait)
	}
}

// tick moves the clock on by one watch interval and hands the watcher the
// tick; the watcher's round has begun when it returns.
func (wt *watchTicks) tick() {
	wt.t.Helper()
	wt.clk.Add(time.Duration(wt.interval.Load()))
	wt.hand()
}

// round is tick, and returns once the watcher's round is over: it hands
// the watcher a second tick at the same instant, which the watcher takes
// only then. That second round sees what the first saw and notifies
// nothing new.
func (wt *watchTicks) round() {
	wt.t.Helper()
	wt.tick()
	wt.hand()
}

func (gh *groupHarness) calls(key string, n int, err error) {
	gh.t.Helper()
	for i := 0; i < n; i++ {
		got := gh.g.Do(context.Background(), key, func(context.Context) error { return err })
		require.NotErrorIs(gh.t, got, ErrOpen, "%s: call %d refused", key, i+1)
	}
}

func (gh *groupHarness) state(key string) State {
	gh.t.Helper()
	b, err := gh.g.Get(key)
	require.NoError(gh.t, err)
	return b.State()
}

func TestGroup_OneBreakerPerKeyCreatedOnFirstUse(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	assert.Zero(t, gh.g.Len())
	a1, err := gh.g.Get("orders.Create")
	require.NoError(t, err)
	a2, _ := gh.g.Get("orders.Create")
	b1, _ := gh.g.Get("orders.Get")
	assert.Same(t, a1, a2)
	assert.NotSame(t, a1, b1)
	assert.Equal(t, "orders.Create", a1.Name())
	assert.Equal(t, 2, gh.g.Len())

	// Concurrent first use of one key creates one breaker.
	var wg sync.WaitGroup
	got := make([]*Breaker, 16)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], _ = gh.g.Get("payment.Charge")
		}(i)
	}
	wg.Wait()
	for _, b := range got {
		assert.Same(t, got[0], b)
	}
}

func TestGroup_EmptyKeyIsAnError(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	_, err := gh.g.Get("")
	assert.EqualError(t, err, "breaker: empty key")
	assert.EqualError(t, gh.g.Do(context.Background(), "", func(context.Context) error { return nil }), "breaker: empty key")
	assert.Zero(t, gh.g.Len())
}

// behaviour.md §1 Shape: a per-service breaker lets one slow endpoint cut
// off every healthy endpoint of the same service (it took down six healthy
// ones in the incident behind these rules); per-method breakers isolate
// them.
func TestGroup_OneFailingMethodDoesNotOpenItsNeighbours(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("payment.Refund", 20, errBoom)
	gh.calls("payment.Charge", 50, nil)
	assert.Equal(t, Open, gh.state("payment.Refund"))
	assert.Equal(t, Closed, gh.state("payment.Charge"))
}

func TestGroup_OverridesApplyPerKeyAndToTheMethodsTargets(t *testing.T) {
	pay := policy(func(p *Policy) { p.OpenFor = 45 * time.Second; p.MaxOpenFor = 3 * time.Minute })
	pinned := policy(func(p *Policy) { p.MinRequests = 5 })
	gh := newGroupHarness(t, GroupConfig{Policies: GroupPolicy{
		Overrides: map[string]Policy{"payment.Charge": pay, "payment.Charge@10.0.0.9": pinned},
	}})
	get := func(k string) Policy { b, _ := gh.g.Get(k); return b.Policy() }
	assert.Equal(t, DefaultPolicy(), get("orders.Create"), "a zero default means DefaultPolicy")
	assert.Equal(t, pay, get("payment.Charge"))
	assert.Equal(t, pay, get("payment.Charge@10.0.0.7"), "a target inherits its method's override")
	assert.Equal(t, pinned, get("payment.Charge@10.0.0.9"), "its own override wins")
}

func TestGroup_InvalidPoliciesAreRefusedWithPaths(t *testing.T) {
	_, err := NewGroup(GroupConfig{Policies: GroupPolicy{
		Default:   policy(func(p *Policy) { p.Jitter = 2 }),
		Overrides: map[string]Policy{"a": policy(func(p *Policy) { p.Probes = 0 })},
	}})
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "default.jitter", pe.Problems[0].Field)
	assert.Equal(t, `overrides["a"].probes`, pe.Problems[1].Field)

	_, err = NewGroup(GroupConfig{IdleAfter: -time.Second})
	assert.Error(t, err)
	_, err = NewGroup(GroupConfig{Alerts: AlertThresholds{P3: time.Hour, P2: time.Minute, P1: time.Hour}})
	assert.ErrorContains(t, err, "alert thresholds")
}

// behaviour.md §2 Policy and §7 Errors and bad input: a bad document
// leaves every running breaker on its old policy and the error is
// reported, with the path of each bad field.
func TestGroup_LoadPoliciesIsAllOrNothing(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("orders.Create", 1, nil)
	gh.calls("payment.Charge@10.0.0.7", 1, nil)

	bad := []byte(`{
		"default": {"error_ratio": 0.6},
		"overrides": {
			"payment.Charge": {"open_for": "45s", "max_open_for": "20s"},
			"orders.Create": {"timout": "1s"}
		}
	}`)
	err := gh.g.LoadPolicies(bad)
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Problems, 2)
	assert.Equal(t, `overrides["orders.Create"].timout`, pe.Problems[0].Field)
	assert.Equal(t, `overrides["payment.Charge"].max_open_for`, pe.Problems[1].Field)
	b, _ := gh.g.Get("orders.Create")
	assert.Equal(t, DefaultPolicy(), b.Policy(), "nothing of a bad document is applied")
	assert.Equal(t, DefaultPolicy(), gh.g.Policies().Default)

	good := []byte(`{"default": {"error_ratio": 0.6}, "overrides": {"payment.Charge": {"open_for": "45s"}}}`)
	require.NoError(t, gh.g.LoadPolicies(good))
	assert.Equal(t, 0.6, b.Policy().ErrorRatio)
	pc, _ := gh.g.Get("payment.Charge@10.0.0.7")
	assert.Equal(t, 45*time.Second, pc.Policy().OpenFor)
	assert.Equal(t, 0.6, pc.Policy().ErrorRatio, "an override is read onto the document's default")
	nb, _ := gh.g.Get("search.Query")
	assert.Equal(t, 0.6, nb.Policy().ErrorRatio, "new breakers take the new default")

	for doc, field := range map[string]string{
		`{"defaults": {}}`:             "defaults",
		`{"overrides": {"": {}}}`:      "overrides",
		`{"overrides": [1]}`:           "overrides",
		`[]`:                           "(document)",
		`{"default": {"window": "x"}}`: "default.window",
	} {
		err := gh.g.LoadPolicies([]byte(doc))
		require.ErrorAs(t, err, &pe, doc)
		assert.Equal(t, field, pe.Problems[0].Field, doc)
	}
}

func TestGroupPolicy_AZeroDefaultMeansTheDefaultPolicy(t *testing.T) {
	assert.NoError(t, GroupPolicy{}.Validate())
	assert.NoError(t, GroupPolicy{Overrides: map[string]Policy{"a": DefaultPolicy()}}.Validate())
	assert.Error(t, GroupPolicy{Overrides: map[string]Policy{"a": {}}}.Validate(), "a zero override is not a default")
}

func TestGroupPolicy_JSONRoundTrip(t *testing.T) {
	gp := GroupPolicy{
		Default:   policy(func(p *Policy) { p.ErrorRatio = 0.4 }),
		Overrides: map[string]Policy{"payment.Charge": policy(func(p *Policy) { p.OpenFor = time.Minute; p.MaxOpenFor = 4 * time.Minute })},
	}
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
}

func TestGroup_ColdTargetsStartCold(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{ColdTargets: true})
	gh.calls("inventory.GetStock@10.0.0.7", 40, errBoom) // a new instance, cold caches
	gh.calls("inventory.GetStock", 20, errBoom)
	assert.Equal(t, Closed, gh.state("inventory.GetStock@10.0.0.7"), "per-target key starts cold")
	assert.Equal(t, Open, gh.state("inventory.GetStock"), "per-method key does not")
	gh.clk.Add(time.Minute)
	gh.calls("inventory.GetStock@10.0.0.7", 20, errBoom)
	assert.Equal(t, Open, gh.state("inventory.GetStock@10.0.0.7"))
}

func TestGroup_EvictsIdleBreakersButNeverOpenOnes(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute})
	gh.calls("search.Query@10.0.0.1", 1, nil)
	gh.calls("search.Query@10.0.0.2", 20, errBoom) // open
	gh.calls("search.Query@10.0.0.3", 1, nil)
	_ = gh.g.EvictIdle() // notes the activity
	gh.clk.Add(5 * time.Minute)
	gh.calls("search.Query@10.0.0.3", 1, nil) // still in use
	assert.Zero(t, gh.g.EvictIdle())
	gh.clk.Add(5 * time.Minute)
	assert.Equal(t, 1, gh.g.EvictIdle(), "only .1 has been idle for 10 minutes")
	assert.Equal(t, 2, gh.g.Len())
	var keys []string
	gh.g.Range(func(k string, _ *Breaker) bool { keys = append(keys, k); return true })
	assert.ElementsMatch(t, []string{"search.Query@10.0.0.2", "search.Query@10.0.0.3"}, keys)

	// The open one stays however long it is idle; once it has closed and
	// gone idle it goes too.
	gh.clk.Add(time.Hour)
	gh.g.EvictIdle()
	gh.g.EvictIdle()
	_, present := gh.g.m.Load("search.Query@10.0.0.2")
	assert.True(t, present, "an open breaker is never evicted")

	// A sweep also runs when new keys are created.
	b, _ := gh.g.Get("search.Query@10.0.0.2")
	b.Reset()
	gh.clk.Add(time.Hour)
	gh.calls("search.Query@10.0.0.4", 1, nil)
	gh.clk.Add(time.Hour)
	gh.calls("search.Query@10.0.0.5", 1, nil)
	_, present = gh.g.m.Load("search.Query@10.0.0.2")
	assert.False(t, present)
	assert.False(t, gh.g.Remove("search.Query@10.0.0.2"))
	assert.True(t, gh.g.Remove("search.Query@10.0.0.5"))
}

func TestGroup_EvictionIsOffByDefault(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("a", 1, nil)
	gh.clk.Add(24 * time.Hour)
	assert.Zero(t, gh.g.EvictIdle())
	assert.Equal(t, 1, gh.g.Len())
}

// behaviour.md §6 Observability: events from every breaker reach one
// subscriber list, in order per breaker, outside any lock.
func TestGroup_SubscribersSeeEveryBreakersTransitionsInOrder(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	var mu sync.Mutex
	var seen []string
	unsub := gh.g.Subscribe(func(_ *Breaker, e Event) {
		// Calling back into the breaker and the group must not deadlock.
		b, _ := gh.g.Get(e.Name)
		_ = b.State()
		_ = b.Status()
		_ = gh.g.Len()
		mu.Lock()
		seen = append(seen, e.Name+":"+e.From.String()+">"+e.To.String())
		mu.Unlock()
	})
	var other []Event
	unsub2 := gh.g.Subscribe(func(_ *Breaker, e Event) { other = append(other, e) })
	gh.calls("a", 20, errBoom)
	gh.calls("b", 20, errBoom)
	gh.clk.Add(30 * time.Second)
	gh.calls("a", 3, nil)
	assert.Equal(t, []string{"a:closed>open", "b:closed>open", "a:open>half_open", "a:half_open>closed"}, seen)
	assert.Len(t, other, 4)
	unsub()
	unsub()
	gh.calls("a", 20, errBoom)
	assert.Len(t, seen, 4, "unsubscribed")
	assert.Len(t, other, 5)
	unsub2()
	assert.NotNil(t, gh.g.Subscribe(nil))
}

func TestGroup_SnapshotServesAsJSON(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("orders.Create", 5, nil)
	gh.calls("inventory.GetStock", 12, context.DeadlineExceeded)
	gh.calls("inventory.GetStock", 8, errBoom)
	gh.clk.Add(90 * time.Second) // past the cooldown, so half-open... and P3
	s := gh.g.Snapshot()
	require.Len(t, s.Breakers, 2)
	inv := s.Breakers[0]
	assert.Equal(t, "inventory.GetStock", inv.Name, "sorted by name")
	assert.Equal(t, HalfOpen, inv.State)
	require.NotNil(t, inv.OpenSince)
	assert.Equal(t, gh.t0, *inv.OpenSince)
	assert.Equal(t, uint64(12), inv.Counters.Timeouts)
	assert.Nil(t, s.Breakers[1].OpenSince)
	require.Len(t, s.Alerts, 1)

	data, err := json.Marshal(s)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	br := doc["breakers"].([]any)[0].(map[string]any)
	assert.Equal(t, "half_open", br["state"])
	assert.Equal(t, "auto", br["mode"])
	assert.Equal(t, "5s", br["policy"].(map[string]any)["window"])
	assert.Equal(t, "P3", doc["alerts"].([]any)[0].(map[string]any)["severity"])
	assert.Equal(t, 90*time.Second, inv.OpenDuration)

	var back GroupSnapshot
	require.NoError(t, json.Unmarshal(data, &back), "a snapshot decodes back")
	assert.Equal(t, s.Breakers, back.Breakers)
	assert.Equal(t, s.Alerts[0].Severity, back.Alerts[0].Severity)
	var st State
	assert.Error(t, st.UnmarshalText([]byte("ajar")))
	var m Mode
	assert.Error(t, m.UnmarshalText([]byte("manual")))
	var sev Severity
	assert.Error(t, sev.UnmarshalText([]byte("P0")))
}

// behaviour.md §6 Observability: severity from open duration, P3 ≥1m, P2
// ≥10m, P1 ≥30m, with the method and the snapshot at trip time.
func TestAlerts_SeverityGrowsWithTheOpenDuration(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("inventory.GetStock@10.0.0.7", 8, nil)
	gh.calls("inventory.GetStock@10.0.0.7", 7, context.DeadlineExceeded)
	gh.calls("inventory.GetStock@10.0.0.7", 5, errBoom)
	gh.calls("orders.Create", 5, nil)
	steps := []struct {
		at   time.Duration
		want Severity
	}{
		{0, SeverityNone},
		{time.Minute - 1, SeverityNone},
		{time.Minute, SeverityP3},
		{10*time.Minute - 1, SeverityP3},
		{10 * time.Minute, SeverityP2},
		{30*time.Minute - 1, SeverityP2},
		{30 * time.Minute, SeverityP1},
	}
	for _, s := range steps {
		gh.clk.Set(gh.t0.Add(s.at))
		alerts := gh.g.Alerts()
		if s.want == SeverityNone {
			assert.Empty(t, alerts, "at %v", s.at)
			continue
		}
		require.Len(t, alerts, 1, "at %v", s.at)
		a := alerts[0]
		assert.Equal(t, s.want, a.Severity, "at %v", s.at)
		assert.Equal(t, "inventory.GetStock", a.Method)
		assert.Equal(t, "10.0.0.7", a.Target)
		assert.Equal(t, ReasonErrorRatio, a.Reason)
		assert.Equal(t, Snapshot{Counted: 20, Failures: 12, Timeouts: 7}, a.Snapshot)
		assert.Equal(t, s.at, a.OpenDuration)
	}
	a := gh.g.Alerts()[0]
	assert.Equal(t, "P1: breaker inventory.GetStock@10.0.0.7 has been open for 30m0s "+
		"(err_ratio: 12 of 20 calls failed, 7 of them timeouts); check the health of inventory.GetStock on 10.0.0.7", a.Message)
}

func TestAlerts_ForcedAndShadowBreakersAreNotAlerts(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{Alerts: AlertThresholds{P3: time.Second, P2: time.Minute, P1: time.Hour}})
	f, _ := gh.g.Get("maintenance.Window")
	require.NoError(t, f.SetMode(ModeForcedOpen))
	s, _ := gh.g.Get("candidate.Policy")
	require.NoError(t, s.SetMode(ModeShadow))
	gh.calls("candidate.Policy", 20, errBoom)
	gh.clk.Add(time.Hour)
	assert.Empty(t, gh.g.Alerts())
	assert.Equal(t, SeverityP1, gh.g.cfg.Alerts.Severity(time.Hour), "custom thresholds")
}

// watchRow is one instant of a watcher's step table: what happens at it,
// then the watcher's round at it and what that round notifies.
type watchRow struct {
	name string        // the instant's name, for messages
	at   time.Duration // since t0; a multiple of the watch interval
	do   func()        // at the instant, before the round; may be nil
	want []Severity    // notified by the round, in order
}

// runWatchRows hands the watcher one tick per interval up to the last row
// and checks what each round notified: a row's severities at its instant,
// nothing at the instants between rows.
func runWatchRows(t *testing.T, gh *groupHarness, got <-chan Alert, rows []watchRow) {
	t.Helper()
	interval := time.Duration(gh.ticks.interval.Load())
	check := func(name string, at time.Duration, want []Severity) {
		t.Helper()
		var sev []Severity
		for len(got) > 0 {
			sev = append(sev, (<-got).Severity)
		}
		if !slices.Equal(sev, want) {
			t.Errorf("%s (t0+%v): notified %v, want %v", name, at, sev, want)
		}
	}
	for _, r := range rows {
		for now := gh.clk.Now().Sub(gh.t0); now+interval < r.at; now += interval {
			gh.ticks.round()
			check("before "+r.name, now+interval, nil)
		}
		require.False(t, gh.t0.Add(r.at).Before(gh.clk.Now()), "%s: rows out of order", r.name)
		gh.clk.Set(gh.t0.Add(r.at))
		if r.do != nil {
			r.do()
		}
		gh.ticks.hand()
		gh.ticks.hand() // the round is over
		check(r.name, r.at, r.want)
	}
}

// Watch notifies each rise of an alert's severity once (P3 at one minute
// open, P2 at ten, P1 at thirty) and nothing in the rounds between or
// after. A breaker that recovers is forgotten, and its next outage alerts
// anew from P3.
func TestWatch_NotifiesEachRiseOnceAndCloseStopsIt(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, GroupConfig{})
	got := make(chan Alert, 16)
	require.NoError(t, gh.g.Watch(time.Minute, func(a Alert) { got <- a }))
	require.Error(t, gh.g.Watch(time.Minute, func(Alert) {}), "one watcher per group")
	assert.Equal(t, time.Minute, time.Duration(gh.ticks.interval.Load()), "Tick gets Watch's interval")

	const (
		t0 = 0
		t1 = t0 + time.Minute    // open 1m
		t2 = t0 + 10*time.Minute // open 10m
		t3 = t0 + 30*time.Minute // open 30m
		t4 = t3 + 5*time.Minute  // the probes pass
		t5 = t4 + time.Minute    // the breaker trips again
		t6 = t5 + time.Minute    // open 1m, the new outage
	)
	trip := func() { gh.calls(key, 20, errBoom) }
	runWatchRows(t, gh, got, []watchRow{
		{name: "t0", at: t0, do: trip},
		{name: "t1", at: t1, want: []Severity{SeverityP3}},
		{name: "t2", at: t2, want: []Severity{SeverityP2}},
		{name: "t3", at: t3, want: []Severity{SeverityP1}},
		{name: "t4", at: t4, do: func() {
			gh.calls(key, 3, nil)
			require.Equal(t, Closed, gh.state(key))
		}},
		{name: "t5", at: t5, do: trip},
		{name: "t6", at: t6, want: []Severity{SeverityP3}},
	})

	require.NoError(t, gh.g.Close())
	require.NoError(t, gh.g.Close(), "Close is idempotent")
	assert.Equal(t, int32(2), gh.ticks.stops.Load(), "Close stopped the ticks, as the refused second Watch did its own")
	assert.Empty(t, got, "notified after the last row")
	// goleak in TestMain proves the goroutine is gone.

	assert.Error(t, gh.g.Watch(0, func(Alert) {}))
	assert.Error(t, gh.g.Watch(time.Second, nil))
	assert.Equal(t, int32(2), gh.ticks.starts.Load(), "a bad argument starts no ticks")
}

// *clock.Mock's own Ticker plugs into GroupConfig.Tick as the field's doc
// shows: moving the mock by the interval makes the round.
func TestWatch_AMockClockTickerDrivesTheWatcher(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	var stopped atomic.Bool
	g, err := NewGroup(GroupConfig{Tick: func(d time.Duration) (<-chan time.Time, func()) {
		tk := clk.Ticker(d)
		return tk.C, func() { tk.Stop(); stopped.Store(true) }
	}}, WithClock(clk), WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	defer g.Close()
	got := make(chan Alert, 4)
	require.NoError(t, g.Watch(time.Minute, func(a Alert) { got <- a }))
	for i := 0; i < 20; i++ {
		_ = g.Do(context.Background(), "inventory.GetStock", func(context.Context) error { return errBoom })
	}
	clk.Add(time.Minute) // one tick, at one minute open
	select {
	case a := <-got:
		assert.Equal(t, SeverityP3, a.Severity)
		assert.Equal(t, time.Minute, a.OpenDuration)
	case <-time.After(watchWait):
		t.Fatal("the mock's tick made no round")
	}
	require.NoError(t, g.Close())
	assert.True(t, stopped.Load(), "Close stopped the mock's ticker")
}

// Without GroupConfig.Tick the watcher runs on a time.Ticker of the
// interval, which Close stops with the goroutine (goleak in TestMain). No
// test waits for a real tick.
func TestWatch_WithoutTickARealTickerRunsUntilClose(t *testing.T) {
	g, err := NewGroup(GroupConfig{})
	require.NoError(t, err)
	require.NoError(t, g.Watch(time.Hour, func(Alert) {}))
	require.Error(t, g.Watch(time.Hour, func(Alert) {}), "one watcher per group")
	require.NoError(t, g.Close())
	require.NoError(t, g.Watch(time.Hour, func(Alert) {}), "a closed group may watch again")
	require.NoError(t, g.Close())
}

// A GroupConfig still encodes as JSON (a function field would make
// json.Marshal fail): Tick is left out.
func TestWatch_TickIsLeftOutOfJSON(t *testing.T) {
	cfg := GroupConfig{IdleAfter: time.Minute, Tick: func(time.Duration) (<-chan time.Time, func()) { return nil, nil }}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "Tick")
	assert.Contains(t, string(b), `"IdleAfter":60000000000`)
}

// A tick source that gives no channel or no stop function is an error
// from Watch, and so is a second watcher; either way the ticks Watch
// started are stopped again.
func TestWatch_ABadTickSourceIsAnError(t *testing.T) {
	ch := make(chan time.Time)
	for _, tc := range []struct {
		name  string
		ticks <-chan time.Time
		stop  bool
		want  string
	}{
		{"no_channel", nil, true, "nil channel"},
		{"no_stop", ch, false, "nil stop function"},
		{"neither", nil, false, "nil channel and a nil stop function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stops := 0
			gh := newGroupHarness(t, GroupConfig{Tick: func(time.Duration) (<-chan time.Time, func()) {
				if !tc.stop {
					return tc.ticks, nil
				}
				return tc.ticks, func() { stops++ }
			}})
			err := gh.g.Watch(time.Minute, func(Alert) {})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "GroupConfig.Tick returned a "+tc.want)
			if tc.stop {
				assert.Equal(t, 1, stops, "the source was stopped")
			}
		})
	}
	t.Run("second_watcher", func(t *testing.T) {
		gh := newGroupHarness(t, GroupConfig{})
		require.NoError(t, gh.g.Watch(time.Minute, func(Alert) {}))
		require.Error(t, gh.g.Watch(time.Minute, func(Alert) {}))
		assert.Equal(t, int32(2), gh.ticks.starts.Load())
		assert.Equal(t, int32(1), gh.ticks.stops.Load(), "the second watcher's ticks were stopped")
		require.NoError(t, gh.g.Close())
		assert.Equal(t, int32(2), gh.ticks.stops.Load())
	})
}

// A panic from the tick source's stop function, which runs on the
// watcher's goroutine as it returns, is logged instead of ending the
// process, and Close returns.
func TestWatch_APanickingTickStopIsLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	ticks := make(chan time.Time)
	gh := newGroupHarness(t, GroupConfig{Tick: func(time.Duration) (<-chan time.Time, func()) {
		return ticks, func() { panic("ticker bug") }
	}}, WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))))
	require.NoError(t, gh.g.Watch(time.Minute, func(Alert) {}))
	require.NotPanics(t, func() { require.NoError(t, gh.g.Close()) })
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `msg="breaker: GroupConfig.Tick's stop function panicked" name="" panic="ticker bug"`)
}

func TestLogger_OneRecordPerTransitionAndProbesApart(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(l))
	gh.calls("orders.Create", 22, nil)
	gh.calls("orders.Create", 13, context.DeadlineExceeded)
	gh.calls("orders.Create", 9, errBoom)
	gh.clk.Add(30 * time.Second)
	gh.calls("orders.Create", 3, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 6, buf.String())
	assert.Equal(t, "level=WARN msg=breaker breaker=open name=orders.Create reason=err_ratio ratio=0.5 counted=44 failures=22 timeouts=13 cooldown=30s from=closed", lines[0])
	assert.Equal(t, "level=INFO msg=breaker breaker=half_open name=orders.Create reason=cooldown_elapsed ratio=0.5 counted=44 failures=22 timeouts=13 from=open", lines[1])
	assert.Equal(t, `level=INFO msg="breaker probe" breaker_probe=1 name=orders.Create outcome=success verdict=pass`, lines[2])
	assert.Equal(t, lines[2], lines[3])
	assert.Equal(t, `level=INFO msg="breaker probe" breaker_probe=1 name=orders.Create outcome=success verdict=pass`, lines[4])
	assert.Equal(t, "level=INFO msg=breaker breaker=closed name=orders.Create reason=probes_passed ratio=0 counted=0 failures=0 timeouts=0 from=half_open", lines[5])
}

func TestLogger_NilLogsNothing(t *testing.T) {
	b, err := New("x", DefaultPolicy(), WithLogger(nil))
	require.NoError(t, err)
	assert.Nil(t, b.opt.logger)
	assert.Empty(t, b.opt.hooks)
}

// A test drives the watcher with the mock clock it gives the group: the
// mock's ticker is the watcher's tick source, and moving the mock on by
// the interval makes a round.
func ExampleGroupConfig_tick() {
	mock := clock.NewMock()
	g, _ := NewGroup(GroupConfig{
		Tick: func(d time.Duration) (<-chan time.Time, func()) {
			t := mock.Ticker(d)
			return t.C, t.Stop
		},
	}, WithClock(mock))
	defer g.Close()
	alerts := make(chan Alert, 1)
	_ = g.Watch(time.Minute, func(a Alert) { alerts <- a })
	for i := 0; i < 20; i++ {
		_ = g.Do(context.Background(), "inventory.GetStock", func(context.Context) error {
			return errors.New("connection refused")
		})
	}
	mock.Add(time.Minute) // one tick: the breaker has been open for a minute
	select {
	case a := <-alerts:
		fmt.Println(a.Message)
	case <-time.After(10 * time.Second):
		fmt.Println("no alert")
	}
	// Output: P3: breaker inventory.GetStock has been open for 1m0s (err_ratio: 20 of 20 calls failed, 0 of them timeouts); check the health of inventory.GetStock
}

func ExampleGroup() {
	g, err := NewGroup(GroupConfig{
		Policies: GroupPolicy{Overrides: map[string]Policy{
			"payment.Charge": func() Policy {
				p := DefaultPolicy()
				p.OpenFor, p.MaxOpenFor = 45*time.Second, 3*time.Minute
				return p
			}(),
		}},
	})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	err = g.Do(context.Background(), "inventory.GetStock", func(ctx context.Context) error {
		return nil // the call
	})
	b, _ := g.Get("payment.Charge@10.0.0.7")
	fmt.Println(err, g.Len(), b.Policy().OpenFor)
	// Output: <nil> 2 45s
}
