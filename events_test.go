package breaker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, []string{"closed>open:error_ratio", "open>closed:reset"}, h.transitions())
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
		Outage: &Outage{
			Since: h.t0.Add(2 * time.Second),
			Trip:  Trip{Reason: ReasonErrorRatio, Window: Snapshot{Counted: 20, Failures: 15, Timeouts: 10}},
			Trips: 1,
		},
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

// A panicking hook hides no event from the others: the hooks after it and
// the events queued behind it (a hook that causes a transition queues one)
// are delivered, and the panic goes on to the caller.
// Regression (585f218): the panic cut delivery short until a later transition.
func TestHooks_APanickingHookHidesNoEventFromTheOthers(t *testing.T) {
	var seen []Reason
	var b *Breaker
	h := newHarness(t, policy(func(p *Policy) { p.MinRequests = 1 }),
		OnTransition(func(e Event) {
			if e.Reason == ReasonErrorRatio {
				b.Reset() // queues a second event
			}
			panic("hook bug")
		}),
		OnTransition(func(e Event) { seen = append(seen, e.Reason) }))
	b = h.b
	assert.PanicsWithValue(t, "hook bug", func() {
		_ = h.b.Do(context.Background(), func(context.Context) error { return errBoom })
	})
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonReset}, seen,
		"the second hook saw both events, the one queued by the first hook included")
	assert.PanicsWithValue(t, "hook bug", func() { _ = h.b.SetMode(ModeForcedOpen) })
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonReset, ReasonForcedOpen}, seen, "delivery was handed back")
}

// An event in JSON has snake_case keys and its cooldown as a duration
// string, and decodes back to the same event.
func TestEvent_JSONRoundTrip(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(Open)
	events := h.eventLog()
	require.Len(t, events, 3)
	reopen := events[2]
	require.Equal(t, time.Minute, reopen.Cooldown)
	require.Equal(t, 1, reopen.Doublings)

	data, err := json.Marshal(reopen)
	require.NoError(t, err)
	wantTime, err := reopen.Time.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"inventory.GetStock","from":"half_open","to":"open","reason":"probe_failed",
		"time":`+string(wantTime)+`,"snapshot":{"counted":20,"failures":20,"timeouts":0,"slow":0},
		"cooldown":"1m0s","doublings":1,"mode":"auto",
		"outage":{"since":"2026-01-02T03:04:05Z","duration_ns":30000000000,
			"trip":{"reason":"error_ratio","window":{"counted":20,"failures":20,"timeouts":0,"slow":0},"run":0,"slow_call_ns":0},
			"trips":1,"reopens":1,"refused":0,"probes_passed":0,"probes_failed":1,"probes_passed_on_error":0}}`, string(data))

	for _, ev := range append(events, Event{}, Event{Name: "x", To: HalfOpen, Mode: ModeShadow, Cooldown: 1500 * time.Millisecond, Snapshot: Snapshot{Counted: 3, Failures: 2, Timeouts: 1, Slow: 1}}) {
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		var got Event
		require.NoError(t, json.Unmarshal(data, &got), string(data))
		assert.True(t, ev.Time.Equal(got.Time), "time: %v, want %v", got.Time, ev.Time)
		got.Time, ev.Time = time.Time{}, time.Time{}
		assert.Equal(t, ev, got, string(data))
	}
}

// A document that is not an event is an error naming the field, and leaves
// the event as it was.
func TestEvent_UnmarshalJSONRefusesBadFields(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"cooldown":"soon"}`, `breaker: event cooldown: "soon" is not a duration such as "30s"`},
		{`{"cooldown":"-1s"}`, `breaker: event cooldown: -1s is negative`},
		{`{"doublings":-2}`, `breaker: event doublings: -2 is negative`},
		{`{"to":"ajar"}`, `breaker: unknown state "ajar"`},
		{`{"mode":"manual"}`, `manual`},
		{`{"cooldown":30}`, `breaker: event cooldown: want a duration string such as "30s", got a JSON number`},
		{`{"snapshot":{"counted":-1}}`, `breaker: event snapshot.counted: want uint64, got a JSON number -1`},
		{`[]`, `breaker: event: want an object, got a JSON array`},
	} {
		ev := Event{Name: "kept", Cooldown: time.Second}
		err := json.Unmarshal([]byte(tc.doc), &ev)
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want, tc.doc)
		assert.NotContains(t, err.Error(), "plainEvent", tc.doc)
		assert.NotContains(t, err.Error(), "eventJSON", tc.doc)
		assert.Equal(t, Event{Name: "kept", Cooldown: time.Second}, ev, tc.doc)
	}
	ev := Event{Name: "kept", Cooldown: time.Second}
	err := ev.UnmarshalJSON([]byte(`{"name":`)) // called directly: no syntax check before
	require.Error(t, err)
	assert.Contains(t, err.Error(), "breaker: event: ")
	require.NoError(t, json.Unmarshal([]byte(`{"to":"open"}`), &ev))
	assert.Equal(t, Event{Name: "kept", To: Open, Cooldown: time.Second}, ev, "unnamed keys keep their values")
}
