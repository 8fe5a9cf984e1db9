package testutil

import (
	"sync"
	"testing"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
)

// Outcomes is the part of breaker.Counters that the classification tests
// compare: the admitted calls by outcome, and the refused ones.
type Outcomes struct {
	Successes, Failures, Timeouts, Ignored, Rejected uint64
}

// OutcomesOf reads b's counters as Outcomes.
func OutcomesOf(b *breaker.Breaker) Outcomes {
	c := b.Counters()
	return Outcomes{c.Successes, c.Failures, c.Timeouts, c.Ignored, c.Rejected}
}

// A Verdict is what one call returned, as the test reads it.
type Verdict int

const (
	Succeeded Verdict = iota
	Failed
	TimedOut
	Ignored
	Refused
)

func (v Verdict) String() string {
	switch v {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case TimedOut:
		return "timed out"
	case Ignored:
		return "ignored"
	case Refused:
		return "refused"
	}
	return "verdict(?)"
}

// Calls counts calls by verdict; Made is all of them.
type Calls struct {
	Made, Succeeded, Failed, TimedOut, Ignored, Refused uint64
}

// Tally is a test's own account of the calls it made, by what each
// returned, to hold against what the breaker counted. It is safe for
// concurrent use; the zero value is an empty tally.
type Tally struct {
	mu    sync.Mutex
	calls Calls
	last  error
}

// Note files one call that returned err with the verdict v, and returns v.
func (tl *Tally) Note(v Verdict, err error) Verdict {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.calls.Made++
	tl.last = err
	switch v {
	case Succeeded:
		tl.calls.Succeeded++
	case Failed:
		tl.calls.Failed++
	case TimedOut:
		tl.calls.TimedOut++
	case Ignored:
		tl.calls.Ignored++
	case Refused:
		tl.calls.Refused++
	}
	return v
}

// Calls returns the counts so far.
func (tl *Tally) Calls() Calls {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.calls
}

// Last returns the error of the latest call noted, for failure messages.
func (tl *Tally) Last() error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.last
}

// Check fails t unless b counted exactly the calls of the tally: every
// verdict as the outcome of the same name (a refusal as a rejection), and
// every call but the refused ones as admitted.
func (tl *Tally) Check(t testing.TB, b *breaker.Breaker) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := tl.calls
	c := b.Counters()
	assert.Equal(t, n.Made, n.Succeeded+n.Failed+n.TimedOut+n.Ignored+n.Refused, "tally adds up")
	assert.Equal(t, Outcomes{n.Succeeded, n.Failed, n.TimedOut, n.Ignored, n.Refused}, OutcomesOf(b),
		"calls made %d: breaker counted %+v", n.Made, c)
	assert.Equal(t, n.Made-n.Refused, c.Admitted, "admitted")
}

// Events records a group's transitions; its Record method is a group
// subscriber. It is safe for concurrent use; the zero value is empty.
type Events struct {
	mu  sync.Mutex
	all []breaker.Event
}

// Record appends ev.
func (e *Events) Record(_ *breaker.Breaker, ev breaker.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// List returns the transitions recorded so far, in order.
func (e *Events) List() []breaker.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]breaker.Event(nil), e.all...)
}
