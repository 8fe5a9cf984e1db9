package breaker

import (
	"context"
	"log/slog"
	"time"
)

type activity struct {
	count uint64 // calls admitted or refused, as of at
	at    int64
}

// Remove drops the breaker for key, whatever its state, and reports
// whether there was one; the next use of the key makes a new one. Calls on
// the dropped one go to the new one (see [GroupConfig.IdleAfter]).
func (g *Group) Remove(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.load(key)
	if b == nil {
		return false
	}
	b.drop(false)
	g.forgetLocked(key, b)
	return true
}

// forgetLocked takes the dropped b out of the map and the cache. g.mu must
// be held.
func (g *Group) forgetLocked(key string, b *Breaker) {
	g.m.Delete(key)
	g.n.Add(-1)
	delete(g.activity, b)
	g.cache.forget(b)
}

// droppedBit marks a breaker its group has let go of. Calls made on it,
// and results of calls admitted before the drop, go to the key's current
// breaker; dropping ends the generation, so such results reach record,
// which diverts them. The closed path pays nothing for it.
const droppedBit = 1 << 4

func (b *Breaker) dropped() bool { return b.state.Load().dropped() }

// drop marks b dropped, closed and in ModeAuto, and reports the state it
// was in and whether it dropped it; with idle, only a ModeAuto breaker,
// checked under b.mu. No lazy transition happens on a dropped breaker.
func (b *Breaker) drop(idle bool) (State, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		w := b.state.Load()
		if w.dropped() || idle && w.mode() != ModeAuto {
			return w.state(), false
		}
		b.endGenLocked(w.gen(), false)
		if b.state.CompareAndSwap(w, w.drop()) {
			b.endProbesLocked()
			return w.state(), true
		}
	}
}

// successor is the group's current breaker for b's key, made if need be.
// b must have been dropped, so b.opt.group is set.
func (b *Breaker) successor() *Breaker {
	nb, _ := b.opt.group.Get(b.name) // b.name is never empty
	return nb
}

// divert hands a result that reached the dropped b (word w) to the key's
// current breaker, and reports whether it did: one of the last generation
// before the drop goes into its window (made if need be), an older one is
// only counted there, if there is one.
func (b *Breaker) divert(caller context.Context, now int64, gen uint64, w word, o Outcome, slow bool) bool {
	if !w.dropped() {
		return false
	}
	if w.gen() != gen+1 {
		if nb := b.opt.group.load(b.name); nb != nil && !nb.dropped() {
			nb.countOutcome(o)
			return true
		}
		return false
	}
	nb := b.successor()
	nw := nb.state.Load()
	if nw.state() != Closed {
		nb.countOutcome(o)
		return true
	}
	nb.record(caller, now, nw.gen(), o, slow, nb.rules.Load())
	return true
}

// EvictIdle drops the breakers no caller has asked for in
// GroupConfig.IdleAfter (which says which are kept) and returns how many.
// Idleness is measured between sweeps: the first only notes activity.
func (g *Group) EvictIdle() int {
	if g.cfg.IdleAfter <= 0 {
		return 0
	}
	g.mu.Lock()
	rep := g.sweepLocked(g.opt.tb.Now())
	g.mu.Unlock()
	g.logDrops(rep)
	return rep.n
}

// sweepReport is what a sweep dropped, for the records written once the
// group's lock is released.
type sweepReport struct {
	n       int
	listed  []droppedBreaker // the first maxDropRecords
	byState [3]int
}

type droppedBreaker struct {
	name  string
	state State
	idle  time.Duration
}

// maxDropRecords bounds the records of one sweep; a summary follows.
const maxDropRecords = 16

// sweepLocked drops idle breakers, by the counters they keep anyway.
// g.mu must be held.
func (g *Group) sweepLocked(now int64) sweepReport {
	g.lastSweep.Store(now)
	idle := int64(g.cfg.IdleAfter)
	var rep sweepReport
	g.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		c := b.Counters()
		count := c.Admitted + c.Rejected + c.ShadowRejected
		a, ok := g.activity[b]
		if !ok || a.count != count {
			g.activity[b] = activity{count: count, at: now}
			return true
		}
		if now-a.at < idle {
			return true
		}
		st, ok := b.drop(true)
		if !ok {
			return true
		}
		g.forgetLocked(k.(string), b)
		g.evicted[st].Add(1)
		rep.n++
		rep.byState[st]++
		if len(rep.listed) < maxDropRecords {
			rep.listed = append(rep.listed, droppedBreaker{b.name, st, time.Duration(now - a.at)})
		}
		return true
	})
	return rep
}

// logDrops writes a sweep's records (docs/observability.md): one per
// breaker, Debug if it was closed, else Info, for the first
// maxDropRecords, then a summary. g.mu must not be held.
func (g *Group) logDrops(rep sweepReport) {
	l := g.opt.logger
	if l == nil || rep.n == 0 {
		return
	}
	ctx := context.Background()
	for _, d := range rep.listed {
		level := slog.LevelInfo
		if d.state == Closed {
			level = slog.LevelDebug
		}
		l.LogAttrs(ctx, level, "breaker dropped", slog.Attr{Key: logGroup, Value: slog.GroupValue(
			slog.String("name", d.name),
			slog.String("state", d.state.String()),
			slog.String("reason", "idle"),
			// A string, as the cooldown: "10m0s" in both handlers.
			slog.String("idle", d.idle.String()))})
	}
	if rep.n > len(rep.listed) {
		l.LogAttrs(ctx, slog.LevelInfo, "breakers dropped", slog.Attr{Key: logGroup, Value: slog.GroupValue(
			slog.String("reason", "idle"),
			slog.Int("dropped", rep.n),
			slog.Int("unlisted", rep.n-len(rep.listed)),
			slog.Int("closed", rep.byState[Closed]),
			slog.Int("open", rep.byState[Open]),
			slog.Int("half_open", rep.byState[HalfOpen]))})
	}
}
