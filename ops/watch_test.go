package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// Watch notifies each rise of an alert's severity once (P3 once the
// outage has lasted one minute, P2 ten, P1 thirty) and nothing in the
// rounds between or after. An outage that has settled (the breaker stayed
// closed for MaxOpenFor, 2m) is forgotten, and the breaker's next outage
// alerts anew from P3.
func TestWatch_NotifiesEachRiseOnceAndCloseStopsIt(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	assert.Equal(t, time.Minute, time.Duration(gh.ticks.interval.Load()), "Tick gets the interval")

	const (
		t0 = 0
		t1 = t0 + time.Minute    // open 1m
		t2 = t0 + 10*time.Minute // open 10m
		t3 = t0 + 30*time.Minute // open 30m
		t4 = t3 + 5*time.Minute  // the probes pass
		t5 = t4 + 3*time.Minute  // settled at t4+2m; the breaker trips again
		t6 = t5 + time.Minute    // the new outage has lasted 1m
	)
	trip := func() { gh.calls(key, 20, errBoom) }
	runWatchRows(t, gh, got, []watchRow{
		{name: "t0", at: t0, do: trip},
		{name: "t1", at: t1, want: []Severity{SeverityP3}},
		{name: "t2", at: t2, want: []Severity{SeverityP2}},
		{name: "t3", at: t3, want: []Severity{SeverityP1}},
		{name: "t4", at: t4, do: func() {
			gh.calls(key, 3, nil)
			require.Equal(t, breaker.Closed, gh.state(key))
		}},
		{name: "t5", at: t5, do: trip},
		{name: "t6", at: t6, want: []Severity{SeverityP3}},
	})

	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close is idempotent")
	assert.Equal(t, int32(1), gh.ticks.stops.Load(), "Close stopped the ticks")
	assert.Empty(t, got, "notified after the last row")
	// goleak in TestMain proves the goroutine is gone.

	_, err = gh.watch(WatchConfig{}, func(Alert) {})
	assert.ErrorContains(t, err, "WatchConfig.Interval must be positive")
	_, err = gh.watch(WatchConfig{Interval: time.Second}, nil)
	assert.ErrorContains(t, err, "nil notify")
	_, err = Watch(nil, WatchConfig{Interval: time.Second}, func(Alert) {})
	assert.ErrorContains(t, err, "nil group")
	assert.Equal(t, int32(1), gh.ticks.starts.Load(), "a bad argument starts no ticks")
	var none *Watcher
	assert.NoError(t, none.Close(), "a nil watcher closes")
}

// Two watchers of one group are on their own: each notifies every rise
// it sees by its own thresholds, and closing one leaves the other
// running. (The watcher used to live in the group, which had room for
// one.)
func TestWatch_TwoWatchersOfAGroupAreIndependent(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	other := &watchTicks{t: t, clk: gh.clk, c: make(chan time.Time)}
	got, early := make(chan Alert, 4), make(chan Alert, 4)
	w1, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	w2, err := gh.watch(WatchConfig{Interval: time.Second, Tick: other.source,
		Thresholds: Thresholds{P3: time.Second, P2: 2 * time.Second, P1: time.Hour}}, func(a Alert) { early <- a })
	require.NoError(t, err)
	assert.Equal(t, int32(1), gh.ticks.starts.Load())
	assert.Equal(t, int32(1), other.starts.Load())

	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(2 * time.Second)
	other.hand()
	other.hand() // the round is over
	require.Len(t, early, 1)
	assert.Equal(t, SeverityP2, (<-early).Severity)
	require.NoError(t, w2.Close())
	assert.Equal(t, int32(1), other.stops.Load())
	assert.Equal(t, int32(0), gh.ticks.stops.Load(), "the first watcher runs on")

	gh.clk.Add(time.Minute)
	gh.ticks.hand()
	gh.ticks.hand()
	require.Len(t, got, 1)
	assert.Equal(t, SeverityP3, (<-got).Severity)
	require.NoError(t, w1.Close())
	assert.Equal(t, int32(1), gh.ticks.stops.Load())
}

// *clock.Mock's own Ticker plugs into WatchConfig.Tick as the field's doc
// shows: moving the mock by the interval makes the round.
func TestWatch_AMockClockTickerDrivesTheWatcher(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	var stopped atomic.Bool
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(clk), breaker.WithRand(func() float64 { return 0.5 }))
	require.NoError(t, err)
	got := make(chan Alert, 4)
	w, err := Watch(g, WatchConfig{Interval: time.Minute, Tick: func(d time.Duration) (<-chan time.Time, func()) {
		tk := clk.Ticker(d)
		return tk.C, func() { tk.Stop(); stopped.Store(true) }
	}}, func(a Alert) { got <- a })
	require.NoError(t, err)
	defer w.Close()
	for i := 0; i < 20; i++ {
		_ = g.Do(context.Background(), "inventory.GetStock", func(context.Context) error { return errBoom })
	}
	clk.Add(time.Minute) // one tick, at one minute open
	select {
	case a := <-got:
		assert.Equal(t, SeverityP3, a.Severity)
		assert.Equal(t, time.Minute, a.Duration)
	case <-time.After(watchWait):
		t.Fatal("the mock's tick made no round")
	}
	require.NoError(t, w.Close())
	assert.True(t, stopped.Load(), "Close stopped the mock's ticker")
}

// Without WatchConfig.Tick the watcher runs on a time.Ticker of the
// interval, which Close stops with the goroutine (goleak in TestMain). No
// test waits for a real tick.
func TestWatch_WithoutTickARealTickerRunsUntilClose(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	w, err := Watch(g, WatchConfig{Interval: time.Hour}, func(Alert) {})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	w, err = Watch(g, WatchConfig{Interval: time.Hour}, func(Alert) {})
	require.NoError(t, err, "a group may be watched again")
	require.NoError(t, w.Close())
}

// A tick source that gives no channel or no stop function is an error
// from Watch; the ticks Watch started are stopped again.
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
			gh := newGroupHarness(t, breaker.GroupConfig{})
			w, err := gh.watch(WatchConfig{Interval: time.Minute, Tick: func(time.Duration) (<-chan time.Time, func()) {
				if !tc.stop {
					return tc.ticks, nil
				}
				return tc.ticks, func() { stops++ }
			}}, func(Alert) {})
			require.Error(t, err)
			assert.Nil(t, w)
			assert.Contains(t, err.Error(), "WatchConfig.Tick returned a "+tc.want)
			if tc.stop {
				assert.Equal(t, 1, stops, "the source was stopped")
			}
		})
	}
}

// A panic from the tick source's stop function, which runs on the
// watcher's goroutine as it returns, is logged instead of ending the
// process, and Close returns.
func TestWatch_APanickingTickStopIsLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	ticks := make(chan time.Time)
	gh := newGroupHarness(t, breaker.GroupConfig{})
	w, err := gh.watch(WatchConfig{Interval: time.Minute, Tick: func(time.Duration) (<-chan time.Time, func()) {
		return ticks, func() { panic("ticker bug") }
	}, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))}, func(Alert) {})
	require.NoError(t, err)
	require.NotPanics(t, func() { require.NoError(t, w.Close()) })
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `msg="ops: WatchConfig.Tick's stop function panicked" panic="ticker bug"`)
}

// Close called from inside notify (an alert handler that shuts the service
// down, say) returns and stops the watcher; a Close from outside notify
// waits for the watcher as ever.
// Regression (8142692): Close waited for the watcher, which waited for notify.
func TestWatch_CloseFromInsideNotifyReturns(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(time.Minute) // a P3
	closed := make(chan error, 1)
	var w *Watcher
	ready := make(chan struct{})
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(Alert) { <-ready; closed <- w.Close() })
	require.NoError(t, err)
	close(ready)
	gh.ticks.hand()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(watchWait):
		t.Fatal("Close called from notify did not return")
	}
	// The watcher has stopped: another may start, and Close waits for it.
	w2, err := gh.watch(WatchConfig{Interval: time.Hour}, func(Alert) {})
	require.NoError(t, err)
	require.NoError(t, w2.Close())
	require.NoError(t, w.Close(), "and outside notify, Close waits for the first")
	// goleak in TestMain proves both watchers are gone.
}

// A notify that panics is recovered on the watcher's goroutine, which the
// library started, and logged with the breaker's name; the watcher goes on
// to its next round.
// Regression (8142692): nothing recovered the panic, and the process died.
func TestWatch_APanickingNotifyIsLoggedAndTheWatcherGoesOn(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(time.Minute)
	got := make(chan Severity, 4)
	w, err := gh.watch(WatchConfig{Interval: time.Minute, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))}, func(a Alert) {
		got <- a.Severity
		if a.Severity == SeverityP3 {
			panic("alert sink bug")
		}
	})
	require.NoError(t, err)
	wait := func() Severity {
		select {
		case s := <-got:
			return s
		case <-time.After(watchWait):
			t.Fatal("no notification")
		}
		return SeverityNone
	}
	gh.ticks.hand()
	assert.Equal(t, SeverityP3, wait())
	gh.clk.Add(9 * time.Minute)
	gh.ticks.hand() // taken once the panicking round is over
	assert.Equal(t, SeverityP2, wait(), "the watcher goes on")
	require.NoError(t, w.Close())
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `msg="ops: watcher recovered a panic" breaker.name=inventory.GetStock panic="alert sink bug"`)
}

// With no WatchConfig.Logger, recovered panics go to slog.Default().
func TestWatch_NoLoggerReportsToTheDefault(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)))
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(time.Minute)
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(Alert) { panic("alert sink bug") })
	require.NoError(t, err)
	gh.ticks.hand()
	gh.ticks.hand() // the panicking round is over
	require.NoError(t, w.Close())
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `msg="ops: watcher recovered a panic"`)
}

// Every Close returns only once the watcher has, however many run at once:
// here two goroutines close the watcher while it is inside notify.
// Regression (399263c): the second Close returned at once, notify still running.
func TestWatch_EveryCloseWaitsForTheWatcher(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.clk.Add(time.Minute)
	in, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(Alert) {
		close(in)
		<-release
		returned.Store(true)
	})
	require.NoError(t, err)
	gh.ticks.hand()
	<-in
	first := make(chan struct{})
	go func() { _ = w.Close(); close(first) }()
	for stopped := false; !stopped; { // until the first Close has stopped the watcher
		select {
		case <-w.stop:
			stopped = true
		default:
			runtime.Gosched()
		}
	}
	second := make(chan struct{})
	go func() { _ = w.Close(); close(second) }()
	select {
	case <-second:
		assert.True(t, returned.Load(), "the second Close returned while notify was running")
	case <-time.After(100 * time.Millisecond):
		// Still waiting, as it should.
	}
	close(release)
	<-first
	<-second
	assert.True(t, returned.Load())
}

// A subscriber that panics on the watcher's goroutine (the watcher's look
// moves a breaker whose cooldown is over to half-open) hides the event from
// no later subscriber, and its panic is recovered and logged.
// Regression (5a70e05): the panic cut delivery short and killed the process.
func TestWatch_APanickingSubscriberOnItsGoroutineCrashesNothing(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	gh := newGroupHarness(t, breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))))
	gh.calls("inventory.GetStock", 20, errBoom)
	gh.g.Subscribe(func(*breaker.Breaker, breaker.Event) { panic("subscriber bug") })
	rec := newRecorder()
	gh.g.Subscribe(rec.see)
	// The cooldown is over: the watcher's next look at the breaker
	// moves it to half-open, on the watcher's goroutine.
	gh.clk.Add(30 * time.Second)
	w, err := gh.watch(WatchConfig{Interval: time.Minute}, func(Alert) {})
	require.NoError(t, err)
	gh.ticks.hand()
	select {
	case <-rec.ch:
	case <-time.After(watchWait):
		t.Fatal("the watcher delivered no event")
	}
	require.NoError(t, w.Close())
	assert.Equal(t, []string{"inventory.GetStock open>half_open"}, rec.seen())
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `msg="breaker: subscriber panicked"`)
}

// A subscriber may take a snapshot and the alerts: neither holds a lock
// of the group or of a breaker while it reads them.
func TestSnapshot_FromASubscriber(t *testing.T) {
	gh := newGroupHarness(t, breaker.GroupConfig{})
	var snaps []GroupSnapshot
	gh.g.Subscribe(func(*breaker.Breaker, breaker.Event) {
		snaps = append(snaps, Snapshot(gh.g, Thresholds{}, nil))
		_ = Alerts(gh.g, Thresholds{})
	})
	gh.calls("inventory.GetStock", 20, errBoom)
	require.Len(t, snaps, 1)
	assert.Equal(t, breaker.Open, snaps[0].Breakers[0].State)
}

// A test drives the watcher with the mock clock it gives the group: the
// mock's ticker is the watcher's tick source, and moving the mock on by
// the interval makes a round.
func ExampleWatch() {
	mock := clock.NewMock()
	g, _ := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(mock))
	alerts := make(chan Alert, 1)
	w, err := Watch(g, WatchConfig{
		Interval: time.Minute,
		Tick: func(d time.Duration) (<-chan time.Time, func()) {
			t := mock.Ticker(d)
			return t.C, t.Stop
		},
	}, func(a Alert) { alerts <- a })
	if err != nil {
		panic(err)
	}
	defer w.Close()
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
	// Output: P3: breaker inventory.GetStock has been failing for 1m0s (opened on error_ratio: 20 of 20 calls failed, 0 of them timeouts; probing now); check the health of inventory.GetStock
}

// A WatchConfig encodes as JSON (a function field would make json.Marshal
// fail): Tick and Logger are left out.
func TestWatch_TickIsLeftOutOfJSON(t *testing.T) {
	cfg := WatchConfig{Interval: time.Minute, Tick: func(time.Duration) (<-chan time.Time, func()) { return nil, nil }, Logger: slog.Default()}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "Tick")
	assert.NotContains(t, string(b), "Logger")
	assert.Contains(t, string(b), `"interval":60000000000`)
}

// roundAt sets the clock to t0+at, hands the watcher a tick there and
// returns what the round notified, once the round is over.
func (gh *groupHarness) roundAt(at time.Duration, got <-chan Alert) []Severity {
	gh.t.Helper()
	gh.clk.Set(gh.t0.Add(at))
	gh.ticks.hand()
	gh.ticks.hand() // the round is over
	var sev []Severity
	for len(got) > 0 {
		sev = append(sev, (<-got).Severity)
	}
	return sev
}

// Scenario: with an interval longer than the P3 threshold, a breaker
// notified at P1 closed, settled and tripped again between two rounds. The
// watcher knew the key as notified at P1, saw it alerting again at the
// next round, and notified nothing for the whole new outage, not even
// when it reached P1 again.
func TestWatch_AnOutageThatBeginsBetweenRoundsIsNotifiedFromItsFirstSeverity(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Hour}, func(a Alert) { got <- a })
	require.NoError(t, err)

	gh.calls(key, 20, errBoom) // t0: the first outage
	assert.Equal(t, []Severity{SeverityP1}, gh.roundAt(time.Hour, got), "t0+1h: open 1h")
	gh.clk.Set(gh.t0.Add(65 * time.Minute))
	gh.calls(key, 3, nil) // the probes pass
	require.Equal(t, breaker.Closed, gh.state(key))
	gh.clk.Set(gh.t0.Add(68 * time.Minute))
	gh.calls(key, 20, errBoom) // settled at 67m: the second outage
	assert.Equal(t, []Severity{SeverityP1}, gh.roundAt(2*time.Hour, got), "t0+2h: the second outage, 52m long")
	assert.Empty(t, gh.roundAt(3*time.Hour, got), "t0+3h: the second outage is notified once")
}

// Scenario: the same as above with a short interval and a notify that
// blocked, a pager slow to answer: while it blocked on the P1, the
// breaker closed, settled and tripped again, and the new outage went
// unnotified.
func TestWatch_AnOutageThatBeginsDuringASlowNotifyIsNotified(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	in, release := make(chan Severity), make(chan struct{})
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) {
		if a.Severity == SeverityP1 {
			in <- a.Severity
			<-release
		}
		got <- a
	})
	require.NoError(t, err)

	gh.calls(key, 20, errBoom)
	gh.clk.Set(gh.t0.Add(30 * time.Minute))
	gh.ticks.hand()
	assert.Equal(t, SeverityP1, <-in, "t0+30m: P1, and notify blocks")
	gh.clk.Set(gh.t0.Add(35 * time.Minute))
	gh.calls(key, 3, nil)
	require.Equal(t, breaker.Closed, gh.state(key))
	gh.clk.Set(gh.t0.Add(38 * time.Minute))
	gh.calls(key, 20, errBoom) // settled at 37m: the second outage
	close(release)
	assert.Equal(t, []Severity{SeverityP1, SeverityP3}, gh.roundAt(39*time.Minute, got),
		"the P1 returns; the next round sees the second outage, 1m long")
	assert.Equal(t, []Severity{SeverityP2}, gh.roundAt(48*time.Minute, got), "10m long")
}

// Scenario: a breaker notified at P1 was dropped from the group (Remove,
// or idle eviction) and its key made a new breaker that tripped before
// the next round: the new breaker's outage went unnotified.
func TestWatch_ABreakerMadeAgainUnderItsKeyIsANewOutage(t *testing.T) {
	const key = "inventory.GetStock@10.0.0.7"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Hour}, func(a Alert) { got <- a })
	require.NoError(t, err)

	gh.calls(key, 20, errBoom)
	assert.Equal(t, []Severity{SeverityP1}, gh.roundAt(time.Hour, got))
	require.True(t, gh.g.Remove(key))
	gh.calls(key, 20, errBoom) // a new breaker, its counters from zero, trips at once
	assert.Equal(t, []Severity{SeverityP1}, gh.roundAt(2*time.Hour, got), "the new breaker's outage")
}

// Scenario: an operator switched a breaker notified at P2 to shadow mode
// for a while and back. Shadow breakers are not alerts, so the watcher
// forgot the outage, and notified it again at P2 when the breaker came
// back, though it was the same outage, already notified.
func TestWatch_AnOutageIsNotifiedOnceThroughAShadowSpell(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	gh.calls(key, 20, errBoom)
	b, err := gh.g.Get(key)
	require.NoError(t, err)
	runWatchRows(t, gh, got, []watchRow{
		{name: "t1", at: time.Minute, want: []Severity{SeverityP3}},
		{name: "t10", at: 10 * time.Minute, want: []Severity{SeverityP2}},
		{name: "shadow", at: 11 * time.Minute, do: func() { require.NoError(t, b.SetMode(breaker.ModeShadow)) }},
		{name: "auto", at: 13 * time.Minute, do: func() { require.NoError(t, b.SetMode(breaker.ModeAuto)) }},
		{name: "t30", at: 30 * time.Minute, want: []Severity{SeverityP1}},
	})
}

// The watcher grades by the group's clock, which never goes back: a
// clock stepped back an hour neither notifies an outage again nor skips
// a severity.
func TestWatch_AClockSteppedBackNeitherRepeatsNorSkips(t *testing.T) {
	const key = "inventory.GetStock"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	gh.calls(key, 20, errBoom)
	assert.Equal(t, []Severity{SeverityP3}, gh.roundAt(time.Minute, got))
	assert.Empty(t, gh.roundAt(-time.Hour, got), "stepped back: the group's time stands at 1m open")
	assert.Empty(t, gh.roundAt(-time.Hour+8*time.Minute, got), "9m open")
	assert.Equal(t, []Severity{SeverityP2}, gh.roundAt(-time.Hour+9*time.Minute, got), "10m open")
}

// Scenario: notify panicked on the first of two alerts of a round, and
// the panic ended the round: the second alert waited for the next round,
// an hour later with this interval.
func TestWatch_APanickingNotifyLosesNoOtherAlertOfTheRound(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))}, func(a Alert) {
		got <- a
		if a.Name == "a.Panics" {
			panic("alert sink bug")
		}
	})
	require.NoError(t, err)
	gh.calls("a.Panics", 20, errBoom)
	gh.calls("b.Waits", 20, errBoom)
	gh.clk.Set(gh.t0.Add(time.Hour))
	gh.ticks.hand() // one round only: no second tick until both alerts are in
	for _, want := range []string{"a.Panics", "b.Waits"} {
		select {
		case a := <-got:
			assert.Equal(t, want, a.Name)
		case <-time.After(watchWait):
			t.Fatalf("%s not notified in the round", want)
		}
	}
	assert.Empty(t, gh.roundAt(2*time.Hour, got), "and neither again")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, strings.Count(buf.String(), `msg="ops: watcher recovered a panic" breaker.name=a.Panics panic="alert sink bug"`), buf.String())
}

// An operator forces open a breaker whose outage was notified at P2, and
// releases it two minutes later; its probes time out. The release starts
// the outage's clock again (a hold is not the downstream's outage), so
// the watcher notifies it from P3, a minute after the release, and not at
// the forced open.
func TestWatch_AReleaseFromAForcedOpenStartsANewOutage(t *testing.T) {
	const key = "payment.Charge"
	gh := newGroupHarness(t, breaker.GroupConfig{})
	got := make(chan Alert, 16)
	_, err := gh.watch(WatchConfig{Interval: time.Minute}, func(a Alert) { got <- a })
	require.NoError(t, err)
	gh.calls(key, 20, errBoom)
	b, err := gh.g.Get(key)
	require.NoError(t, err)
	runWatchRows(t, gh, got, []watchRow{
		{name: "t1", at: time.Minute, want: []Severity{SeverityP3}},
		{name: "t10", at: 10 * time.Minute, want: []Severity{SeverityP2}},
		{name: "forced", at: 11 * time.Minute, do: func() { require.NoError(t, b.SetMode(breaker.ModeForcedOpen)) }},
		{name: "released", at: 13 * time.Minute, do: func() {
			require.NoError(t, b.SetMode(breaker.ModeAuto))
			gh.calls(key, 1, context.DeadlineExceeded) // the probe times out
		}},
		{name: "t14", at: 14 * time.Minute, want: []Severity{SeverityP3}},
	})
	a := Alerts(gh.g, Thresholds{})
	require.Len(t, a, 1)
	assert.Equal(t, gh.t0.Add(13*time.Minute), a[0].Since)
}
