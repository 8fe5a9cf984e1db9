package ops

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errBoom = errors.New("boom")

// groupHarness is a group on a mock clock with exact cooldowns. Its
// watchers, if a test starts them with watch, run on ticks the test makes
// (unless the config brings its own Tick).
type groupHarness struct {
	t     *testing.T
	g     *breaker.Group
	clk   *clock.Mock
	t0    time.Time
	ticks *watchTicks
}

func newGroupHarness(t *testing.T, cfg breaker.GroupConfig, opts ...breaker.Option) *groupHarness {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	ticks := &watchTicks{t: t, clk: clk, c: make(chan time.Time)}
	g, err := breaker.NewGroup(cfg, append([]breaker.Option{breaker.WithClock(clk), breaker.WithRand(func() float64 { return 0.5 })}, opts...)...)
	require.NoError(t, err)
	return &groupHarness{t: t, g: g, clk: clk, t0: clk.Now(), ticks: ticks}
}

// watch starts a watcher of the group on the harness's ticks (unless cfg
// brings its own Tick), and closes it when the test ends.
func (gh *groupHarness) watch(cfg WatchConfig, notify func(Alert)) (*Watcher, error) {
	if cfg.Tick == nil {
		cfg.Tick = gh.ticks.source
	}
	w, err := Watch(gh.g, cfg, notify)
	if err == nil {
		gh.t.Cleanup(func() { _ = w.Close() })
	}
	return w, err
}

func (gh *groupHarness) calls(key string, n int, err error) {
	gh.t.Helper()
	for i := 0; i < n; i++ {
		got := gh.g.Do(context.Background(), key, func(context.Context) error { return err })
		require.NotErrorIs(gh.t, got, breaker.ErrOpen, "%s: call %d refused", key, i+1)
	}
}

func (gh *groupHarness) state(key string) breaker.State {
	gh.t.Helper()
	b, err := gh.g.Get(key)
	require.NoError(gh.t, err)
	return b.State()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// recorder is a subscriber that keeps the transitions it sees.
type recorder struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 64)} }

func (r *recorder) see(_ *breaker.Breaker, e breaker.Event) {
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

// watchWait bounds every wait on the watcher. A passing test never
// reaches it; a failing one fails after it instead of hanging.
const watchWait = 10 * time.Second

// watchTicks is the tick source a group harness gives its watcher
// (WatchConfig.Tick). The test makes every tick from the mock clock: tick
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
