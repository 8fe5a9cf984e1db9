// Command basic shows one breaker through an outage of its downstream.
//
// It simulates three minutes of calls at 50 per second to an inventory
// service that, between 0:20 and 1:30, times out on half of its calls and
// answers another fifth with an error, and prints
// every transition and, every ten seconds, what the callers saw. Time is
// simulated with a small clock of our own (any type with a Now method is a
// breaker.Clock), so the program finishes at once and prints the same
// lines on every run.
//
//	go run ./examples/basic
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/govkit/breaker"
)

// simClock is a clock the program moves by hand.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time { return c.now }

var errUnavailable = errors.New("inventory: 503 service unavailable")

// errTimeout is what a call that hit its deadline returns.
var errTimeout = context.DeadlineExceeded

func main() {
	clk := &simClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	start := clk.now
	rng := rand.New(rand.NewPCG(1, 2))

	b, err := breaker.New("inventory.GetStock", breaker.DefaultPolicy(),
		breaker.WithClock(clk),
		breaker.WithRand(rng.Float64),
		breaker.OnTransition(func(e breaker.Event) {
			fmt.Printf("%s  %-9s -> %-9s %-16s counted=%d failures=%d cooldown=%v\n",
				stamp(e.Time.Sub(start)), e.From, e.To, e.Reason,
				e.Snapshot.Counted, e.Snapshot.Failures, e.Cooldown.Round(time.Second))
		}))
	if err != nil {
		panic(err)
	}

	// The downstream: healthy, then sick from 0:20 to 1:30.
	inventory := func(context.Context) error {
		t := clk.now.Sub(start)
		if t < 20*time.Second || t >= 90*time.Second {
			return nil
		}
		switch u := rng.Float64(); {
		case u < 0.5:
			return errTimeout // a timeout fails a probe
		case u < 0.7:
			return errUnavailable // an answer, even an error, passes one
		}
		return nil
	}

	var served, failed, refused int
	fmt.Println("time   served failed refused  state")
	for i := 0; i < 180*50; i++ {
		clk.now = start.Add(time.Duration(i) * 20 * time.Millisecond)
		err := b.Do(context.Background(), inventory)
		switch {
		case errors.Is(err, breaker.ErrOpen):
			refused++ // a real caller would serve a fallback here, at once
		case err != nil:
			failed++
		default:
			served++
		}
		if (i+1)%500 == 0 {
			end := start.Add(time.Duration(i+1) * 20 * time.Millisecond)
			fmt.Printf("%s  %6d %6d %7d  %s\n", stamp(end.Sub(start)), served, failed, refused, b.State())
			served, failed, refused = 0, 0, 0
		}
	}
	c := b.Counters()
	fmt.Printf("\ntotal: %d admitted, %d refused, %d opens, %d probes passed, %d failed\n",
		c.Admitted, c.Rejected, c.Opens, c.ProbesPassed, c.ProbesFailed)
}

func stamp(d time.Duration) string {
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
