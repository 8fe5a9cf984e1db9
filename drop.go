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
// whether there was one. Use it when a target is decommissioned. The next
// use of the key creates a new breaker; see [GroupConfig.IdleAfter] for
// what becomes of calls still running on the dropped one, and of a
// *Breaker kept from before.
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
	g.cache.Forget(b)
}

// droppedBit in a breaker's state word marks a breaker its group has let
// go of (removed, or evicted as idle). A dropped breaker is never handed
// out again: a call made on it, through a *Breaker kept from before, goes
// to the group's current breaker for the key (made if need be), and so
// does the result of a call admitted just before the drop. Dropping ends
// the generation like a transition (endGenLocked), so such a result misses
// the closed path's generation check, or finds the window sealed, and
// reaches record, which diverts it. The closed path pays nothing: it
// already compares the generation, and the admission test masks the bit
// together with the state.
const droppedBit = 1 << 4

func (b *Breaker) dropped() bool { return b.state.Load().dropped() }

// drop marks b dropped, and reports the state it was in and whether it
// dropped it. With idle it drops b only if it is in ModeAuto (see
// GroupConfig.IdleAfter), checked under b.mu so that no SetMode slips in
// between. The word becomes closed and in ModeAuto, so that no lazy
// transition (end of a cooldown, probe timeout) happens on a breaker
// nobody can see; a half-open episode ends with it, and so do its probes'
// marks.
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

// divert hands a result that reached b (in state word w) after b was
// dropped to the key's current breaker, and reports whether it did. A
// result that reaches record from a call admitted in the last generation
// before the drop is a closed-state call (only the closed state admits
// calls whose results go to the window; a probe's goes to verdict, which
// finds its episode over), and its outcome goes into the successor's
// window, made if need be, as if it had been admitted there.
// A result older than that was stale anyway: it is only counted, by the
// successor if there is one, and no breaker is made for it.
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

// EvictIdle drops the breakers that no caller has asked for in
// GroupConfig.IdleAfter, whatever their state, and returns how many it
// dropped; see GroupConfig.IdleAfter for which are kept, and what becomes
// of a dropped breaker's calls. A breaker's idleness is measured between
// calls of EvictIdle (and the group's other sweeps): the first sweep only
// notes each breaker's activity. With a logger, each drop is recorded
// after the group's lock is released.
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

// maxDropRecords bounds the records of one sweep: a sweep after a flood
// of keys built from request data may drop thousands of breakers, and one
// summary says as much as thousands of lines.
const maxDropRecords = 16

// sweepLocked drops idle breakers. Activity is read from counters the
// breakers keep anyway (calls admitted and returned, probes included, and
// refusals), so the call path pays nothing for eviction. g.mu must be
// held.
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

// logDrops writes the records of a sweep to the group's logger, if it has
// one: one per dropped breaker, at Info for one dropped open or half-open
// and at Debug for one dropped closed (the routine end of a target that
// went away), for the first maxDropRecords, and one Info record with the
// counts if the sweep dropped more:
//
//	level=INFO msg="breaker dropped" breaker.name=payment.Charge@10.0.0.7 breaker.state=open breaker.reason=idle breaker.idle=10m0s
//	level=INFO msg="breakers dropped" breaker.reason=idle breaker.dropped=2500 breaker.unlisted=2484 breaker.closed=2400 breaker.open=100 breaker.half_open=0
//
// g.mu must not be held: a handler may call back into the group.
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
			// A string, as the cooldown is, so both handlers write "10m0s".
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
