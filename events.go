package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/govkit/breaker/internal/jsondoc"
)

// Event describes one transition, or, with Reason ReasonTimeoutAdapted
// and From equal to To, a change of the adaptive timeout (see Timeout).
//
// In JSON an event is an object with snake_case keys, its cooldown a
// string such as "30s" (see [Event.MarshalJSON]), and it decodes back to
// the same event.
type Event struct {
	Name   string    `json:"name"` // the breaker's name
	From   State     `json:"from"`
	To     State     `json:"to"`
	Reason Reason    `json:"reason"`
	Time   time.Time `json:"time"` // the breaker's clock at the transition
	// Snapshot is the window that tripped the breaker for a trip; for the
	// other transitions of an outage (reopening, half-open), the snapshot
	// of the trip that began it, so every event of an outage says what
	// caused it; for a transition to Closed, the window at the transition.
	Snapshot Snapshot `json:"snapshot"`
	// Cooldown is how long the breaker will stay open, for a transition
	// to Open that ends on its own; zero otherwise.
	Cooldown time.Duration `json:"cooldown"`
	// Doublings is how many times in a row the cooldown has doubled: the
	// cooldown is min(OpenFor·2^Doublings, MaxOpenFor) before jitter.
	Doublings int `json:"doublings"`
	// Mode is the breaker's mode after the transition; ModeShadow marks
	// a transition a shadow breaker only reports.
	Mode Mode `json:"mode"`
	// Timeout is set on the event of a change of the adaptive timeout
	// (Reason ReasonTimeoutAdapted), which is not a transition: the
	// state does not change, and Snapshot is the window at the change.
	// It is nil on a transition.
	Timeout *TimeoutChange `json:"timeout,omitempty"`
}

// eventJSON is an Event as JSON has it: the struct's own tags, with the
// cooldown as a duration string. The outer Cooldown hides the embedded
// one, being shallower.
type eventJSON struct {
	plainEvent
	Cooldown string `json:"cooldown"`
}

// plainEvent is Event without its methods, so that encoding it does not
// call MarshalJSON again.
type plainEvent Event

// MarshalJSON writes the event with snake_case keys and its cooldown as a
// string such as "30s", the way [Policy] writes its durations and the log
// records write the cooldown, so that a stored or forwarded event reads as
// the breaker's log does. ([Status] writes elapsed times as integer
// nanoseconds, in keys ending in _ns; an event has no elapsed time.)
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(eventJSON{plainEvent(e), e.Cooldown.String()})
}

// UnmarshalJSON reads what [Event.MarshalJSON] writes. Keys the document
// does not name keep their values. A cooldown that is not a duration
// string, or is negative, and a negative doublings count are errors naming
// the field; on error e is unchanged.
func (e *Event) UnmarshalJSON(data []byte) error {
	v := eventJSON{plainEvent: plainEvent(*e), Cooldown: e.Cooldown.String()}
	if err := json.Unmarshal(data, &v); err != nil {
		return eventDecodeError(err)
	}
	d, err := time.ParseDuration(v.Cooldown)
	if err != nil {
		return fmt.Errorf("breaker: event cooldown: %s is not a duration such as \"30s\"", jsondoc.QuoteKey(v.Cooldown))
	}
	if d < 0 {
		return fmt.Errorf("breaker: event cooldown: %s is negative", d)
	}
	if v.Doublings < 0 {
		return fmt.Errorf("breaker: event doublings: %d is negative", v.Doublings)
	}
	v.plainEvent.Cooldown = d
	*e = Event(v.plainEvent)
	return nil
}

// eventDecodeError names the field of a type error by its JSON key, not
// by the Go types that decode an event, which are no business of the
// caller's.
func eventDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		if strings.HasPrefix(err.Error(), "breaker: ") {
			return err // a State's or a Mode's own error
		}
		return fmt.Errorf("breaker: event: %w", err)
	}
	switch field := strings.TrimPrefix(te.Field, "plainEvent."); field {
	case "":
		return fmt.Errorf("breaker: event: want an object, got a JSON %s", te.Value)
	case "cooldown":
		return fmt.Errorf("breaker: event cooldown: want a duration string such as \"30s\", got a JSON %s", te.Value)
	default:
		return fmt.Errorf("breaker: event %s: want %s, got a JSON %s", field, te.Type, te.Value)
	}
}

// eventQueue holds the events waiting for the hooks.
type eventQueue struct {
	events     []Event
	delivering bool
}

// queueLocked adds an event for delivery. b.mu must be held.
func (b *Breaker) queueLocked(ev Event) {
	if !b.opt.observed() {
		return
	}
	q := &b.histLocked().events
	q.events = append(q.events, ev)
}

// flush delivers queued events to the hooks, outside the lock and in the
// order the transitions happened. Only one goroutine delivers at a time; a
// transition made meanwhile, including one a hook causes by calling back
// into the breaker, is queued and delivered by that same goroutine after
// the hook returns. So hooks never run concurrently for one breaker, never
// see events out of order, and cannot deadlock the breaker.
func (b *Breaker) flush() {
	if !b.opt.observed() {
		return
	}
	b.mu.Lock()
	if b.hist == nil || b.hist.events.delivering {
		b.mu.Unlock()
		return
	}
	q := &b.hist.events
	q.delivering = true
	b.mu.Unlock()
	// A hook that panics must not hide the event from the hooks after it,
	// nor strand the events queued behind it: each hook runs under its
	// own recover, delivery goes on to the end of the queue, and the first
	// panic then goes on up to the caller, whose call caused the
	// transition. The group's subscribers contain their own panics.
	var panicked any
	done := false
	defer func() {
		if !done {
			// A hook called runtime.Goexit: hand delivery back, so that
			// later events are not silenced.
			b.mu.Lock()
			q.delivering = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(q.events) == 0 {
			// Give up delivery in the same critical section that saw the
			// queue empty, or an event queued in between would wait for
			// the next transition.
			q.events = nil
			q.delivering = false
			b.mu.Unlock()
			done = true
			break
		}
		ev := q.events[0]
		q.events = q.events[1:]
		b.mu.Unlock()
		for _, h := range b.opt.hooks {
			if v := callHook(h, ev); v != nil && panicked == nil {
				panicked = v
			}
		}
		if g := b.opt.group; g != nil {
			g.dispatch(b, ev)
		}
	}
	if panicked != nil {
		panic(panicked)
	}
}

// callHook calls h with ev and returns what it panicked with, if it did.
func callHook(h func(Event), ev Event) (panicked any) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
		}
	}()
	h(ev)
	return nil
}
