package testutil

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/require"
)

// errBoom is the failure of the calls that Trip makes.
var errBoom = errors.New("boom")

// NewClock returns a mock clock at 2026-01-02 03:04:05 UTC, the instant
// every test's mock time starts at. (clock.NewMock alone reads 1970.)
func NewClock() *clock.Mock {
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return clk
}

// MockGroup is a group for tests that tell a story in mock time: its
// clock starts at T0 (see NewClock) and moves only when the test moves
// it, every breaker runs MetricsPolicy, the jitter source returns 0.5 (so
// every cooldown is exactly OpenFor·2^level) and the group logs nothing.
// Its methods fail the test when a call does not go as the story says.
type MockGroup struct {
	Group *breaker.Group
	Clock *clock.Mock
	T0    time.Time
	t     testing.TB
}

// NewMockGroup returns a MockGroup of cfg, whose Policies it sets to
// MetricsPolicy for every key.
func NewMockGroup(t testing.TB, cfg breaker.GroupConfig) *MockGroup {
	t.Helper()
	m := &MockGroup{Clock: NewClock(), t: t}
	m.T0 = m.Clock.Now()
	cfg.Policies = breaker.GroupPolicy{Default: MetricsPolicy()}
	g, err := breaker.NewGroup(cfg,
		breaker.WithClock(m.Clock),
		breaker.WithRand(func() float64 { return 0.5 }),
		breaker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	m.Group = g
	return m
}

// At moves the clock to T0+d; moving it back fails the test.
func (m *MockGroup) At(d time.Duration) {
	m.t.Helper()
	target := m.T0.Add(d)
	require.False(m.t, target.Before(m.Clock.Now()), "at(%v) would move the clock back", d)
	m.Clock.Set(target)
}

// Breaker returns key's breaker.
func (m *MockGroup) Breaker(key string) *breaker.Breaker {
	m.t.Helper()
	b, err := m.Group.Get(key)
	require.NoError(m.t, err)
	return b
}

// Call makes one call through key's breaker that returns err, and returns
// what Do returned.
func (m *MockGroup) Call(key string, err error) error {
	return m.Group.Do(context.Background(), key, func(context.Context) error { return err })
}

// Calls makes n calls that return err; one that is refused fails the
// test.
func (m *MockGroup) Calls(key string, n int, err error) {
	m.t.Helper()
	for i := 0; i < n; i++ {
		require.NotErrorIs(m.t, m.Call(key, err), breaker.ErrOpen, "call %d of %d to %s was refused", i+1, n, key)
	}
}

// Refused makes n calls that the breaker must refuse; one that is
// admitted fails the test.
func (m *MockGroup) Refused(key string, n int) {
	m.t.Helper()
	for i := 0; i < n; i++ {
		require.ErrorIs(m.t, m.Call(key, nil), breaker.ErrOpen, "call %d of %d to %s was admitted", i+1, n, key)
	}
}

// SlowCall makes a call that succeeds after d of mock time.
func (m *MockGroup) SlowCall(key string, d time.Duration) {
	m.t.Helper()
	require.NoError(m.t, m.Group.Do(context.Background(), key, func(context.Context) error {
		m.Clock.Add(d)
		return nil
	}))
}

// Trip opens key's breaker, which must be fresh: two successes and two
// failures reach MetricsPolicy's 50% of MinRequests.
func (m *MockGroup) Trip(key string) {
	m.t.Helper()
	m.Calls(key, 2, nil)
	m.Calls(key, 2, errBoom)
	require.Equal(m.t, breaker.Open, m.Breaker(key).State())
}
