package replay

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/govkit/breaker"
)

// scheduleArrival schedules the next entry request after now, if it
// comes before the end. The gap is computed in floating point: at a
// rate of 1e-300 requests a second it does not fit in an int64.
func (s *sim) scheduleArrival(now int64) {
	gap := s.gap
	if s.sc.Entry.Arrivals != Uniform {
		gap *= s.arrive.ExpFloat64()
	}
	if next := float64(now) + gap; next < float64(s.end) {
		s.schedule(int64(next), evArrival, -1, 0)
	}
}

func (s *sim) arrival() {
	now := s.clk.now
	s.scheduleArrival(now)
	id := s.alloc(s.entry, -1, -1)
	s.out.Entry.Offered[s.sec()]++
	s.job(id).deadline = now + int64(s.sc.Entry.Timeout)
	s.setTimer(&s.clients, s.job(id).deadline, id, s.job(id).gen)
	if answered, err := s.send(id); answered {
		s.job(id).state = jobGone
		s.answer(id, err)
		s.release(id)
	}
}

// active returns the fault window of tier t at now, if any.
func (s *sim) active(t int) *faultWindow {
	ts := &s.tiers[t]
	now := s.clk.now
	for ts.cursor < len(ts.windows) && ts.windows[ts.cursor].end <= now {
		ts.cursor++
	}
	if ts.cursor < len(ts.windows) && ts.windows[ts.cursor].start <= now {
		return &ts.windows[ts.cursor]
	}
	return nil
}

// send puts a request in front of its tier, through the tier's fault if
// one is active. answered is true when the request was answered at once,
// with err, before any time passed.
func (s *sim) send(id int32) (answered bool, err error) {
	j := s.job(id)
	if w := s.active(int(j.tier)); w != nil {
		f := w.f
		switch f.Outage {
		case OutageHang:
			j.state = jobGone // lost: only the caller's timeout ends the call
			return false, nil
		case OutageRefuse:
			return true, errRefused
		}
		u := s.tiers[j.tier].frng.Float64()
		if u < f.ErrorRate {
			return true, errInjected
		}
		delay := int64(f.AddedLatency)
		if u < f.ErrorRate+f.SlowFraction {
			delay += int64(f.SlowLatency)
		}
		if delay > 0 {
			j.state = jobInFlight
			s.schedule(s.clk.now+delay, evDelivered, id, j.gen)
			return false, nil
		}
	}
	return s.admit(id)
}

// admit gives a request that reached its tier a worker, a place in the
// queue, or a refusal.
func (s *sim) admit(id int32) (answered bool, err error) {
	j := s.job(id)
	ts := &s.tiers[j.tier]
	if ts.busy < s.workers(int(j.tier)) {
		s.start(id)
		return false, nil
	}
	if ts.queueCap != Unbounded && ts.live >= ts.queueCap {
		return true, errOverloaded
	}
	ts.queue.push(jobRef{id: id, gen: j.gen})
	ts.live++
	j.state = jobQueued
	if sec := s.sec(); ts.live > ts.res.Queue[sec] {
		ts.res.Queue[sec] = ts.live
	}
	return false, nil
}

func (s *sim) delivered(id int32, gen uint32) {
	j := s.job(id)
	if j.gen != gen || j.state != jobInFlight {
		return
	}
	if j.answered && !s.tiers[j.tier].ignore {
		// The caller gave up while the request was on its way.
		j.state = jobGone
		s.release(id)
		return
	}
	if answered, err := s.admit(id); answered {
		s.reply(id, err)
	}
}

func (s *sim) start(id int32) {
	j := s.job(id)
	ts := &s.tiers[j.tier]
	j.state = jobRunning
	ts.busy++
	if sec := s.sec(); ts.busy > ts.res.Busy[sec] {
		ts.res.Busy[sec] = ts.busy
	}
	s.schedule(s.clk.now+ts.svc.draw(ts.rng), evWorkDone, id, j.gen)
}

// next makes the request's remaining downstream calls, one at a time, and
// finishes it when there are none left. A tier that propagates deadlines
// makes no call once its request's deadline has passed.
func (s *sim) next(id int32) {
	j := s.job(id)
	ts := &s.tiers[j.tier]
	for int(j.step) < len(ts.calls) {
		if ts.prop && s.clk.now >= j.deadline {
			s.finish(id, context.DeadlineExceeded)
			return
		}
		e := ts.calls[j.step]
		j.step++
		es := &s.edges[e]
		if es.prob < 1 && ts.rng.Float64() >= es.prob {
			continue
		}
		j.attempt = 1
		if !s.try(id, e) {
			return
		}
	}
	s.finish(id, nil)
}

// try makes one try of request id's call on edge e. It reports whether
// the request goes on to its next call now; otherwise it waits (for the
// answer or a backoff) or has finished.
func (s *sim) try(id int32, e int) bool {
	pending, err := s.call(id, e)
	if pending {
		s.job(id).state = jobWaiting
		return false
	}
	return s.settle(id, e, err)
}

// settle deals with the end of a try of request id's call on edge e: a
// retry, the fallback, or the request's failure. It reports whether the
// request goes on to its next call now.
func (s *sim) settle(id int32, e int, err error) bool {
	if err == nil {
		return true
	}
	j := s.job(id)
	if s.retryLater(id, e, err) {
		j.state = jobWaiting
		return false
	}
	if !s.edges[e].fallback {
		s.finish(id, errDependency)
		return false
	}
	j.degraded = true
	return true
}

// retryLater schedules another try of request id's call on edge e after
// its backoff, if the call's retry policy, its budget and the request's
// deadline allow one.
func (s *sim) retryLater(id int32, e int, err error) bool {
	es := &s.edges[e]
	r := es.retry
	if r == nil || errors.Is(err, breaker.ErrOpen) {
		return false
	}
	j := s.job(id)
	if int(j.attempt) >= r.Attempts || (s.tiers[j.tier].prop && s.clk.now >= j.deadline) {
		return false
	}
	if r.Budget > 0 {
		if es.tokens < 1 {
			es.res.RetriesDenied++
			return false
		}
		es.tokens--
	}
	es.res.Retries++
	s.schedule(s.clk.now+int64(r.Backoff)<<(j.attempt-1), evRetry, id, j.gen)
	return true
}

// retry makes the next try of the call request id is backing off from.
func (s *sim) retry(id int32, gen uint32) {
	j := s.job(id)
	if j.gen != gen || j.state != jobWaiting {
		return
	}
	e := s.tiers[j.tier].calls[j.step-1]
	j.attempt++
	if s.try(id, e) {
		s.next(id)
	}
}

// call sends the request's call on edge e. pending is true while the
// answer is still to come; otherwise the call already ended with err
// (refused by the breaker, answered at once, or not made because the
// request's propagated deadline has passed).
func (s *sim) call(caller int32, e int) (pending bool, err error) {
	es := &s.edges[e]
	p := s.job(caller)
	now := s.clk.now
	// The caller gives up at its own timeout, or at its request's
	// deadline if its tier hands deadlines on and that comes first. Calls
	// timed by the edge's timeout alone come due in the order they were
	// made and go in the edge's FIFO; the others go on the agenda.
	at, fifo := int64(noDeadline), true
	if es.timeout > 0 {
		at = now + es.timeout
	}
	if s.tiers[p.tier].prop && p.deadline < at {
		if p.deadline <= now {
			return false, context.DeadlineExceeded
		}
		at, fifo = p.deadline, false
	}
	if r := es.retry; r != nil && r.Budget > 0 && p.attempt == 1 {
		es.tokens = min(es.tokens+r.Budget, RetryReserve)
	}
	var done func(error)
	if es.br != nil {
		ctx := context.Background()
		if w := s.active(es.to); w != nil && w.f.ColdStart {
			ctx = breaker.WithInstanceStart(ctx, epoch.Add(time.Duration(w.start)))
		}
		cctx, d, err := es.br.Allow(ctx)
		if err != nil {
			es.res.Rejected++
			return false, err
		}
		if breaker.IsProbe(cctx) {
			es.res.Probes++
		}
		done = d
		if es.adaptive {
			// The deadline the breaker gave this call. It differs from
			// call to call, so it cannot join the edge's FIFO of timers,
			// which must expire in the order they were set.
			if bt := now + int64(es.br.Timeout()); bt < at {
				at, fifo = bt, false
			}
		}
	}
	id := s.alloc(es.to, e, caller)
	c := s.job(id)
	c.done = done
	c.deadline = at
	es.res.Sent++
	if answered, err := s.send(id); answered {
		c.answered = true
		c.state = jobGone
		s.ended(c, err)
		s.release(id)
		return false, err
	}
	switch {
	case at == noDeadline:
		// No timeout: the caller waits for the answer, however late.
	case fifo:
		s.setTimer(&s.timers[e], at, id, c.gen)
	default:
		s.schedule(at, evTimeout, id, c.gen)
	}
	return true, nil
}

// ended reports the end of call c to its breaker and counts it on its edge.
func (s *sim) ended(c *job, err error) {
	es := &s.edges[c.edge]
	if c.done != nil {
		c.done(err)
		c.done = nil
	}
	r := es.res
	switch {
	case err == nil:
		r.Succeeded++
		return
	case errors.Is(err, context.DeadlineExceeded):
		r.TimedOut++
	default:
		r.Failed++
	}
	r.WastedWork += time.Duration(s.clk.now - c.sent)
}

// answer gives request id's caller its result, which arrives now.
func (s *sim) answer(id int32, err error) {
	c := s.job(id)
	c.answered = true
	if c.edge < 0 {
		s.entryEnded(c, err)
		return
	}
	s.ended(c, err)
	if err == nil && c.degraded {
		s.job(c.caller).degraded = true
	}
	if s.settle(c.caller, int(c.edge), err) {
		s.next(c.caller)
	}
}

func (s *sim) entryEnded(c *job, err error) {
	sec := s.sec()
	e := &s.out.Entry
	switch {
	case err == nil:
		e.Good[sec]++
		if c.degraded {
			e.Degraded[sec]++
		}
	case errors.Is(err, context.DeadlineExceeded):
		e.TimedOut[sec]++
	default:
		e.Failed[sec]++
	}
}

// finish ends a request at its tier: the worker goes to the next waiting
// request before the answer travels up, so that a caller that reacts to
// the answer by calling this tier again queues behind those already
// waiting. Requests that left the queue early (their caller gave up) stay
// in it as stale entries and are skipped here, which keeps leaving O(1).
func (s *sim) finish(id int32, err error) {
	j := s.job(id)
	s.tiers[j.tier].busy--
	s.dispatch(int(j.tier))
	s.reply(id, err)
}

// dispatch gives free workers of tier t to the requests waiting for them.
func (s *sim) dispatch(t int) {
	ts := &s.tiers[t]
	for ts.busy < s.workers(t) && ts.live > 0 {
		ref, ok := ts.queue.pop()
		if !ok {
			break
		}
		if q := s.job(ref.id); q.gen == ref.gen && q.state == jobQueued {
			ts.live--
			s.start(ref.id)
		}
	}
}

// workers returns the workers of tier t in service now: all of them, but
// for those a fault's capacity loss takes out.
func (s *sim) workers(t int) int {
	ts := &s.tiers[t]
	if w := s.active(t); w != nil && w.f.CapacityLoss > 0 {
		return max(1, ts.workers-int(math.Round(float64(ts.workers)*w.f.CapacityLoss)))
	}
	return ts.workers
}

// reply ends a request at its tier and answers its caller, if the caller
// is still waiting.
func (s *sim) reply(id int32, err error) {
	j := s.job(id)
	j.state = jobGone
	if j.answered {
		s.tiers[j.tier].res.Abandoned++
	} else {
		s.answer(id, err)
	}
	s.release(id)
}

func (s *sim) timeout(id int32, gen uint32) {
	j := s.job(id)
	if j.gen != gen || j.answered {
		return
	}
	if j.state == jobQueued && !s.tiers[j.tier].ignore {
		// It could not get a worker within its caller's timeout: it
		// leaves the queue (its entry there is now stale). A tier that
		// ignores deadlines never learns and serves it in its turn.
		s.tiers[j.tier].live--
		j.state = jobGone
	}
	s.answer(id, context.DeadlineExceeded)
	s.release(id)
}
