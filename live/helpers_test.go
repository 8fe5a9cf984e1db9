package live_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errBoom = errors.New("boom")

// chanSource delivers what the test sends it, one document at a time.
type chanSource struct {
	origin string
	docs   chan live.Document
	stop   error // returned at once if set
}

func newChanSource(origin string) *chanSource {
	return &chanSource{origin: origin, docs: make(chan live.Document)}
}

func (s *chanSource) Watch(ctx context.Context, deliver func(live.Document)) error {
	if s.stop != nil {
		return s.stop
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-s.docs:
			if d.Origin == "" {
				d.Origin = s.origin
			}
			deliver(d)
		}
	}
}

// followHarness is a group on a mock clock following a chanSource, with
// the policy records it produces.
type followHarness struct {
	t   *testing.T
	g   *breaker.Group
	clk *clock.Mock
	src *chanSource
	f   *live.Follower
	rec chan live.Change
}

func newFollowHarness(t *testing.T, cfg breaker.GroupConfig, opts ...breaker.Option) *followHarness {
	t.Helper()
	h := &followHarness{t: t, clk: clock.NewMock(), src: newChanSource("test:policies"), rec: make(chan live.Change, 16)}
	h.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g, err := breaker.NewGroup(cfg, append([]breaker.Option{breaker.WithClock(h.clk), breaker.WithRand(func() float64 { return 0.5 }),
		breaker.WithLogger(testutil.DiscardLogger())}, opts...)...)
	require.NoError(t, err)
	h.g = g
	h.f, err = live.Follow(context.Background(), g, h.src, live.OnChange(func(c live.Change) { h.rec <- c }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.f.Close() })
	return h
}

// send delivers a document and returns its record.
func (h *followHarness) send(d live.Document) live.Change {
	h.t.Helper()
	h.src.docs <- d
	select {
	case c := <-h.rec:
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no policy record")
		return live.Change{}
	}
}

func (h *followHarness) doc(version, data string) live.Change {
	h.t.Helper()
	return h.send(live.Document{Version: version, Data: []byte(data)})
}

func (h *followHarness) calls(key string, n int, err error) {
	h.t.Helper()
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
