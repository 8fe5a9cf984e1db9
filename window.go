package breaker

import "github.com/govkit/breaker/internal/window"

// The window, its tally and its gates are in internal/window; a breaker
// holds its generation's window and a tally of its own.

// Snapshot is what a breaker's window holds at one instant: the evidence
// the trip rules judge.
type Snapshot struct {
	// Counted is the successes, failures and timeouts in the window.
	Counted uint64 `json:"counted"`
	// Failures is the counted calls that failed, timeouts included.
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

// outcomeKind is the window counter a closed-state outcome adds to.
func outcomeKind(o Outcome) window.Kind {
	switch o {
	case Timeout:
		return window.Timeout
	case Failure:
		return window.Failure
	}
	return window.Success
}
