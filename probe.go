package breaker

import (
	"context"
	"math"
	"sync/atomic"
)

// Half-open admission and verdicts. Probes are real calls, and their number
// is fixed (docs/internals.md, "Half-open probes").

type probeKey struct{}

// probeMark is the value a probe's context carries: the episode
// (generation) that admitted it and whether the probe is still in flight.
// A nil *probeMark hides an outer context's mark.
type probeMark struct {
	gen  uint64
	live atomic.Bool
}

// liveProbes counts the live marks of every breaker in the process; while
// it is 0 a closed call needs no walk of its context. A mark goes live
// after the count is raised and dead before it is lowered, so 0 is never
// read while a mark is live.
var liveProbes atomic.Int64

// newProbeMark returns the live mark of a probe of episode gen.
func newProbeMark(gen uint64) *probeMark {
	liveProbes.Add(1)
	m := &probeMark{gen: gen}
	m.live.Store(true)
	return m
}

// end ends the mark once its probe's result is in. It may be called more
// than once, and on a nil mark (a call that was not a probe).
func (m *probeMark) end() {
	if m != nil && m.live.Swap(false) {
		liveProbes.Add(-1)
	}
}

// IsProbe reports whether ctx belongs to a half-open probe in flight: a
// call admitted to test whether the downstream has recovered, whose result
// is not in yet. Integrations tag such requests (Breaker-Probe: 1,
// breaker_probe=1). It is false for every other call, even one made inside
// another breaker's probe, once the probe's function has returned or its
// done been called, and for a nil ctx.
func IsProbe(ctx context.Context) bool {
	if ctx == nil || liveProbes.Load() == 0 {
		return false
	}
	m, _ := ctx.Value(probeKey{}).(*probeMark)
	return m != nil && m.live.Load()
}

// unmarked returns ctx, or, when ctx belongs to another breaker's live
// probe, a child in which IsProbe is false (the rare case that allocates).
func unmarked(ctx context.Context) context.Context {
	if liveProbes.Load() == 0 {
		return ctx
	}
	return unmarkedSlow(ctx)
}

func unmarkedSlow(ctx context.Context) context.Context {
	if !IsProbe(ctx) {
		return ctx
	}
	return context.WithValue(ctx, probeKey{}, (*probeMark)(nil))
}

// Roles of an admitted call.
const (
	roleCounted uint8 = iota // closed state: its outcome goes to the window
	roleProbe                // half-open probe: its outcome is a verdict
	roleShadow               // admitted by a shadow breaker that would have refused it
)

// admitNotClosed admits or refuses a call on any word w but plain closed
// (open, half-open, forced and shadow modes); a closed w, from Allow or a
// timed call, is admitted as counted.
func (b *Breaker) admitNotClosed(w word, r *rules) (token, error) {
	for {
		switch w.state() {
		case Closed:
			if t := r.thr; t != nil && uint32(t.p.Load()) != 0 { // Policy.Throttle
				role, err := b.throttleAdmit(w)
				return token{gen: w.gen(), role: role}, err
			}
			return token{gen: w.gen()}, nil
		case Open:
			if w.mode() != ModeForcedOpen {
				now := b.opt.tb.Now()
				if now >= b.transitionDue.Load() {
					b.toHalfOpen(now, w)
					w = b.state.Load()
					continue
				}
			}
		case HalfOpen:
			if issued := w.issued(); issued < r.probes && issued < maxIssued {
				if b.state.CompareAndSwap(w, w.claim()) {
					m := newProbeMark(w.gen())
					return token{gen: w.gen(), role: roleProbe, slot: b.admitProbe(w.gen(), m), mark: m}, nil
				}
				w = b.state.Load()
				continue
			}
			if now := b.opt.tb.Now(); now >= b.transitionDue.Load() {
				b.probeTimeout(now, w)
				w = b.state.Load()
				continue
			}
		}
		// transitionDue means what the word it was read with says: a
		// cooldown's end may be the next episode's probe deadline.
		if nw := b.state.Load(); nw != w {
			w = nw
			continue
		}
		if w.mode() == ModeShadow {
			b.tally.Inc(countShadowRejected)
			return token{gen: w.gen(), role: roleShadow}, nil
		}
		b.tally.Inc(countRejected)
		return token{}, b.refusal()
	}
}

// refusal is the error of a refused call: the current episode's open
// error, shared by all its refusals so that refusing allocates nothing.
func (b *Breaker) refusal() error {
	if e := b.openErr.Load(); e != nil {
		return e
	}
	return ErrOpen // only in a race with a close
}

// verdict applies a probe's outcome; a stale probe changes nothing. A
// panicked probe never passes: it frees its slot, or under StrictProbes
// fails the episode. The rules are read under b.mu, so a verdict never
// counts passes against a replaced probe count.
func (b *Breaker) verdict(ctx context.Context, now int64, gen uint64, slot uint8, o Outcome, elapsed int64, excused, panicked bool) {
	b.mu.Lock()
	r := b.rules.Load()
	strict := r.p.StrictProbes
	pass := o == Success || (o == Failure && !strict && !panicked)
	if pass && b.slowFails(r, elapsed) {
		pass, o = false, Failure // too slow for a breaker its slowness opened
	}
	w := b.state.Load()
	if w.gen() != gen || w.state() != HalfOpen {
		b.mu.Unlock()
		b.logProbe(ctx, o, "stale")
		return
	}
	b.landedLocked(slot)
	verdict := "fail"
	switch {
	case o == Ignored || (excused && !pass) || (panicked && !strict):
		// No verdict: free the slot. A cold target's failure is excused.
		verdict = "none"
		b.releaseLocked(gen)
	case pass:
		verdict = "pass"
		h := b.histLocked()
		h.probesOK++
		h.passed++
		h.out.passed++
		if o != Success {
			h.out.onError++
		}
		if uint64(h.passed) >= r.probes {
			b.closeLocked(now, w.mode(), ReasonProbesPassed)
		}
	default:
		h := b.histLocked()
		h.probesBad++
		h.out.failed++
		b.reopenLocked(now, r, ReasonProbeFailed)
	}
	b.mu.Unlock()
	// Deferred: a panicking log handler must not leave the event queued.
	defer b.flush()
	b.logProbe(ctx, o, verdict)
}

// slowFails reports whether a probe that took elapsed (-1: not timed)
// fails for its slowness: the trip that opened the breaker this time was
// the slow-call rule's, and the probe was slower than SlowCall, whatever
// StrictProbes says (docs/behaviour.md §4, Half-open). b.mu must be held.
func (b *Breaker) slowFails(r *rules, elapsed int64) bool {
	return r.slowCall > 0 && elapsed > r.slowCall && b.hist != nil && b.hist.lastTrip == ReasonSlowRatio
}

// releaseLocked gives back one probe slot of episode gen, if it is still
// running, by CAS: admission claims slots without the lock.
func (b *Breaker) releaseLocked(gen uint64) {
	for {
		w := b.state.Load()
		if w.gen() != gen || w.state() != HalfOpen || w.issued() == 0 {
			return
		}
		if b.state.CompareAndSwap(w, w.release()) {
			return
		}
	}
}

// The probe timeout: with every slot taken, an episode reopens once a
// probe has been in flight for one cooldown, timed from each probe's own
// admission. Slots are claimed by CAS; the winner registers under b.mu
// (admitProbe), its verdict unregisters it (landedLocked), and the timeout
// is decided under b.mu. It can miss only probes between their CAS and
// their registration, younger than any registered one, so it is never
// early (docs/internals.md, "Half-open probes").

// noSlot is the slot of a probe whose episode ended before it registered.
const noSlot = 0xFF

// admitProbe registers a probe that has just claimed a slot of episode
// gen and returns its entry in history.inflight.
func (b *Breaker) admitProbe(gen uint64, m *probeMark) uint8 {
	now := b.opt.tb.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.state.Load()
	if w.gen() != gen || w.state() != HalfOpen {
		return noSlot // the episode is over; the probe's result is stale
	}
	h := b.histLocked()
	i := 0
	for i < len(h.inflight) && h.inflight[i].at != never {
		i++
	}
	if i == len(h.inflight) {
		// At most maxIssued slots are ever issued, so i < noSlot.
		h.inflight = append(h.inflight, inflightProbe{at: never})
	}
	h.inflight[i] = inflightProbe{at: now, mark: m}
	b.refreshProbeDeadlineLocked()
	return uint8(i)
}

// landedLocked unregisters a probe of the current episode that has its
// verdict, or gave its slot back. b.mu must be held.
func (b *Breaker) landedLocked(slot uint8) {
	if h := b.hist; h != nil && int(slot) < len(h.inflight) {
		h.inflight[slot] = inflightProbe{at: never}
		b.refreshProbeDeadlineLocked()
	}
}

// endProbesLocked ends the marks of the episode's probes in flight, so
// that one whose result never comes does not keep liveProbes up for ever.
// b.mu must be held.
func (b *Breaker) endProbesLocked() {
	if h := b.hist; h != nil {
		for i := range h.inflight {
			h.inflight[i].mark.end()
			h.inflight[i] = inflightProbe{at: never}
		}
	}
}

// refreshProbeDeadlineLocked sets transitionDue to when the oldest
// registered probe will have been in flight for one unjittered cooldown.
// b.mu must be held.
func (b *Breaker) refreshProbeDeadlineLocked() {
	oldest := int64(math.MaxInt64)
	if h := b.hist; h != nil {
		for _, p := range h.inflight {
			if p.at != never {
				oldest = min(oldest, p.at)
			}
		}
	}
	deadline := int64(math.MaxInt64)
	if oldest != math.MaxInt64 {
		deadline = oldest + b.baseCooldown(b.rules.Load())
		if deadline < oldest {
			deadline = math.MaxInt64
		}
	}
	b.transitionDue.Store(deadline)
}
