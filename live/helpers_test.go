package live_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
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
		breaker.WithLogger(discardLogger())}, opts...)...)
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

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lockedBuffer is a log sink written by the follower's goroutine while
// the test reads it.
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
