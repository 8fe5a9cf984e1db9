package breaker

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// *clock.Mock must plug in as a Clock with no adapter.
var _ Clock = clock.NewMock()

var errBoom = errors.New("boom")

// long says whether to run the long variants of the tests: the race
// hammers for their full length. scripts/stress.sh sets it.
var long = os.Getenv("BREAKER_LONG") != ""

// rapidChecks runs the rapid property tests that follow in t with n
// checks, unless the command line set -rapid.checks or BREAKER_LONG is
// set, where they keep rapid's own default (100) or the value given. For
// tests whose every check takes long, such as those that step
// *clock.Mock, which sleeps a millisecond a step.
func rapidChecks(t *testing.T, n int) {
	t.Helper()
	f := flag.Lookup("rapid.checks")
	set := false
	flag.Visit(func(g *flag.Flag) { set = set || g.Name == f.Name })
	if set || long {
		return
	}
	old := f.Value.String()
	require.NoError(t, f.Value.Set(strconv.Itoa(n)))
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// harness drives one breaker on a mock clock. The jitter source returns
// 0.5, which makes every cooldown exactly OpenFor·2^level.
type harness struct {
	t   *testing.T
	b   *Breaker
	clk *clock.Mock
	t0  time.Time

	mu     sync.Mutex
	events []Event
}

func newHarness(t *testing.T, p Policy, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewMock()}
	h.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h.t0 = h.clk.Now()
	all := append([]Option{
		WithClock(h.clk),
		WithRand(func() float64 { return 0.5 }),
		OnTransition(func(e Event) {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}),
	}, opts...)
	b, err := New("inventory.GetStock", p, all...)
	require.NoError(t, err)
	h.b = b
	return h
}

// at moves the mock clock to t0+d. It never moves it backwards unless a
// test asks for that on purpose with set.
func (h *harness) at(d time.Duration) {
	h.t.Helper()
	target := h.t0.Add(d)
	require.False(h.t, target.Before(h.clk.Now()), "at(%v) would move the clock back", d)
	h.clk.Set(target)
}

func (h *harness) add(d time.Duration) { h.clk.Add(d) }

// call runs one call that returns err.
func (h *harness) call(err error) error {
	return h.b.Do(context.Background(), func(context.Context) error { return err })
}

// calls runs n calls that return err and fails the test if one is refused.
func (h *harness) calls(n int, err error) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		got := h.call(err)
		require.NotErrorIs(h.t, got, ErrOpen, "call %d of %d was refused", i+1, n)
	}
}

// trip opens a fresh breaker with MinRequests failures.
func (h *harness) trip() {
	h.t.Helper()
	h.calls(h.b.Policy().MinRequests, errBoom)
	require.Equal(h.t, Open, h.b.State(), "breaker did not trip")
}

func (h *harness) requireState(want State) {
	h.t.Helper()
	require.Equal(h.t, want, h.b.State(), "state at t0+%v", h.clk.Now().Sub(h.t0))
}

func (h *harness) eventLog() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// transitions renders the events as "from>to:reason" for compact asserts.
func (h *harness) transitions() []string {
	var out []string
	for _, e := range h.eventLog() {
		out = append(out, e.From.String()+">"+e.To.String()+":"+string(e.Reason))
	}
	return out
}

// lastReason is the reason of the last transition the harness saw.
func (h *harness) lastReason() Reason {
	ev := h.eventLog()
	if len(ev) == 0 {
		return ""
	}
	return ev[len(ev)-1].Reason
}

// policy returns DefaultPolicy changed by f.
func policy(f func(p *Policy)) Policy {
	p := DefaultPolicy()
	if f != nil {
		f(&p)
	}
	return p
}

// blocked starts a call in its own goroutine that runs until release is
// closed (or its context ends) and returns what release's sender chose.
// It returns after the call has been admitted, or refused.
type blocked struct {
	admitted bool
	probe    bool
	ctx      context.Context
	release  chan error
	done     chan error
}

func (h *harness) start(ctx context.Context) *blocked {
	bl := &blocked{release: make(chan error, 1), done: make(chan error, 1)}
	in := make(chan struct{})
	go func() {
		err := h.b.Do(ctx, func(c context.Context) error {
			bl.admitted = true
			bl.probe = IsProbe(c)
			bl.ctx = c
			close(in)
			select {
			case err := <-bl.release:
				return err
			case <-c.Done():
				return c.Err()
			}
		})
		if !bl.admitted {
			close(in)
		}
		bl.done <- err
	}()
	<-in
	return bl
}

// finish releases a blocked call with err and waits for Do to return.
func (bl *blocked) finish(err error) error {
	bl.release <- err
	return <-bl.done
}

// step is one line of a state-machine table: at t0+at, make the calls, then
// expect the state.
type step struct {
	at    time.Duration
	ok    int // calls returning nil
	fail  int // calls returning errBoom
	want  State
	label string
}

// runSteps is the table runner of the state-machine tests.
func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for i, s := range steps {
		h.at(s.at)
		h.calls(s.ok, nil)
		h.calls(s.fail, errBoom)
		require.Equal(t, s.want, h.b.State(), "step %d (%s) at t0+%v", i, s.label, s.at)
	}
}

func mustGet(t *testing.T, g *Group, key string) *Breaker {
	t.Helper()
	b, err := g.Get(key)
	require.NoError(t, err)
	return b
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lockedBuffer is a log sink written by one goroutine while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// slogTo logs as text to w, without the time, so that records compare.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// docHarness is a group on a mock clock whose policy documents are
// applied with a version, through a hold on its policies, as a followed
// source applies them (package live).
type docHarness struct {
	t    *testing.T
	g    *Group
	clk  *clock.Mock
	hold *PolicyHold
}

func newDocHarness(t *testing.T, cfg GroupConfig, opts ...Option) *docHarness {
	t.Helper()
	h := &docHarness{t: t, clk: clock.NewMock()}
	h.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g, err := NewGroup(cfg, append([]Option{WithClock(h.clk), WithRand(func() float64 { return 0.5 }),
		WithLogger(discardLogger())}, opts...)...)
	require.NoError(t, err)
	h.g = g
	h.hold, err = g.HoldPolicies("test:policies")
	require.NoError(t, err)
	t.Cleanup(h.hold.Release)
	return h
}

// doc decodes data and applies it as version; it fails the test if the
// document is refused.
func (h *docHarness) doc(version, data string) {
	h.t.Helper()
	gp, err := ParseGroupPolicy([]byte(data))
	require.NoError(h.t, err)
	require.NoError(h.t, h.hold.Apply(gp, "test:policies", version))
}

func (h *docHarness) calls(key string, n int, err error) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		_ = h.g.Do(context.Background(), key, func(context.Context) error { return err })
	}
}

// openSince is when b's outage in progress began, as its Status says.
func openSince(b *Breaker) (time.Time, bool) {
	if o := b.Status().Outage; o != nil {
		return o.Since, true
	}
	return time.Time{}, false
}
