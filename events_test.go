package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// behaviour.md §6 Observability: hooks see every transition in order,
// outside any lock, and may call back into the breaker.
func TestHooks_MayCallBackIntoTheBreaker(t *testing.T) {
	var seen []string
	var b *Breaker
	h := newHarness(t, policy(func(p *Policy) { p.OpenFor = time.Second; p.MaxOpenFor = time.Second }),
		OnTransition(func(e Event) {
			// Each of these takes the breaker's lock; under the lock
			// they would deadlock.
			seen = append(seen, e.To.String()+"/"+b.State().String())
			_ = b.Snapshot()
			_ = b.Counters()
			if e.To == Open && e.Reason == ReasonErrorRatio {
				b.Reset() // a transition from inside a hook
			}
		}))
	b = h.b
	h.trip0()
	assert.Equal(t, []string{"open/open", "closed/closed"}, seen)
	assert.Equal(t, []string{"closed>open:err_ratio", "open>closed:reset"}, h.transitions())
}

// trip0 trips without asserting the state afterwards (a hook may have
// changed it).
func (h *harness) trip0() { h.calls(h.b.Policy().MinRequests, errBoom) }

func TestHooks_EventCarriesTheWholeStory(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(2 * time.Second)
	h.calls(5, nil)
	h.calls(10, context.DeadlineExceeded)
	h.calls(5, errBoom)
	h.requireState(Open)
	ev := h.eventLog()[0]
	assert.Equal(t, Event{
		Name:      "inventory.GetStock",
		From:      Closed,
		To:        Open,
		Reason:    ReasonErrorRatio,
		Time:      h.t0.Add(2 * time.Second),
		Snapshot:  Snapshot{Counted: 20, Failures: 15, Timeouts: 10},
		Cooldown:  30 * time.Second,
		Doublings: 0,
		Mode:      ModeAuto,
	}, ev)
	assert.InDelta(t, 0.75, ev.Snapshot.ErrorRatio(), 1e-12)
}

func TestHooks_APanickingHookDoesNotSilenceLaterEvents(t *testing.T) {
	calls := 0
	h := newHarness(t, DefaultPolicy(), OnTransition(func(e Event) {
		calls++
		if calls == 1 {
			panic("hook bug")
		}
	}))
	assert.Panics(t, func() { h.trip0() })
	h.at(30 * time.Second)
	h.requireState(HalfOpen)
	assert.Equal(t, 2, calls, "the next transition is still delivered")
}
