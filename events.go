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
// It round-trips through JSON.
type Event struct {
	Name   string    `json:"name"` // the breaker's name
	From   State     `json:"from"`
	To     State     `json:"to"`
	Reason Reason    `json:"reason"`
	Time   time.Time `json:"time"` // the breaker's clock at the transition
	// Snapshot is the window of the trip that began the outage; for a
	// transition to Closed or a timeout change, the window then.
	Snapshot Snapshot `json:"snapshot"`
	// Cooldown is how long a transition to Open lasts; 0 if forced.
	Cooldown time.Duration `json:"cooldown"`
	// Doublings is how many times in a row the cooldown has doubled; it
	// stops rising once the cooldown has reached Policy.MaxOpenFor.
	Doublings int `json:"doublings"`
	// Mode is the mode after the transition.
	Mode Mode `json:"mode"`
	// Timeout is the change of the adaptive timeout; nil on a transition.
	Timeout *TimeoutChange `json:"timeout,omitempty"`
	// Outage is the outage in progress after the transition, as [Status]
	// has it; nil when there is none (a transition of a settled breaker
	// that begins none, a Reset).
	Outage *Outage `json:"outage,omitempty"`
}

// eventJSON is an Event as JSON has it; the outer Cooldown, shallower,
// hides the embedded one.
type eventJSON struct {
	plainEvent
	Cooldown string `json:"cooldown"`
}

// plainEvent is Event without its methods, so that encoding it does not
// call MarshalJSON again.
type plainEvent Event

// MarshalJSON writes the event with snake_case keys and its cooldown as a
// string such as "30s", as the log records write it.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(eventJSON{plainEvent(e), e.Cooldown.String()})
}

// UnmarshalJSON reads what MarshalJSON writes; keys not named keep their
// values. A bad or negative cooldown or doublings is an error naming the
// field; on error e is unchanged.
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

// eventDecodeError names the field of a type error by its JSON key.
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

// flush delivers queued events to the hooks, outside the lock, in order.
// One goroutine delivers at a time, and delivers too the events queued
// meanwhile (a hook's callbacks included), so hooks never run
// concurrently, never see events out of order, and cannot deadlock.
func (b *Breaker) flush() {
	if !b.opt.observed() {
		return
	}
	b.mu.Lock()
	if h := b.hist; h != nil && h.thrEnded {
		// A change of generation ended throttling (endThrottleLocked).
		why := h.thrWhy
		h.thrEnded, h.thrWhy = false, ""
		b.mu.Unlock()
		b.logThrottle(0, Snapshot{}, 0, why)
		b.mu.Lock()
	}
	if b.hist == nil || b.hist.events.delivering {
		b.mu.Unlock()
		return
	}
	q := &b.hist.events
	q.delivering = true
	b.mu.Unlock()
	// A panicking hook: the others still run, delivery goes on to the end
	// of the queue, then the first panic goes on up to the caller.
	var panicked any
	done := false
	defer func() {
		if !done {
			// A hook called runtime.Goexit: hand delivery back.
			b.mu.Lock()
			q.delivering = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(q.events) == 0 {
			// Give up delivery in the critical section that saw the queue
			// empty, so no event queued in between waits.
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
