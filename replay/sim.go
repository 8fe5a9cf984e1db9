package replay

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"syscall"
	"time"

	"github.com/govkit/breaker"
)

// The errors a simulated call can end with. The breaker's default
// classifier sees them as a real client would report them: an answer that
// is an error is a Failure; a refused connection or a deadline is a
// Timeout.
var (
	errInjected   = errors.New("replay: injected error")
	errOverloaded = errors.New("replay: queue full")
	errDependency = errors.New("replay: downstream call failed")
	errRefused    = &refusedError{}
)

// refusedError is what a client sees when nothing listens: it wraps
// ECONNREFUSED so that the breaker counts it as a timeout, as
// docs/behaviour.md §3 Outcomes says for transport failures where nothing
// answered.
type refusedError struct{}

func (*refusedError) Error() string { return "replay: connection refused" }

func (*refusedError) Unwrap() error { return syscall.ECONNREFUSED }

const second = int64(time.Second)

// noDeadline is the deadline of a request whose caller waits for ever.
const noDeadline = math.MaxInt64

// Jobs live in fixed-size chunks so that a *job stays valid while the
// simulation allocates more of them; a request's handling holds such
// pointers across calls that start other requests.
const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
)

type jobState uint8

const (
	jobFree     jobState = iota
	jobInFlight          // delayed in front of its tier by a fault
	jobQueued            // waiting for a worker
	jobRunning           // holding a worker, doing its own work
	jobWaiting           // holding a worker, waiting on a downstream call
	jobGone              // no longer at its tier: answered, dropped or lost
)

// job is one request at one tier, together with its caller's side of the
// call that sent it there. The two sides end separately: the caller can
// time out while the tier still works on the request (no cancellation
// reaches it, as with a thread blocked on I/O), and the tier can drop a
// request whose caller already gave up. The job is reused once both have
// ended.
type job struct {
	sent     int64       // when the caller sent it
	deadline int64       // when its caller gives up; noDeadline if never
	done     func(error) // the breaker's report for the call, if guarded
	caller   int32       // the calling job, or -1 for an entry request
	gen      uint32      // bumped on reuse; events carry it to detect stale ones
	edge     int16       // index of the call's edge, or -1 for an entry request
	tier     int16
	step     uint8 // next call of the tier to consider
	attempt  uint8 // tries of the current call so far
	state    jobState
	answered bool // the caller has its result: an answer or a timeout
	degraded bool // a call on the way used its fallback
}

type tierState struct {
	workers  int
	queueCap int
	busy     int
	live     int          // requests in queue that still have a caller
	queue    fifo[jobRef] // waiting requests, and stale entries of those that left (see finish)
	svc      sampler
	rng      *rand.Rand // service times and which calls a request makes
	frng     *rand.Rand // fault draws
	calls    []int      // edge indices, in call order
	ignore   bool       // serves requests whose caller has gone (DeadlinesIgnore)
	prop     bool       // hands deadlines on (DeadlinesPropagate)
	windows  []faultWindow
	cursor   int
	res      *TierSeries
}

type faultWindow struct {
	start, end int64
	f          *Fault
}

type edgeState struct {
	to       int
	prob     float64
	fallback bool
	timeout  int64 // 0: none
	retry    *Retry
	tokens   float64 // retry budget left
	adaptive bool    // the breaker's deadline moves: read it per call
	br       *breaker.Breaker
	res      *CallResult
}

type sim struct {
	sc      *Scenario
	clk     Clock
	end     int64
	seq     uint64
	agenda  eventHeap
	clients fifo[event]   // entry requests' client timeouts
	timers  []fifo[event] // per edge: call timeouts
	chunks  [][]job
	free    []int32
	count   int32
	tiers   []tierState
	edges   []edgeState
	entry   int
	arrive  *rand.Rand
	gap     float64 // mean gap between arrivals, ns
	nextSec int64
	out     *RunResult
}

// runSpec says what one run changes in the scenario.
type runSpec struct {
	kind     RunKind
	label    string
	faults   bool
	policies []*breaker.Policy // per edge; nil leaves the edge unguarded
}

// Stream numbers of the random sources. Every run of a scenario draws its
// arrivals from the same stream, so runs differ only where their breakers
// make them differ: a per-second comparison with the baseline is not
// drowned in sampling noise.
const (
	streamArrivals = 1
	streamService  = 0x100
	streamFault    = 0x200
	streamJitter   = 0x300
	streamThrottle = 0x400
)

func newSim(sc *Scenario, spec runSpec) (*sim, error) {
	n := int((sc.Duration + time.Second - 1) / time.Second)
	edges := sc.calls()
	s := &sim{
		sc:      sc,
		end:     int64(sc.Duration),
		timers:  make([]fifo[event], len(edges)),
		tiers:   make([]tierState, len(sc.Tiers)),
		edges:   make([]edgeState, len(edges)),
		arrive:  rand.New(rand.NewPCG(sc.Seed, streamArrivals)),
		gap:     float64(time.Second) / sc.Entry.Rate,
		nextSec: second,
		out: &RunResult{
			Kind:  spec.kind,
			Label: spec.label,
			Entry: newSeries(n),
		},
	}
	index := make(map[string]int, len(sc.Tiers))
	for i, t := range sc.Tiers {
		index[t.Name] = i
		ts := &s.tiers[i]
		*ts = tierState{
			workers:  t.Workers,
			queueCap: t.Queue,
			svc:      newSampler(t.Service),
			ignore:   t.Deadlines == DeadlinesIgnore,
			prop:     t.Deadlines == DeadlinesPropagate,
			rng:      rand.New(rand.NewPCG(sc.Seed, streamService+uint64(i))),
			frng:     rand.New(rand.NewPCG(sc.Seed, streamFault+uint64(i))),
		}
		s.out.Tiers = append(s.out.Tiers, TierSeries{Name: t.Name, Workers: t.Workers, Busy: make([]int, n), Queue: make([]int, n), Offered: make([]int, n)})
	}
	for i := range s.tiers {
		s.tiers[i].res = &s.out.Tiers[i]
	}
	s.entry = index[sc.Entry.Tier]
	if spec.faults {
		for fi := range sc.Faults {
			f := &sc.Faults[fi]
			ts := &s.tiers[index[f.Tier]]
			for _, w := range f.windows() {
				ts.windows = append(ts.windows, faultWindow{start: int64(w.start), end: int64(w.end), f: f})
			}
		}
		for i := range s.tiers {
			w := s.tiers[i].windows
			sort.Slice(w, func(a, b int) bool { return w[a].start < w[b].start })
			for _, fw := range w {
				if fw.f.CapacityLoss > 0 && fw.end < s.end {
					// The workers come back: start the requests waiting for them.
					s.schedule(fw.end, evCapacity, int32(i), 0)
				}
			}
		}
	}
	s.out.Calls = make([]CallResult, len(edges))
	for e, ref := range edges {
		es := &s.edges[e]
		res := &s.out.Calls[e]
		*res = CallResult{Name: ref.name, From: ref.from, To: ref.to}
		*es = edgeState{
			to:       index[ref.to],
			prob:     ref.call.Probability,
			fallback: ref.call.Fallback,
			timeout:  int64(ref.call.Timeout),
			retry:    ref.call.Retry,
			tokens:   RetryReserve,
			res:      res,
		}
		s.tiers[ref.tier].calls = append(s.tiers[ref.tier].calls, e)
		pol := spec.policies[e]
		if pol == nil {
			continue
		}
		res.Breaker = true
		res.Policy = *pol
		if pol.AdaptiveTimeout.Enabled {
			es.adaptive = true // Timeout is only where its deadline starts
		} else if pol.CallTimeout > 0 && (es.timeout == 0 || int64(pol.CallTimeout) < es.timeout) {
			es.timeout = int64(pol.CallTimeout)
		}
		jitter := rand.New(rand.NewPCG(sc.Seed, streamJitter+uint64(e)))
		br, err := breaker.New(ref.name, *pol,
			breaker.WithClock(&s.clk),
			breaker.WithRand(jitter.Float64),
			breaker.OnTransition(func(ev breaker.Event) {
				if ev.Timeout != nil {
					return // a change of the adaptive timeout, not a transition
				}
				res.Transitions = append(res.Transitions, Transition{
					At:        ev.Time.Sub(epoch),
					From:      ev.From,
					To:        ev.To,
					Reason:    ev.Reason,
					Snapshot:  ev.Snapshot,
					Cooldown:  ev.Cooldown,
					Doublings: ev.Doublings,
					Trip:      tripOf(ev, pol.SlowCall),
				})
			}))
		if err != nil {
			return nil, err
		}
		es.br = br
	}
	return s, nil
}

// run simulates the scenario from time 0 to its duration. Requests still
// in flight at the end are not counted.
func (s *sim) run() *RunResult {
	if s.sc.Entry.Arrivals == Uniform {
		s.schedule(0, evArrival, -1, 0)
	} else {
		s.scheduleArrival(0)
	}
	for {
		e, ok := s.pop()
		if !ok || e.at >= s.end {
			break
		}
		for e.at >= s.nextSec {
			s.clk.set(s.nextSec)
			s.tick()
		}
		s.clk.set(e.at)
		s.out.Events++
		switch e.kind {
		case evArrival:
			s.arrival()
		case evWorkDone:
			if j := s.job(e.id); j.gen == e.gen && j.state == jobRunning {
				j.step = 0
				s.next(e.id)
			}
		case evDelivered:
			s.delivered(e.id, e.gen)
		case evTimeout:
			s.timeout(e.id, e.gen)
		case evRetry:
			s.retry(e.id, e.gen)
		case evCapacity:
			s.dispatch(int(e.id))
		}
	}
	for int(s.nextSec/second) <= len(s.out.Entry.Good) {
		s.clk.set(min(s.nextSec, s.end))
		s.tick()
	}
	for e := range s.edges {
		if br := s.edges[e].br; br != nil {
			s.out.Calls[e].Counters = br.Counters()
		}
	}
	return s.out
}

func (s *sim) schedule(at int64, kind eventKind, id int32, gen uint32) {
	s.seq++
	s.agenda.push(event{at: at, seq: s.seq, id: id, gen: gen, kind: kind})
}

func (s *sim) setTimer(q *fifo[event], at int64, id int32, gen uint32) {
	s.seq++
	q.push(event{at: at, seq: s.seq, id: id, gen: gen, kind: evTimeout})
}

// pop takes the earliest event of the heap and the timeout FIFOs.
func (s *sim) pop() (event, bool) {
	var best *event
	var from *fifo[event]
	if len(s.agenda) > 0 {
		best = &s.agenda[0]
	}
	if h := s.clients.peek(); h != nil && (best == nil || h.before(best)) {
		best, from = h, &s.clients
	}
	for i := range s.timers {
		if h := s.timers[i].peek(); h != nil && (best == nil || h.before(best)) {
			best, from = h, &s.timers[i]
		}
	}
	switch {
	case best == nil:
		return event{}, false
	case from != nil:
		return from.pop()
	default:
		return s.agenda.pop(), true
	}
}

// tick closes the second that ends at s.nextSec.
func (s *sim) tick() {
	sec := int(s.nextSec/second) - 1
	s.nextSec += second
	if sec < 0 || sec >= len(s.out.Entry.Good) {
		return
	}
	for e := range s.edges {
		if br := s.edges[e].br; br != nil {
			if c := br.Snapshot().Counted; c > s.out.Calls[e].PeakWindow {
				s.out.Calls[e].PeakWindow = c
			}
		}
	}
	// A second's peaks start from where the previous second ended.
	if next := sec + 1; next < len(s.out.Entry.Good) {
		for i := range s.tiers {
			ts := &s.tiers[i]
			ts.res.Busy[next] = ts.busy
			ts.res.Queue[next] = ts.live
		}
	}
}

func (s *sim) sec() int { return int(s.clk.now / second) }

func (s *sim) job(id int32) *job { return &s.chunks[id>>chunkBits][id&chunkMask] }

func (s *sim) alloc(tier int, edge int, caller int32) int32 {
	var id int32
	if n := len(s.free); n > 0 {
		id = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		id = s.count
		s.count++
		if int(id>>chunkBits) == len(s.chunks) {
			s.chunks = append(s.chunks, make([]job, chunkSize))
		}
	}
	j := s.job(id)
	*j = job{sent: s.clk.now, deadline: noDeadline, caller: caller, gen: j.gen, edge: int16(edge), tier: int16(tier), state: jobInFlight}
	s.out.Requests++
	s.out.Tiers[tier].Offered[s.sec()]++
	return id
}

// release frees a job once both its caller and its tier are done with it.
func (s *sim) release(id int32) {
	j := s.job(id)
	if j.answered && j.state == jobGone {
		j.gen++
		j.state = jobFree
		j.done = nil
		s.free = append(s.free, id)
	}
}
