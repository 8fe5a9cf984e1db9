package calltrace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker"
)

// Options configure a [Recorder]. The zero value records every call
// through a buffer of DefaultBuffer records.
type Options struct {
	// Sample is the fraction of calls recorded, in (0, 1]; 0 means 1,
	// every call. A sampled recorder keeps evenly spaced calls (every
	// tenth for 0.1), not random ones.
	Sample float64
	// Buffer is how many records may wait for the writer, at most
	// MaxBuffer; 0 means DefaultBuffer. When it is full, records are
	// dropped and counted.
	Buffer int
	// Classifier turns a call's error into the outcome recorded; nil
	// means breaker.DefaultClassifier. Give it the classifier of the
	// group the recorder watches, so that the trace says what the
	// breaker counted.
	Classifier breaker.Classifier
	// Clock times the calls; nil means the real clock, read as the
	// breakers read it (the process's start plus the monotonic time
	// since), so that the calls and the breakers' transitions share a
	// timeline.
	Clock breaker.Clock
	// Origin is the instant the recorded breakers' time starts from: their
	// windows' buckets are aligned on it, and a replay that knows it puts
	// every call in the bucket it was counted in. With Clock nil, zero
	// means the process's start, the origin of every breaker on the real
	// clock. A group made with a clock of its own (breaker.WithClock)
	// starts its time at that clock's reading when the group was made:
	// give that reading. With a Clock and no Origin, the trace has no
	// origin, and a replay aligns the buckets on its first call.
	Origin time.Time
}

// processStart is the real clock's origin for the breakers, to within the
// microseconds between the breaker package's initialization and this
// one's: both read the clock as the process starts.
var processStart = time.Now()

// DefaultBuffer is the number of records a Recorder buffers by default:
// about a second of a busy service's calls. MaxBuffer bounds
// Options.Buffer: a buffer is made whole when the recorder starts, 56
// bytes a record (64 MiB at most), and a longer one only delays the drops
// of a writer that cannot keep up.
const (
	DefaultBuffer = 4096
	MaxBuffer     = 1 << 20
)

// A Recorder writes [Record]s to a trace on a goroutine of its own. Record
// and Do never block on the writer: a record that finds the buffer full is
// dropped and counted in Dropped. Close flushes the buffer and stops the
// goroutine; records made after Close are dropped.
//
// A nil *Recorder is valid and records nothing: Do then calls the group
// directly.
//
// A Recorder is safe for concurrent use by multiple goroutines.
type Recorder struct {
	ch       chan Record
	stop     chan struct{}
	finished chan struct{}
	w        *bufio.Writer
	classify breaker.Classifier
	clock    breaker.Clock
	every    float64 // 1/Sample

	seen    atomic.Uint64
	dropped atomic.Uint64
	written atomic.Uint64
	closed  atomic.Bool

	closeOnce sync.Once
	err       error // the first write error, set by the writer goroutine

	watchMu     sync.Mutex
	watched     map[*breaker.Group]func() // unsubscribe, by group
	lastWatched atomic.Pointer[breaker.Group]
}

// NewRecorder starts a Recorder writing to w.
func NewRecorder(w io.Writer, opt Options) (*Recorder, error) {
	if w == nil {
		return nil, errors.New("trace: nil writer")
	}
	if math.IsNaN(opt.Sample) || opt.Sample < 0 || opt.Sample > 1 {
		return nil, fmt.Errorf("trace: Options.Sample must be in (0, 1], got %v", opt.Sample)
	}
	if opt.Buffer < 0 {
		return nil, fmt.Errorf("trace: Options.Buffer must not be negative, got %d", opt.Buffer)
	}
	if opt.Buffer > MaxBuffer {
		return nil, fmt.Errorf("trace: Options.Buffer must be at most %d, got %d", MaxBuffer, opt.Buffer)
	}
	if opt.Sample == 0 {
		opt.Sample = 1
	}
	if opt.Buffer == 0 {
		opt.Buffer = DefaultBuffer
	}
	if opt.Classifier == nil {
		opt.Classifier = breaker.DefaultClassifier
	}
	r := &Recorder{
		ch:       make(chan Record, opt.Buffer),
		stop:     make(chan struct{}),
		finished: make(chan struct{}),
		w:        bufio.NewWriterSize(w, 32<<10),
		classify: opt.Classifier,
		clock:    opt.Clock,
		every:    1 / opt.Sample,
	}
	origin := opt.Origin
	if origin.IsZero() && opt.Clock == nil {
		origin = processStart
	}
	if !origin.IsZero() {
		// The first line, before the writer starts: a reader knows the
		// origin before the first call.
		line := Record{Time: origin, kind: kindOrigin}.AppendJSON(nil)
		if _, err := r.w.Write(append(line, '\n')); err != nil {
			return nil, err
		}
	}
	go r.write()
	return r, nil
}

// write is the recorder's goroutine. It flushes whenever the buffer runs
// dry, so that a quiet service's trace is not held back in memory.
func (r *Recorder) write() {
	defer close(r.finished)
	var line []byte
	put := func(rec Record) {
		if r.err != nil {
			r.dropped.Add(1)
			return
		}
		line = append(rec.AppendJSON(line[:0]), '\n')
		if rec.Key == "" || len(line) > MaxLine+1 {
			r.dropped.Add(1) // the decoder would refuse the whole trace for it
			return
		}
		if _, err := r.w.Write(line); err != nil {
			r.err = err
			r.dropped.Add(1)
			return
		}
		r.written.Add(1)
	}
	flush := func() {
		if r.err == nil {
			r.err = r.w.Flush()
		}
	}
	for {
		select {
		case rec := <-r.ch:
			put(rec)
			if len(r.ch) == 0 {
				flush()
			}
		case <-r.stop:
			for {
				select {
				case rec := <-r.ch:
					put(rec)
				default:
					flush()
					return
				}
			}
		}
	}
}

// Record queues rec for writing, or drops and counts it if the buffer is
// full or the recorder closed. It never blocks. Sampling does not apply:
// Record writes what it is given, as [Record.AppendJSON] writes it.
func (r *Recorder) Record(rec Record) {
	if r == nil {
		return
	}
	if r.closed.Load() {
		r.dropped.Add(1)
		return
	}
	select {
	case r.ch <- rec:
	default:
		r.dropped.Add(1)
	}
}

// Observe records o, a call a breaker settled: a Recorder is a
// [breaker.Observer], given to [breaker.New] or [breaker.NewGroup] with
// [breaker.WithObserver], and so records every call of those breakers,
// whichever way it is made (Do, Call, Allow, a fallback, the HTTP and gRPC
// integrations). The record is the breaker's own: its key, its clock (the
// call's start and how long the breaker took to settle it), the outcome
// it counted, a probe, a refusal and whether it was the throttle's, so
// Options.Clock and Options.Classifier do not apply; Options.Sample does.
// Transitions are not calls: record them with [Recorder.Watch] or
// [Recorder.RecordTransition]. Like Record, it never blocks.
func (r *Recorder) Observe(o breaker.Observation) {
	if r == nil || !r.sampled() {
		return
	}
	rec := Record{Time: o.Start, Key: o.Name, Refused: o.Refused, Throttled: o.Throttled}
	if !o.Refused {
		rec.Duration, rec.Outcome, rec.Probe = min(max(o.Duration, 0), maxDuration), o.Outcome, o.Probe
	}
	r.Record(rec)
}

// sampled reports whether the next call is one to record: the n-th call
// is when floor(n/every) moves on.
func (r *Recorder) sampled() bool {
	if r.every == 1 {
		return true
	}
	n := r.seen.Add(1)
	return math.Floor(float64(n)/r.every) != math.Floor(float64(n-1)/r.every)
}

func (r *Recorder) now() time.Time {
	if r.clock != nil {
		return r.clock.Now()
	}
	return processStart.Add(time.Since(processStart))
}

// RecordTransition records a transition of a breaker: its key (the
// event's Name), the state it moved to, and for an opening the cooldown
// the breaker drew, so that a replay of the policy that ran opens for as
// long. Pass it to breaker.OnTransition for a breaker made with
// breaker.New; for a group's breakers, use Watch. Like Record, it never
// blocks, and a nil Recorder records nothing.
func (r *Recorder) RecordTransition(ev breaker.Event) {
	if r == nil || ev.From == ev.To {
		return // a change of the adaptive timeout is not a transition
	}
	r.Record(Record{Time: ev.Time, Key: ev.Name, kind: kindTransition, tr: Transition{
		Time: ev.Time, Key: ev.Name, To: ev.To, Cooldown: ev.Cooldown, Doublings: ev.Doublings,
	}})
}

// Watch records every transition of g's breakers (see RecordTransition)
// until stop is called or the recorder closes. Recorder.Do watches the
// group it is given by itself; a service that records its calls some
// other way (Record, Track) calls Watch once for its group.
func (r *Recorder) Watch(g *breaker.Group) (stop func()) {
	if r == nil || g == nil {
		return func() {}
	}
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watched == nil {
		r.watched = map[*breaker.Group]func(){}
	}
	if _, ok := r.watched[g]; ok {
		return func() {}
	}
	unsub := g.Subscribe(func(_ *breaker.Breaker, ev breaker.Event) { r.RecordTransition(ev) })
	r.watched[g] = unsub
	return func() {
		r.watchMu.Lock()
		defer r.watchMu.Unlock()
		if f, ok := r.watched[g]; ok {
			f()
			delete(r.watched, g)
		}
	}
}

// watch is Watch for Do: once per group, without taking the lock after
// the first call.
func (r *Recorder) watch(g *breaker.Group) {
	if g == nil {
		return
	}
	if last := r.lastWatched.Load(); last == g {
		return
	}
	r.Watch(g)
	r.lastWatched.Store(g)
}

// Do calls fn through g's breaker for key, exactly as g.Do(ctx, key, fn)
// does, and records the call: when it was made, how long fn took, the
// outcome, and whether it was a probe or refused (and whether the refusal
// was the throttle's). A call that never reached
// the breaker (ctx already done, a bad key) is not recorded. With a nil
// Recorder, Do is g.Do.
func (r *Recorder) Do(ctx context.Context, g *breaker.Group, key string, fn func(context.Context) error) error {
	if r == nil {
		return g.Do(ctx, key, fn)
	}
	r.watch(g)
	if !r.sampled() {
		return g.Do(ctx, key, fn)
	}
	c := r.begin(key)
	err := g.Do(ctx, key, func(ctx context.Context) error {
		c.start(ctx)
		err := fn(ctx)
		c.end(err)
		return err
	})
	if !c.ran && !errors.Is(err, breaker.ErrOpen) {
		return err
	}
	c.rec.Throttled = !c.ran && IsThrottled(err)
	r.Record(c.rec)
	return err
}

// Track records a call made some other way than [Recorder.Do]: through a
// [breaker.Breaker], [breaker.Call] or [breaker.FallbackOnFailure]. It
// returns fn wrapped to time it and keep its outcome, to pass to the
// breaker in fn's place, and done, to call with the guarded call's error
// once it has returned:
//
//	fn, done := calltrace.Track(rec, "inventory.GetStock", getStock)
//	stock, err := breaker.Call(ctx, b, fn)
//	done(err)
//
// The outcome recorded is fn's own error, classified; a call in which fn
// never ran is recorded as refused, unless err is the context's error (the
// caller had gone before the call). With a nil Recorder, or a call left out
// by sampling, Track returns fn itself and a done that does nothing.
func Track[T any](r *Recorder, key string, fn func(context.Context) (T, error)) (func(context.Context) (T, error), func(error)) {
	if r == nil || !r.sampled() {
		return fn, noop
	}
	c := r.begin(key)
	wrapped := func(ctx context.Context) (T, error) {
		c.start(ctx)
		v, err := fn(ctx)
		c.end(err)
		return v, err
	}
	done := func(err error) {
		if !c.ran && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return
		}
		c.rec.Throttled = !c.ran && IsThrottled(err)
		r.Record(c.rec)
	}
	return wrapped, done
}

func noop(error) {}

// call is one call being recorded.
type call struct {
	r     *Recorder
	rec   Record
	began time.Time
	ran   bool
}

func (r *Recorder) begin(key string) *call {
	return &call{r: r, rec: Record{Time: r.now(), Key: key, Refused: true}}
}

func (c *call) start(ctx context.Context) {
	c.ran = true
	c.rec.Refused = false
	c.rec.Probe = breaker.IsProbe(ctx)
	c.began = c.r.now()
}

// end times the call and keeps its outcome. A clock that stepped back
// while the call ran, or jumped more than 2^62 ns (146 years) ahead, makes
// it last 0, as the breaker's own timeline takes such a step as a pause of
// no length.
func (c *call) end(err error) {
	c.rec.Duration = c.r.now().Sub(c.began)
	if c.rec.Duration < 0 || c.rec.Duration > maxDuration {
		c.rec.Duration = 0
	}
	c.rec.Outcome = breaker.Success
	if err != nil {
		c.rec.Outcome = c.r.classify(err)
	}
}

// Dropped returns the number of records dropped: the buffer was full, the
// recorder closed, writing had failed, or the record could not be written
// as a line a Decoder reads (an empty key, a line over MaxLine).
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// Written returns the number of records written.
func (r *Recorder) Written() uint64 {
	if r == nil {
		return 0
	}
	return r.written.Load()
}

// Close writes out what is buffered, stops the recorder's goroutine and
// returns the first error writing met. It does not close the writer. It
// returns once the goroutine has stopped; later calls return the same
// error.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.closeOnce.Do(func() {
		r.watchMu.Lock()
		for g, unsub := range r.watched {
			unsub()
			delete(r.watched, g)
		}
		r.watchMu.Unlock()
		r.closed.Store(true)
		close(r.stop)
	})
	<-r.finished
	// A Record that raced with Close may have queued after the writer
	// left: count it as dropped rather than lose it silently.
	for {
		select {
		case <-r.ch:
			r.dropped.Add(1)
		default:
			return r.err
		}
	}
}
