package breaker

import "github.com/govkit/breaker/internal/window"

// The sliding window, its striped tally and the trip check's gates are in
// internal/window. A breaker holds its current window (Breaker.win), whose
// tally counts the closed-state outcomes of one generation, and a tally of
// its own (Breaker.tally) for what it counts whatever the window.

// Snapshot is what a breaker's window holds at one instant: the evidence
// the trip rules judge, and so the evidence of a trip. Totals since the
// breaker was made are its [Counters]; both are in its [Status].
type Snapshot struct {
	// Counted is the number of calls in the window that count: successes,
	// failures and timeouts, not ignored or rejected calls.
	Counted uint64 `json:"counted"`
	// Failures is the number of counted calls that failed, timeouts
	// included.
	Failures uint64 `json:"failures"`
	// Timeouts is the number of failures that were timeouts.
	Timeouts uint64 `json:"timeouts"`
	// Slow is the number of counted calls slower than Policy.SlowCall.
	Slow uint64 `json:"slow"`
}

// ErrorRatio is Failures/Counted, or 0 for an empty window.
func (s Snapshot) ErrorRatio() float64 {
	if s.Counted == 0 {
		return 0
	}
	return float64(s.Failures) / float64(s.Counted)
}

// SlowRatio is Slow/Counted, or 0 for an empty window.
func (s Snapshot) SlowRatio() float64 {
	if s.Counted == 0 {
		return 0
	}
	return float64(s.Slow) / float64(s.Counted)
}

// snapshot is what win holds at now.
func snapshot(win *window.Window, now int64) Snapshot { return Snapshot(win.Sum(now)) }

// The counters of a breaker's own tally.
const (
	countRejected       window.Kind = iota // calls refused without calling fn
	countFallbacks                         // results served by a fallback instead of the downstream
	countIgnored                           // admitted calls whose outcome was Ignored
	countShadowRejected                    // calls a shadow breaker admitted but would have refused
)

// outcomeKind is the counter of a window's tally that a closed-state
// outcome o (not Ignored) adds to.
func outcomeKind(o Outcome) window.Kind {
	switch o {
	case Timeout:
		return window.Timeout
	case Failure:
		return window.Failure
	}
	return window.Success
}
