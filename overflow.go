package breaker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker/internal/timebase"
)

// The cap on a group's breakers (GroupConfig.MaxBreakers): past it, calls
// for new keys run through the overflow breaker, forced closed. The
// decision is in Group.create (docs/internals.md, "The cap on breakers").

// fullWarnInterval is the least time between two "breaker group full"
// records.
const fullWarnInterval = time.Minute

// fullReport is what a group knows of the calls it sent past its cap.
type fullReport struct {
	calls  atomic.Uint64 // calls sent to the overflow breaker
	next   atomic.Int64  // when the next record may be written
	logged atomic.Uint64 // calls as of the last record
}

// newOverflow makes a group's overflow breaker, with no hooks, logger or
// group: it makes no transition and is no breaker of the group's.
func newOverflow(r *rules, opt *options) *Breaker {
	o := *opt
	o.hooks, o.logger, o.group = nil, nil, nil
	b := newBreaker(overflowName, r, &o)
	_ = b.SetMode(ModeForcedClosed) // a valid mode: never fails
	o.overflow = true               // from now on it stays forced closed (see SetMode)
	return b
}

// IsOverflow reports whether b is g's overflow breaker, which [Group.Get]
// hands out for a key past GroupConfig.MaxBreakers. Ask this, not the
// Name: the overflow breaker's Name, "(overflow)", is for display, and a
// key may be "(overflow)" too.
func (g *Group) IsOverflow(b *Breaker) bool { return g != nil && b != nil && b == g.overflow }

// overflowed counts a call sent past the cap at now, writes the warning
// if it is due, and returns the overflow breaker.
func (g *Group) overflowed(now int64) *Breaker {
	f := &g.full
	n := f.calls.Add(1)
	if next := f.next.Load(); now >= next && f.next.CompareAndSwap(next, timebase.AddSat(now, int64(fullWarnInterval))) {
		since := n - f.logged.Swap(n)
		l := g.opt.logger
		if l == nil {
			l = slog.Default()
		}
		l.LogAttrs(context.Background(), slog.LevelWarn, "breaker group full",
			slog.Attr{Key: logGroup, Value: slog.GroupValue(
				slog.Int64("max_breakers", g.max),
				slog.Uint64("overflow_calls", since),
				slog.Uint64("overflow_calls_total", n))})
	}
	return g.overflow
}
