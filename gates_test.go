package breaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// drawRules draws failure rules as a valid policy sets them.
func drawRules(t *rapid.T) *tripRules {
	r := &tripRules{
		ErrorRatio:  rapid.SampledFrom([]float64{0, 0.01, 0.1, 1.0 / 3, 0.5, 0.51, 0.9, 0.999, 1}).Draw(t, "ratio"),
		MinRequests: rapid.Uint64Range(0, 60).Draw(t, "min_requests"),
		ErrorCount:  rapid.Uint64Range(0, 40).Draw(t, "error_count"),
	}
	if rapid.Bool().Draw(t, "slow_rule") {
		r.SlowRule = true
		r.SlowRatio = rapid.SampledFrom([]float64{0.01, 0.2, 0.5, 1}).Draw(t, "slow_ratio")
	}
	if r.ErrorRatio == 0 && r.ErrorCount == 0 && !r.SlowRule {
		r.ErrorCount = 1 + rapid.Uint64Range(0, 40).Draw(t, "error_count_on")
	}
	return r
}

// TestFailuresNeeded_IsALowerBound: no window holding from one to fewer
// than failuresNeeded more failures, whatever the successes added with
// them, meets a failure rule. A bound one too high would let a failure
// skip the check that trips the breaker. (Successes alone may bring the
// window up to MinRequests; the check then comes with the next failure,
// which the bound, at least 1, never skips.)
func TestFailuresNeeded_IsALowerBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRules(t)
		c := rapid.Uint64Range(0, 300).Draw(t, "counted")
		f := rapid.Uint64Range(0, c).Draw(t, "failures")
		slow := rapid.Uint64Range(0, c).Draw(t, "slow")
		snap := Snapshot{Counted: c, Failures: f, Slow: slow}
		if r.Holds(snap) != noRule {
			t.Skip("a rule holds already: the check trips")
		}
		need := r.failuresNeeded(snap)
		require.GreaterOrEqual(t, need, uint64(1))
		for j := uint64(1); j < min(need, 400); j++ {
			for m := uint64(0); m <= 60; m++ {
				s := Snapshot{Counted: c + j + m, Failures: f + j, Slow: slow}
				require.Equal(t, noRule, r.Holds(s), "need %d, but %d failures and %d successes on %+v meet a rule", need, j, m, snap)
			}
		}
	})
}

// TestFailuresNeeded_IsTightEnough: the bound is not so low that gates
// are useless: a window far from its threshold needs many failures.
func TestFailuresNeeded_IsTightEnough(t *testing.T) {
	r := &tripRules{ErrorRatio: 0.5, MinRequests: 20} // the default policy's
	// 1,000 calls, 100 failed: (500-100)/0.5 = 800 more failures.
	assert.Equal(t, uint64(799), r.failuresNeeded(Snapshot{Counted: 1000, Failures: 100}))
	// An empty window: R·MinRequests = 10 failures at the least.
	assert.Equal(t, uint64(9), r.failuresNeeded(Snapshot{}))
	// Past the threshold but short of MinRequests: check every failure.
	assert.Equal(t, uint64(1), r.failuresNeeded(Snapshot{Counted: 12, Failures: 12}))
	// A rule that can never hold by failures alone.
	r = &tripRules{MinRequests: 20, SlowRule: true, SlowRatio: 0.5}
	assert.Equal(t, uint64(gateMax), r.failuresNeeded(Snapshot{Counted: 5, Failures: 5}))
}

// TestCheck_OneCallerIsJudgedAsByAFullCheck: one caller records calls
// into a window, its tally spread or not, with the clock moving across
// buckets and whole windows and the rules swapped now and then; after
// every failure, Check, gated, finds a rule exactly when the window meets
// one. A gate that let a failure skip a check that would have tripped,
// or that outlived its rules or its oldest bucket, fails it.
func TestCheck_OneCallerIsJudgedAsByAFullCheck(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const width, n = 100 * ms, 10
		w := newSlidingWindow(width, n)
		if rapid.Bool().Draw(t, "spread") {
			w.Spread()
		}
		rules := []*tripRules{drawRules(t), drawRules(t)}
		r := rules[0]
		now := int64(0)
		steps := rapid.IntRange(1, 400).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op == 0:
				now += rapid.Int64Range(0, 2*width*n).Draw(t, "gap")
			case op == 1:
				r = rules[rapid.IntRange(0, 1).Draw(t, "rules")]
			case op < 6:
				w.Touch(now)
				_, ok := w.Add(kSuccess)
				require.True(t, ok)
			default:
				w.Touch(now)
				at, ok := w.Add(kFailure)
				require.True(t, ok)
				want := r.Holds(w.Sum(now))
				require.Equal(t, want, w.Check(now, r, at, true), "step %d: window %+v, rules %+v", i, w.Sum(now), *r)
			}
		}
	})
}

// TestCheck_SerialFailuresSkipTheReadingUntilTheBound: on a tally that
// has not spread, a check that trips nothing sets the base's gate at the
// failures the window needs; the failures below it skip the reading, and
// the one that reaches it reads. (Every reading moves the gates' seq on.)
func TestCheck_SerialFailuresSkipTheReadingUntilTheBound(t *testing.T) {
	r := &tripRules{ErrorRatio: 0.5, MinRequests: 20}
	w := newSlidingWindow(100*ms, 10)
	w.Touch(0)
	for i := 0; i < 1000; i++ {
		require.True(t, w.AddBase(kSuccess))
	}
	read := func() bool { // a failure; reports whether its check read the window
		var seq uint64
		if g := w.serial.Load(); g != nil {
			seq = g.seq.Load()
		}
		at, ok := w.Add(kFailure)
		require.True(t, ok)
		require.Equal(t, noRule, w.Check(0, r, at, true))
		return w.serial.Load().seq.Load() != seq
	}
	require.True(t, read(), "the first failure reads: 1 of 1,001, 998 more needed")
	for i := 2; i <= 998; i++ {
		require.False(t, read(), "failure %d", i)
	}
	require.True(t, read(), "the failure at the gate reads the window")
	w.Spread()
	w.tally.base[kSuccess].Add(10)
	w.tally.base[kFailure].Add(1) // a failure that found the tally not spread yet
	s := w.tally.stripes.Load()
	seq := s.gates.seq.Load()
	require.Equal(t, noRule, w.Check(0, r, nil, true))
	require.NotEqual(t, seq, s.gates.seq.Load(), "a failure on the base of a spread tally reads the window")
}
