package breaker

import "context"

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
	delete(g.activity, b)
	g.cache.forget(b)
}

// droppedBit in a breaker's state word marks a breaker its group has let
// go of (removed, or evicted as idle). A dropped breaker is never handed
// out again: a call made on it, through a *Breaker kept from before, goes
// to the group's current breaker for the key (made if need be), and so
// does the result of a call admitted just before the drop. Dropping bumps
// the generation like a transition, so such a result misses the closed
// path's generation check and reaches record, which diverts it. The
// closed path pays nothing: it already compares the generation, and the
// admission test masks the bit together with the state.
const droppedBit = 1 << 4

func (b *Breaker) dropped() bool { return b.state.Load().dropped() }

// drop marks b dropped and reports whether it did. With onlyIdle it drops
// b only if it is closed and in ModeAuto, checked under b.mu so that no
// transition slips in between. The word becomes closed and in ModeAuto,
// so that no lazy transition (end of a cooldown, probe timeout) happens
// on a breaker nobody can see; a half-open episode ends with it, and so do
// its probes' marks.
func (b *Breaker) drop(onlyIdle bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		w := b.state.Load()
		if w.dropped() || onlyIdle && (w.state() != Closed || w.mode() != ModeAuto) {
			return false
		}
		if b.state.CompareAndSwap(w, w.drop()) {
			b.endProbesLocked()
			return true
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
// call admitted in the last generation before the drop is a closed-state
// call (only closed breakers are evicted) whose outcome goes into the
// successor's window, made if need be, as if it had been admitted there.
// A result older than that was stale anyway: it is only counted, by the
// successor if there is one, and no breaker is made for it.
func (b *Breaker) divert(caller context.Context, now int64, gen uint64, w word, o Outcome, slow bool) bool {
	if !w.dropped() {
		return false
	}
	if w.gen() != gen+1 {
		if nb := b.opt.group.load(b.name); nb != nil && !nb.dropped() {
			nb.countOff(o)
			return true
		}
		return false
	}
	nb := b.successor()
	nw := nb.state.Load()
	if nw.state() != Closed {
		nb.countOff(o)
		return true
	}
	nb.record(caller, now, nw.gen(), o, slow, nb.rules.Load())
	return true
}

// EvictIdle drops the closed breakers that have seen no call for
// GroupConfig.IdleAfter and returns how many it dropped. A breaker's
// idleness is measured between calls of EvictIdle (and the group's other
// sweeps): the first sweep only notes each breaker's activity.
func (g *Group) EvictIdle() int {
	if g.cfg.IdleAfter <= 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sweepLocked(g.opt.tb.now())
}

// sweepLocked drops idle breakers. Activity is read from counters the
// breakers keep anyway, so the call path pays nothing for eviction.
func (g *Group) sweepLocked(now int64) int {
	g.lastSweep = now
	idle := int64(g.cfg.IdleAfter)
	n := 0
	g.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		c := b.Counters()
		count := c.Admitted + c.Rejected + c.ShadowRejected
		a, ok := g.activity[b]
		switch {
		case !ok || a.count != count:
			g.activity[b] = activity{count: count, at: now}
		case now-a.at >= idle && b.drop(true):
			g.forgetLocked(k.(string), b)
			n++
		}
		return true
	})
	return n
}
