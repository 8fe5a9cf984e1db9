package breaker

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// Gates: when a failure may skip the trip check.
//
// After a failure, the breaker checks its trip rules against the window.
// The check reads every stripe of the window's tally (tally.go), so on a
// breaker that cores are failing on at full rate it reads lines the other
// cores are writing, and each failure moves cache lines between them: at
// -cpu=2, a failing call cost several times a successful one. Most of
// those checks cannot trip: a window that holds 1,000 calls, 100 of them
// failures, needs hundreds more failures before its error ratio can reach
// one half.
//
// So a check that does not trip also works out how many more failures
// the window needs, at the least, before a window rule can hold, if its
// oldest bucket stays where it is (failuresNeeded), and splits that
// number between the stripes: each stripe's gate holds the count of
// failures, its own, at which it must check again. A failure that finds
// its stripe below its gate skips the check; one at or above it checks,
// and the check sets new gates. If the window needs k more failures, some
// stripe has at least ceil(k/n) of them (n stripes), so the failure that
// takes that stripe to its gate checks: no check that could trip is
// skipped. Serial calls therefore trip on exactly the same call as with a
// check after every failure; concurrent ones trip no later than the last
// failure of those running when the window's rules came to hold returns.
//
// A gate is valid only for what it was worked out from: the window, the
// rules, and the end of the newest bucket, which fixes the oldest bucket
// (see window.read). A window that moves on, a SetPolicy, a Reset or a
// transition each make the failure after it check. Successes need no
// gate: a success cannot make a failure rule hold, except by bringing the
// window up to MinRequests, which failuresNeeded accounts for, and, as
// before, the check comes with the next failure. A slow call always
// checks (its slowness is not gated), and so does a failure that
// went to the base counters (a tally that has not spread is read from
// one line) or that meets the consecutive-failure rule.
//
// The gates are published like a sequence lock. The check that sets them
// first makes seq odd, so that no failure skips on gates being rewritten,
// then reads the window, writes each stripe's gate tagged with the
// next even seq, the window, rules and head they are for, and then seq.
// A failure that read the old gates had added its failure before seq went
// odd, so the new reading has it. Checks that set gates take mu, so gates
// are set by one reading at a time. A failure that finds seq odd waits
// for the check under way and is judged by the gates it sets: if that
// reading has the failure, the check has judged it; if not, the failure
// came after the reading, as one that finds the new gates does.
//
// Rejected alternatives: checking once per bucket, or at most every so
// many failures, which misses a trip that a check would have found when
// no further failure comes; one shared failure counter, which moves its
// line on every failure, as the run of consecutive failures did; a
// failure that finds gates being set checking too (see skip).
type gates struct {
	mu    sync.Mutex
	seq   atomic.Uint64 // even: gates published; odd: being set
	win   atomic.Pointer[window]
	rules atomic.Pointer[rules]
	head  atomic.Int64 // the window's headEnd the gates are for
}

// gateMax bounds the failures a gate waits for, so that a gate compares
// with the stripe's count modulo 2^32 without wrapping.
const gateMax = 1 << 30

// skip reports whether the failure just added to st, a stripe of s, can
// skip the trip check: the gates are published for win, r and the
// window's current head, and st is below its gate.
//
// A failure that finds a check setting the gates (seq odd) waits for it
// and is judged by the gates it sets. It must not check too: at two cores
// that made the other core's next failure find a check under way in turn,
// and the two cores took turns at checking for as long as the benchmark
// ran, at three times the cost of a failure.
func (s *stripes) skip(st *stripe, win *window, r *rules) bool {
	g := &s.gates
	q := g.seq.Load()
	for spins := 0; q&1 != 0; spins++ {
		switch {
		case spins < 8:
			runtime.Gosched()
		case spins < 16:
			// The check holds mu: wait for its end there, in case it
			// was descheduled.
			g.mu.Lock()
			g.mu.Unlock() // empty: the wait is the point
		default:
			return false // checks follow each other: take part
		}
		q = g.seq.Load()
	}
	return s.below(st, win, r, q)
}

// below is skip for gates published under seq q.
func (s *stripes) below(st *stripe, win *window, r *rules, q uint64) bool {
	g := &s.gates
	if g.win.Load() != win || g.rules.Load() != r || g.head.Load() != win.headEnd.Load() {
		return false
	}
	v := st.gate.Load()
	if uint32(v>>32) != uint32(q) {
		return false // set by an earlier reading
	}
	f := uint32(st.c[kFailure].Load() + st.c[kTimeout].Load())
	if int32(f-uint32(v)) >= 0 {
		return false // at its gate
	}
	return g.seq.Load() == q
}

// gatedCheck is the trip check of a call on a spread tally: it reads the
// window and, if no rule holds, sets new gates from the same reading. It
// returns the rule that holds, or "". st is the stripe of a failure that
// its gate did not let through, or nil (a slow call, or a failure added
// to the base counters), which always reads the window.
func (b *Breaker) gatedCheck(s *stripes, st *stripe, now int64, r *rules, win *window) Reason {
	g := &s.gates
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.seq.Load()
	if st != nil && s.below(st, win, r, q) {
		// Gates set while this failure waited for the lock: they judge
		// it as they judge a failure that finds them (see skip).
		return ""
	}
	g.seq.Store(q + 1)
	var fs [maxStripes]uint64
	snap, he := win.read(now, &fs)
	if reason := b.tripReason(r, snap); reason != "" {
		// No gates until a check that does not trip sets them: every
		// failure checks.
		g.win.Store(nil)
		g.seq.Store(q + 2)
		return reason
	}
	next := q + 2
	need := failuresNeeded(r, snap)
	n := uint64(len(s.cells))
	quota := (need + n - 1) / n
	for i := range s.cells {
		s.cells[i].gate.Store(next<<32 | uint64(uint32(fs[i]+quota)))
	}
	g.win.Store(win)
	g.rules.Store(r)
	g.head.Store(he)
	g.seq.Store(next)
	return ""
}

// failuresNeeded is a lower bound on the failures that must be added to a
// window that holds snap, with its oldest bucket unchanged, before one of
// the window's rules of r can hold; at least 1 and at most gateMax.
// Successes added meanwhile only raise it for ErrorRatio and ErrorCount:
// they lower the error ratio and leave the failure count alone. For
// SlowRatio, a failure only lowers the slow ratio, unless the window is
// short of MinRequests, which the failure may complete.
//
// With F failures out of C counted calls, j more failures and m more
// successes give the ratio (F+j)/(C+j+m). It reaches R < 1 only if
// j >= (R·C - F)/(1 - R) + R·m/(1 - R), and, the window holding at least
// MinRequests calls by then, only if F+j >= R·MinRequests. With R = 1
// every call must have failed. One is taken off the bound for the
// rounding of the ratio's floating-point comparison.
func failuresNeeded(r *rules, snap Snapshot) uint64 {
	need := float64(gateMax + 1) // taken down by one below
	f, c := float64(snap.Failures), float64(snap.Counted)
	if r.errCount > 0 {
		need = min(need, float64(r.errCount)-f)
	}
	if ratio := r.p.ErrorRatio; ratio >= 1 {
		if snap.Failures >= snap.Counted {
			need = min(need, float64(r.minReq)-c)
		}
	} else if ratio > 0 {
		need = min(need, max(ratio*float64(r.minReq)-f, (ratio*c-f)/(1-ratio)))
	}
	if r.slowCall > 0 && snap.Slow > 0 && snap.Counted < r.minReq {
		// A failure can complete the sample the slow-call rule waits
		// for. Otherwise it only lowers the slow ratio, and the slow
		// count grows only with slow calls, which always check.
		need = 1
	}
	need--
	switch {
	case need < 1 || math.IsNaN(need):
		return 1
	case need >= gateMax:
		return gateMax
	}
	return uint64(need)
}
