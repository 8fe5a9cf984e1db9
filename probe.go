package breaker

import "context"

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
func (b *Breaker) admitSlow(w uint64, r *rules) (token, error) {
	for {
		switch wordState(w) {
		case Closed:
			return token{gen: wordGen(w)}, nil
		case Open:
			if wordMode(w) != ModeForcedOpen {
				now := b.opt.tb.now()
				if now >= b.deadline.Load() {
					b.toHalfOpen(now, w)
					w = b.state.Load()
					continue
				}
			}
		case HalfOpen:
			if issued := wordIssued(w); issued < r.probes && issued < 0xFF {
				if b.state.CompareAndSwap(w, w+issuedOne) {
					return token{gen: wordGen(w), role: roleProbe}, nil
				}
				w = b.state.Load()
				continue
			}
			if now := b.opt.tb.now(); now >= b.deadline.Load() {
				b.probeTimeout(now, w)
				w = b.state.Load()
				continue
			}
		}
		if wordMode(w) == ModeShadow {
			b.other[oShadowRejected].Add(1)
			return token{gen: wordGen(w), role: roleShadow}, nil
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
func (b *Breaker) verdict(ctx context.Context, now int64, gen uint64, o Outcome, excused, panicked bool) {
	b.mu.Lock()
	r := b.rules.Load()
	strict := r.p.StrictProbes
	pass := o == Success || (o == Failure && !strict && !panicked)
	w := b.state.Load()
	if wordGen(w) != gen || wordState(w) != HalfOpen {
		b.mu.Unlock()
		b.logProbe(ctx, o, "stale")
		return
	}
	verdict := "fail"
	switch {
	case o == Ignored || (excused && !pass) || (panicked && !strict):
		// No verdict: free the slot for another call. A cold target's
		// failure is excused like its failures in the window.
		verdict = "none"
		b.releaseLocked(gen)
	case pass:
		verdict = "pass"
		b.histLocked().probesOK++
		b.passed++
		if uint64(b.passed) >= r.probes {
			b.closeLocked(now, wordMode(w), ReasonProbesPassed)
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
		if wordGen(w) != gen || wordState(w) != HalfOpen || wordIssued(w) == 0 {
			return
		}
		if b.state.CompareAndSwap(w, w-issuedOne) {
			return
		}
	}
}
