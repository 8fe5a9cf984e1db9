package check

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
)

// TraceKey is what a policy does with one key's recorded calls ([Trace]):
// the real breaker run over them on the trace's own time, with no model
// in between.
type TraceKey struct {
	Key    string         `json:"key"`
	Policy breaker.Policy `json:"policy"`
	// Calls are the recorded calls; Failures those that failed or timed
	// out; Unknown those the recorded breaker refused, whose outcome
	// nobody knows (the policy is told nothing of them).
	Calls    int `json:"calls"`
	Failures int `json:"failures"`
	Unknown  int `json:"unknown"`
	// Span is the time from the first call to the end of the last.
	Span time.Duration `json:"span_ns"`
	// Faults are the stretches in which the recorded calls failed at the
	// policy's error ratio or more (50% without a ratio rule), second by
	// second, in seconds of at least three calls; Caught are those in which, or within a window after which,
	// the breaker opened, with the time from the fault's start to the
	// trip.
	Faults      int             `json:"faults"`
	Caught      int             `json:"caught"`
	TimesToTrip []time.Duration `json:"times_to_trip_ns"`
	// Trips are the breaker's trips from closed; FalseTrips those outside
	// every fault (and the window after it).
	Trips      int `json:"trips"`
	FalseTrips int `json:"false_trips"`
}

// FalseTripsPerDay is the key's false trips scaled to a day of its
// trace's span.
func (k TraceKey) FalseTripsPerDay() float64 {
	if k.Span <= 0 {
		return 0
	}
	return float64(k.FalseTrips) / k.Span.Hours() * 24
}

// maxTraceCalls bounds the calls Trace reads: a few hundred bytes each.
const maxTraceCalls = 20_000_000

// Trace runs the policy gp gives each key (its override, its method's or
// the default) over the key's calls recorded in a trace (the format of
// package calltrace), on the trace's own time: each call is admitted or
// refused by the real breaker at its recorded start and, if admitted,
// reports its recorded outcome at its recorded end. It counts the trips,
// the false ones, and the time to trip of each fault. A trace that cannot
// be read is an error naming the line and the field.
func Trace(r io.Reader, gp breaker.GroupPolicy) ([]TraceKey, error) {
	if err := gp.Validate(); err != nil {
		return nil, err
	}
	if gp.Default == (breaker.Policy{}) {
		gp.Default = breaker.DefaultPolicy()
	}
	dec := calltrace.NewDecoder(r)
	byKey := map[string][]calltrace.Record{}
	n := 0
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if n++; n > maxTraceCalls {
			return nil, fmt.Errorf("check: trace line %d: more than %d calls", dec.Line(), maxTraceCalls)
		}
		byKey[rec.Key] = append(byKey[rec.Key], rec)
	}
	var out []TraceKey
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		p, _ := policyFor(gp, k)
		tk, err := traceKey(k, p, byKey[k])
		if err != nil {
			return nil, err
		}
		out = append(out, tk)
	}
	return out, nil
}

// pendingCall is an admitted call until its recorded end.
type pendingCall struct {
	end  time.Time
	seq  int
	done func(error)
	err  error
}

type pendingCalls []pendingCall

func (h pendingCalls) Len() int { return len(h) }
func (h pendingCalls) Less(i, j int) bool {
	return h[i].end.Before(h[j].end) || h[i].end.Equal(h[j].end) && h[i].seq < h[j].seq
}
func (h pendingCalls) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingCalls) Push(x any)   { *h = append(*h, x.(pendingCall)) }
func (h *pendingCalls) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func traceKey(key string, p breaker.Policy, calls []calltrace.Record) (TraceKey, error) {
	tk := TraceKey{Key: key, Policy: p, Calls: len(calls)}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Time.Before(calls[j].Time) })
	start := calls[0].Time
	clk := &simClock{now: start}
	var trips []time.Duration
	b, err := breaker.New(key, p, breaker.WithClock(clk), breaker.OnTransition(func(ev breaker.Event) {
		if ev.From == breaker.Closed && ev.To == breaker.Open {
			trips = append(trips, ev.Time.Sub(start))
		}
	}))
	if err != nil {
		return tk, err
	}
	var pending pendingCalls
	settle := func(until time.Time) {
		for pending.Len() > 0 && !pending[0].end.After(until) {
			c := heap.Pop(&pending).(pendingCall)
			if c.end.After(clk.now) {
				clk.now = c.end
			}
			c.done(c.err)
		}
	}
	// The recorded calls' outcomes, second by second, for the faults:
	// only the seconds that hold calls, in order, so that the work
	// follows the calls and not the span.
	type second struct{ at, calls, failed int }
	var secs []second
	end := start
	ctx := context.Background()
	for i, c := range calls {
		settle(c.Time)
		if c.Time.After(clk.now) {
			clk.now = c.Time
		}
		failed := !c.Refused && (c.Outcome == breaker.Failure || c.Outcome == breaker.Timeout)
		if !c.Refused && c.Outcome != breaker.Ignored {
			at := int(c.Time.Sub(start) / time.Second)
			if len(secs) == 0 || secs[len(secs)-1].at != at {
				secs = append(secs, second{at: at})
			}
			sec := &secs[len(secs)-1]
			sec.calls++
			if failed {
				sec.failed++
				tk.Failures++
			}
		}
		if c.Refused {
			tk.Unknown++
		}
		ce := c.Time.Add(c.Duration)
		if ce.After(end) {
			end = ce
		}
		_, done, err := b.Allow(ctx)
		if err != nil {
			continue
		}
		outcome := error(nil)
		switch {
		case c.Refused:
			outcome = breaker.Mark(errSimulated, breaker.Ignored)
		case c.Outcome != breaker.Success:
			outcome = breaker.Mark(errSimulated, c.Outcome)
		}
		heap.Push(&pending, pendingCall{end: ce, seq: i, done: done, err: outcome})
	}
	settle(end)
	tk.Span = end.Sub(start)
	tk.Trips = len(trips)

	// Faults: runs of seconds whose recorded calls (at least
	// minFaultCalls) fail at the threshold or more.
	threshold := p.ErrorRatio
	if threshold <= 0 {
		threshold = 0.5
	}
	type fault struct{ from, to time.Duration }
	var faults []fault
	for i := 0; i < len(secs); i++ {
		if !faulty(secs[i].calls, secs[i].failed, threshold) {
			continue
		}
		f := fault{from: time.Duration(secs[i].at) * time.Second}
		for i+1 < len(secs) && secs[i+1].at == secs[i].at+1 && faulty(secs[i+1].calls, secs[i+1].failed, threshold) {
			i++
		}
		f.to = time.Duration(secs[i].at+1) * time.Second
		faults = append(faults, f)
	}
	tk.Faults = len(faults)
	inFault := make([]bool, len(trips))
	for _, f := range faults {
		caught := false
		for i, t := range trips {
			if t >= f.from && t < f.to+p.Window {
				inFault[i] = true
				if !caught {
					caught = true
					tk.Caught++
					tk.TimesToTrip = append(tk.TimesToTrip, t-f.from)
				}
			}
		}
	}
	for _, in := range inFault {
		if !in {
			tk.FalseTrips++
		}
	}
	return tk, nil
}

// minFaultCalls is the fewest calls a second needs to count as a second
// of a fault: one failed call of a quiet key is not a fault.
const minFaultCalls = 3

func faulty(calls, failed int, threshold float64) bool {
	return calls >= minFaultCalls && float64(failed) >= threshold*float64(calls)
}
