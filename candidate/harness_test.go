package candidate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = errors.New("boom")

// harness is a group on a mock clock whose policy documents are applied
// with a version, through a hold on its policies, as package live
// applies them.
type harness struct {
	t    *testing.T
	g    *breaker.Group
	rep  *candidate.Reporter // the group's observer
	clk  *clock.Mock
	hold *breaker.PolicyHold
}

func newHarness(t *testing.T, opts ...breaker.Option) *harness {
	t.Helper()
	return newGroupHarness(t, breaker.GroupConfig{}, opts...)
}

func newGroupHarness(t *testing.T, cfg breaker.GroupConfig, opts ...breaker.Option) *harness {
	t.Helper()
	return newLoggedHarness(t, cfg, testutil.DiscardLogger(), opts...)
}

// newLoggedHarness is newGroupHarness with the group and its reporter
// logging to log.
func newLoggedHarness(t *testing.T, cfg breaker.GroupConfig, log *slog.Logger, opts ...breaker.Option) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewMock(), rep: candidate.NewReporter(log)}
	h.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g, err := breaker.NewGroup(cfg, append([]breaker.Option{breaker.WithClock(h.clk),
		breaker.WithRand(func() float64 { return 0.5 }), breaker.WithLogger(log), breaker.WithObserver(h.rep)}, opts...)...)
	require.NoError(t, err)
	h.g = g
	h.hold, err = g.HoldPolicies("test:policies")
	require.NoError(t, err)
	t.Cleanup(h.hold.Release)
	return h
}

// doc decodes data and applies it as version.
func (h *harness) doc(version, data string) {
	h.t.Helper()
	gp, err := breaker.ParseGroupPolicy([]byte(data))
	require.NoError(h.t, err)
	require.NoError(h.t, h.hold.Apply(gp, "test:policies", version))
}

func (h *harness) calls(key string, n int, err error) {
	for i := 0; i < n; i++ {
		_ = h.g.Do(context.Background(), key, func(context.Context) error { return err })
	}
}

func mustGet(t *testing.T, g *breaker.Group, key string) *breaker.Breaker {
	t.Helper()
	b, err := g.Get(key)
	require.NoError(t, err)
	return b
}
