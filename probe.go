package breaker

import (
	"context"
	"math"
	"sync/atomic"
)

// Half-open admission and verdicts.
//
// The probes are real calls, not a synthetic health check: a health
// endpoint can answer 200 while the method it stands for still times out.
// Their number is fixed; growing it (1, 2, 4, ...) lets real traffic back
// before recovery is proven, and in the load tests behind the defaults it
// produced more false recoveries, not fewer.

type probeKey struct{}

// probeMark is the value a probe's context carries: the half-open episode
// (generation) that admitted it, which the race tests use to check that no
// episode admits more than Policy.Probes calls, and whether the probe is
// still in flight. A nil *probeMark hides an outer context's mark.
type probeMark struct {
	gen  uint64
	live atomic.Bool
}

// liveProbes counts the marks that are live, in every breaker of the
// process. While it is 0 no context can hold a live mark, so a closed call
// learns that its caller's context needs no unmarking from one load of a
// line that is written only when a probe starts or ends, instead of from
// a walk of the context. A mark goes live after the count is raised and
// dead before it is lowered, so a count of 0 is never read while a mark is
// live.
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

// IsProbe reports whether ctx belongs to a half-open probe that is in
// flight: a call the breaker admitted to test whether the downstream has
// recovered, whose result is not in yet. Integrations use it to tag the
// request (a header Breaker-Probe: 1, gRPC metadata breaker_probe=1) so
// probes can be told apart in traces and logs.
//
// The mark describes one call of one breaker. It is false in the context
// of every call a breaker admits otherwise than as its own probe, even one
// made inside another breaker's probe, and false in a probe's own context
// once its result is in (Do's function has returned, or Allow's done has
// been called). It is false for a nil ctx.
func IsProbe(ctx context.Context) bool {
	if ctx == nil || liveProbes.Load() == 0 {
		return false
	}
	m, _ := ctx.Value(probeKey{}).(*probeMark)
	return m != nil && m.live.Load()
}

// unmarked returns the context for a call that is not a probe of the
// breaker admitting it: ctx itself, or, when ctx belongs to another
// breaker's live probe, a child of it in which IsProbe is false. Only that
// rare case walks the context and allocates.
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

// admitNotClosed admits or refuses a call on a breaker whose word w is
// not plain closed: open (refuse, or move to half-open when the cooldown
// is over), half-open (claim a probe slot or refuse), forced and shadow
// modes. A closed w, which reaches it through Allow or a timed call, is
// admitted as counted.
func (b *Breaker) admitNotClosed(w word, r *rules) (token, error) {
	for {
		switch w.state() {
		case Closed:
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
		// transitionDue means what the state it was read in says: read
		// with a word from before a transition, the end of a cooldown may
		// be the probe deadline of the episode after it.
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

// verdict applies a probe's outcome. A stale probe (its episode is over)
// changes nothing. A probe whose function panicked (panicked, with o
// Failure) proves nothing about the downstream's answers, so it never
// passes: by default it frees its slot without a verdict, and under
// Policy.StrictProbes, where a failure fails the episode, it fails it.
//
// The rules are read under the lock, so a verdict and SetPolicy are
// ordered: a verdict never counts passes against a probe count that has
// already been replaced.
func (b *Breaker) verdict(ctx context.Context, now int64, gen uint64, slot uint8, o Outcome, excused, panicked bool) {
	b.mu.Lock()
	r := b.rules.Load()
	strict := r.p.StrictProbes
	pass := o == Success || (o == Failure && !strict && !panicked)
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
		// No verdict: free the slot for another call. A cold target's
		// failure is excused like its failures in the window.
		verdict = "none"
		b.releaseLocked(gen)
	case pass:
		verdict = "pass"
		h := b.histLocked()
		h.probesOK++
		h.passed++
		if uint64(h.passed) >= r.probes {
			b.closeLocked(now, w.mode(), ReasonProbesPassed)
		}
	default:
		b.histLocked().probesBad++
		b.reopenLocked(now, r, ReasonProbeFailed)
	}
	b.mu.Unlock()
	// Deferred, so that a log handler that panics on the probe's record
	// cannot leave the transition's event queued until the next one.
	defer b.flush()
	b.logProbe(ctx, o, verdict)
}

// releaseLocked gives back one probe slot of episode gen, if that episode
// is still running. The slot count is changed with a CAS because admission
// claims slots without the lock.
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

// The probe timeout.
//
// A probe that never reports (a function that ignores its context, an
// Allow whose done is never called) must not wedge the breaker, so a
// half-open episode reopens (probe_timeout) when every slot is taken and
// a probe has been in flight for one cooldown without a verdict. The
// clock of that rule is each probe's own admission, not the start of the
// episode: a low-traffic method may take many cooldowns to send its
// probes, and the open → half-open transition happens lazily whenever
// anything (a call, a metrics scrape reading State) looks, so the start
// of the episode says nothing about how long any probe has waited.
//
// Slots are claimed lock-free, by a CAS on the state word. The winner of
// a slot then registers its admission time under b.mu (admitProbe), and
// its verdict unregisters it under b.mu (landedLocked); the timeout is
// decided under b.mu too. So the timeout sees every registered probe, and
// the only probes it can miss are those between their CAS and their
// registration, which are younger than any registered one: missing them
// can only make the timeout later, never earlier, and a probe cannot be in
// flight for a cooldown before it is registered, because its function is
// called only after. Only the winners take the lock, at most Policy.Probes
// of them per episode plus the ones that give their slot back; the
// refusals, which run at full rate, read transitionDue and take no lock
// unless it has passed.

// noSlot is the slot of a probe whose episode ended before it registered.
const noSlot = 0xFF

// admitProbe registers the admission of a probe that has just claimed a
// slot of episode gen, with its mark, and returns its entry in
// history.inflight.
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

// endProbesLocked ends the marks of the probes still in flight when their
// episode ends: their results will be stale, and a probe whose result
// never comes (an Allow whose done is never called) must not keep its
// mark live, and every closed call's unmarked check slow, for ever. b.mu
// must be held.
func (b *Breaker) endProbesLocked() {
	if h := b.hist; h != nil {
		for i := range h.inflight {
			h.inflight[i].mark.end()
			h.inflight[i] = inflightProbe{at: never}
		}
	}
}

// refreshProbeDeadlineLocked sets transitionDue to the instant at which
// the oldest registered probe will have been in flight for one cooldown:
// the unjittered base cooldown of the current level, which is at most
// MaxOpenFor. b.mu must be held.
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
