package replay

import (
	"context"
	"time"
)

// epoch is the instant a simulation starts at. It is fixed so that breaker
// events, and everything derived from them, are the same in every run;
// reports give times relative to it.
var epoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is virtual time for the breakers of one simulation. It satisfies
// [breaker.Clock]; the simulation moves it forward as events fire, so the
// breakers' windows, cooldowns and warmups run on simulated time.
//
// A Clock is not safe for concurrent use: a simulation runs on one
// goroutine.
type Clock struct {
	now int64 // nanoseconds since the start of the simulation
}

// Now returns the simulated instant.
func (c *Clock) Now() time.Time { return epoch.Add(time.Duration(c.now)) }

// Elapsed returns the simulated time since the simulation started.
func (c *Clock) Elapsed() time.Duration { return time.Duration(c.now) }

func (c *Clock) set(ns int64) { c.now = ns }

// WithTimeout is what the breaker uses to put a policy's Timeout on a
// call's context when its clock offers it. The simulation enforces every
// deadline itself, with an event at the deadline, and nothing in it waits
// on a context; a real context.WithTimeout would instead start a
// wall-clock timer per call, which fires long after a simulated call is
// over. So the context is returned as it is.
func (c *Clock) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}
