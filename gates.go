package breaker

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// tripRules are the trip rules a window's counts are judged by. A tripRules value
// must not change once a window has been checked against it: gates are
// set for one *tripRules.
type tripRules struct {
	MinRequests uint64  // the counted calls the window needs before any rule holds
	ErrorRatio  float64 // Failures/Counted at which the breaker trips; 0: off
	ErrorCount  uint64  // Failures at which the breaker trips; 0: off
	SlowRule    bool    // whether the slow-call rule is on
	SlowRatio   float64 // kSlow/Counted at which the breaker trips, if SlowRule
}

// tripRule names a rule of tripRules.
type tripRule uint8

const (
	noRule         tripRule = iota
	ruleErrorRatio          // tripRules.ErrorRatio
	ruleErrorCount          // tripRules.ErrorCount
	ruleSlowRatio           // tripRules.SlowRatio
)

// Holds returns the first rule of r that c meets, or noRule.
func (r *tripRules) Holds(c Snapshot) tripRule {
	if c.Counted < r.MinRequests || c.Counted == 0 {
		return noRule
	}
	switch {
	case r.ErrorRatio > 0 && float64(c.Failures)/float64(c.Counted) >= r.ErrorRatio:
		return ruleErrorRatio
	case r.ErrorCount > 0 && c.Failures >= r.ErrorCount:
		return ruleErrorCount
	case r.SlowRule && float64(c.Slow)/float64(c.Counted) >= r.SlowRatio:
		return ruleSlowRatio
	}
	return noRule
}

// Gates: when a failure may skip the trip check.
//
// A check that finds no rule holding also works out k, the fewest
// failures the window needs, with its oldest bucket where it is, before a
// rule can hold (failuresNeeded), and gives each of the n cells that
// failures are added to (the stripes, or the base of a tally that has not
// spread) a gate at its own failure count plus ceil(k/n). A failure
// below its cell's gate skips the check. If a rule comes to hold, k
// failures have been added since, some cell has reached its gate, and
// the failure that took it there checks: no check that could trip is
// skipped, and one caller's failures trip on exactly the failure that
// makes a rule hold.
//
// Gates hold for one *tripRules and one newest bucket (which fixes the
// oldest: see slidingWindow.read); a move of the window or other rules make the
// next failure check. They are published like a sequence lock: the check
// that sets them makes seq odd, then reads the window, writes each gate
// tagged with the next even seq, then seq. A failure that skipped on the
// old gates added its failure before seq went odd, so the new reading has
// it. Checks that set gates hold mu. A failure that finds seq odd waits
// and is judged by the gates being set: either their reading has it, or
// it came after the reading, like a failure that finds them set.
type gates struct {
	mu    sync.Mutex
	seq   atomic.Uint64             // even: gates published; odd: being set
	rules atomic.Pointer[tripRules] // the rules the gates are for; nil: none
	head  atomic.Int64              // the window's headEnd they are for
}

// serialGates are the gates of a tally that has not spread: its base is
// its one cell.
type serialGates struct {
	gates
	gate atomic.Uint64
}

// gateMax bounds the failures a gate waits for, so that a gate compares
// with its cell's count modulo 2^32 without wrapping.
const gateMax = 1 << 30

// cell is a set of counters that failures are added to, and its gate.
type cell struct {
	c    *counters
	gate *atomic.Uint64
}

func (c cell) failures() uint64 { return c.c[kFailure].Load() + c.c[kTimeout].Load() }

// Check returns the rule of r that the window meets at now, or noRule,
// after a failure or a slow call was added to it. at is the stripe Add
// returned. If gated, a failure whose cell is below its gate skips the
// reading; a call that must be checked whatever the gates (a slow call)
// passes false. A sealed window meets no rule: its generation is over.
func (w *slidingWindow) Check(now int64, r *tripRules, at *tallyStripe, gated bool) tripRule {
	switch s := w.tally.stripes.Load(); {
	case s == sealedStripes:
		return noRule
	case s != nil:
		own := cell{}
		if gated && at != nil {
			own = cell{&at.c, &at.gate}
			if s.gates.skip(own, w, r) {
				return noRule
			}
		}
		return w.check(&s.gates, s, own, now, r)
	default:
		if !gated {
			return w.check(&w.serialGates().gates, nil, cell{}, now, r)
		}
		// The base's gate holds only while the tally has not spread:
		// then every failure since the gates' reading went to the base.
		g := w.serial.Load()
		if g != nil && g.skip(cell{&w.tally.base, &g.gate}, w, r) && w.tally.stripes.Load() == nil {
			return noRule
		}
		g = w.serialGates()
		return w.check(&g.gates, nil, cell{&w.tally.base, &g.gate}, now, r)
	}
}

// serialGates returns the window's serial gates, made at the first check.
func (w *slidingWindow) serialGates() *serialGates {
	if g := w.serial.Load(); g != nil {
		return g
	}
	return w.newSerialGates()
}

func (w *slidingWindow) newSerialGates() *serialGates {
	w.serial.CompareAndSwap(nil, new(serialGates))
	return w.serial.Load()
}

// skip reports whether the failure just added to own can skip the check:
// the gates are published for r and the window's current head, and own is
// below its gate. A failure that finds a check setting the gates waits
// for it, rather than checking too (see docs/internals.md).
func (g *gates) skip(own cell, w *slidingWindow, r *tripRules) bool {
	q := g.seq.Load()
	if q&1 != 0 {
		if q = g.wait(); q&1 != 0 {
			return false // checks follow each other: take part
		}
	}
	return g.below(own, w, r, q)
}

// wait waits a little for the check that is setting the gates, and
// returns seq.
func (g *gates) wait() uint64 {
	q := g.seq.Load()
	for spins := 0; spins < 16 && q&1 != 0; spins++ {
		if spins < 8 {
			runtime.Gosched()
		} else {
			g.mu.Lock() // wait for the check there, in case it was descheduled
			g.mu.Unlock()
		}
		q = g.seq.Load()
	}
	return q
}

// below is skip for gates published under seq q.
func (g *gates) below(own cell, w *slidingWindow, r *tripRules, q uint64) bool {
	if g.rules.Load() != r || g.head.Load() != w.headEnd.Load() {
		return false
	}
	v := own.gate.Load()
	if uint32(v>>32) != uint32(q) {
		return false // set by an earlier reading
	}
	if int32(uint32(own.failures())-uint32(v)) >= 0 {
		return false // at its gate
	}
	return g.seq.Load() == q
}

// check reads the window and, if no rule of r holds, sets new gates from
// the same reading: those of s's stripes, or, with s nil, the serial gate
// of the base. own is the cell of a failure that its gate did not let
// through, or has no gate (always read).
func (w *slidingWindow) check(g *gates, s *stripes, own cell, now int64, r *tripRules) tripRule {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.seq.Load()
	if own.gate != nil && g.below(own, w, r, q) {
		// Gates set while this failure waited for the lock judge it,
		// as they judge a failure that finds them.
		if s != nil || w.tally.stripes.Load() == nil {
			return noRule
		}
	}
	g.seq.Store(q + 1)
	var fs [maxStripes]uint64
	c, he := w.read(now, &fs)
	if rule := r.Holds(c); rule != noRule {
		g.rules.Store(nil) // no gates until a check that does not trip
		g.seq.Store(q + 2)
		return rule
	}
	next := q + 2
	need := r.failuresNeeded(c)
	if s != nil {
		n := uint64(len(s.cells))
		quota := (need + n - 1) / n
		for i := range s.cells {
			s.cells[i].gate.Store(next<<32 | uint64(uint32(fs[i]+quota)))
		}
	} else if w.tally.stripes.Load() == nil {
		// The reading had no stripes either: fs[0] is the base's.
		w.serial.Load().gate.Store(next<<32 | uint64(uint32(fs[0]+need)))
	}
	g.rules.Store(r)
	g.head.Store(he)
	g.seq.Store(next)
	return noRule
}

// failuresNeeded is a lower bound on the failures that must be added to a
// window that holds c, with its oldest bucket unchanged, before a rule of
// r can hold; at least 1 and at most gateMax. Successes added meanwhile
// only raise it for ErrorRatio and ErrorCount. For SlowRatio, a failure
// only lowers the slow ratio, unless the window is short of MinRequests,
// which the failure may complete.
//
// With F failures of C counted calls, j more failures and m more
// successes give the ratio (F+j)/(C+j+m). It reaches R < 1 only if
// j >= (R·C - F)/(1 - R) + R·m/(1 - R), and, the window holding at least
// MinRequests calls by then, only if F+j >= R·MinRequests. With R = 1
// every call must have failed. One is taken off the bound for the
// rounding of the ratio's floating-point comparison.
func (r *tripRules) failuresNeeded(c Snapshot) uint64 {
	need := float64(gateMax + 1) // taken down by one below
	f, n := float64(c.Failures), float64(c.Counted)
	if r.ErrorCount > 0 {
		need = min(need, float64(r.ErrorCount)-f)
	}
	if ratio := r.ErrorRatio; ratio >= 1 {
		if c.Failures >= c.Counted {
			need = min(need, float64(r.MinRequests)-n)
		}
	} else if ratio > 0 {
		need = min(need, max(ratio*float64(r.MinRequests)-f, (ratio*n-f)/(1-ratio)))
	}
	if r.SlowRule && c.Slow > 0 && c.Counted < r.MinRequests {
		// A failure can complete the sample the slow-call rule waits
		// for; otherwise slow counts grow only with slow calls, which
		// always check.
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
