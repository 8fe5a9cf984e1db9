package breaker

import (
	"context"
	"math"
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
// episode admits more than Policy.Probes calls.
type probeMark struct{ gen uint64 }

// IsProbe reports whether ctx belongs to a half-open probe: a call the
// breaker admitted to test whether the downstream has recovered.
// Integrations use it to tag the request (a header Breaker-Probe: 1, gRPC
// metadata breaker_probe=1) so probes can be told apart in traces and logs.
func IsProbe(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	_, ok := ctx.Value(probeKey{}).(probeMark)
	return ok
}

// Roles of an admitted call.
const (
	roleCounted uint8 = iota // closed state: its outcome goes to the window
	roleProbe                // half-open probe: its outcome is a verdict
	roleShadow               // admitted by a shadow breaker that would have refused it
)

// admitSlow handles every admission that is not a plain closed breaker:
// open (refuse, or move to half-open when the cooldown is over), half-open
// (claim a probe slot or refuse), forced and shadow modes.
func (b *Breaker) admitSlow(w word, r *rules) (token, error) {
	for {
		switch w.state() {
		case Closed:
			return token{gen: w.gen()}, nil
		case Open:
			if w.mode() != ModeForcedOpen {
				now := b.opt.tb.now()
				if now >= b.openUntil() {
					b.toHalfOpen(now, w)
					w = b.state.Load()
					continue
				}
			}
		case HalfOpen:
			if issued := w.issued(); issued < r.probes && issued < maxIssued {
				if b.state.CompareAndSwap(w, w.claim()) {
					return token{gen: w.gen(), role: roleProbe, slot: b.admitProbe(w.gen())}, nil
				}
				w = b.state.Load()
				continue
			}
			if now := b.opt.tb.now(); now >= b.probeDeadline() {
				b.probeTimeout(now, w)
				w = b.state.Load()
				continue
			}
		}
		if w.mode() == ModeShadow {
			b.tally.inc(kShadowRejected)
			return token{gen: w.gen(), role: roleShadow}, nil
		}
		b.tally.inc(kRejected)
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
// refusals, which run at full rate, read probeDeadline and take no lock
// unless it has passed.

// noSlot is the slot of a probe whose episode ended before it registered.
const noSlot = 0xFF

// admitProbe registers the admission of a probe that has just claimed a
// slot of episode gen, and returns its entry in history.inflight.
func (b *Breaker) admitProbe(gen uint64) uint8 {
	now := b.opt.tb.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.state.Load()
	if w.gen() != gen || w.state() != HalfOpen {
		return noSlot // the episode is over; the probe's result is stale
	}
	h := b.histLocked()
	i := 0
	for i < len(h.inflight) && h.inflight[i] != never {
		i++
	}
	if i == len(h.inflight) {
		// At most maxIssued slots are ever issued, so i < noSlot.
		h.inflight = append(h.inflight, never)
	}
	h.inflight[i] = now
	b.refreshProbeDeadlineLocked()
	return uint8(i)
}

// landedLocked unregisters a probe of the current episode that has its
// verdict, or gave its slot back. b.mu must be held.
func (b *Breaker) landedLocked(slot uint8) {
	if h := b.hist; h != nil && int(slot) < len(h.inflight) {
		h.inflight[slot] = never
		b.refreshProbeDeadlineLocked()
	}
}

// refreshProbeDeadlineLocked sets probeDeadline to the instant at which
// the oldest registered probe will have been in flight for one cooldown:
// the unjittered base cooldown of the current level, which is at most
// MaxOpenFor. b.mu must be held.
func (b *Breaker) refreshProbeDeadlineLocked() {
	oldest := int64(math.MaxInt64)
	if h := b.hist; h != nil {
		for _, t := range h.inflight {
			if t != never {
				oldest = min(oldest, t)
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
	b.setProbeDeadline(deadline)
}
