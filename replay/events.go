package replay

// The simulation's agenda. Events are ordered by (time, sequence): two
// events at the same nanosecond fire in the order they were scheduled, so a
// run never depends on how a heap happens to break ties.
//
// Most of a run's events are timeouts, and nearly all of them are dead by
// the time they come up (the call answered first). Every call on one edge
// waits the same time, so its timeouts come due in the order they were
// set: a FIFO per edge holds them in O(1) instead of the heap's O(log n),
// and the loop takes the earliest of the heap's top and the FIFOs' heads.

type eventKind uint8

const (
	evArrival   eventKind = iota // the next request reaches the entry
	evWorkDone                   // a request's own service time is over
	evDelivered                  // a delayed request reaches its tier
	evTimeout                    // a caller's deadline
	evRetry                      // a caller's backoff is over: try the call again
	evCapacity                   // a fault that took workers out ends: id is the tier
)

type event struct {
	at   int64
	seq  uint64
	id   int32
	gen  uint32
	kind eventKind
}

func (a *event) before(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventHeap is a binary min-heap of events by value; container/heap would
// box every event in an interface.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].before(&q[l]) {
			m = r
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// fifo is a first-in first-out queue. Popping moves the head instead of
// shifting the items, so both ends are O(1); the consumed front is reused
// once it is empty or makes up half of a large queue, so a long run does not
// grow the queue for ever. It serves the timeout FIFOs (events) and each
// tier's waiting requests (jobRefs), which need the same operations; the
// agenda is a heap, which orders by time rather than by arrival, and stays a
// type of its own.
type fifo[T any] struct {
	items []T
	head  int
}

func (f *fifo[T]) push(v T) {
	if f.head > 0 && f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head >= 1024 && f.head*2 >= len(f.items) {
		// Reuse the consumed front instead of growing for ever.
		n := copy(f.items, f.items[f.head:])
		f.items, f.head = f.items[:n], 0
	}
	f.items = append(f.items, v)
}

// peek returns the front item, or nil if the queue is empty. The pointer is
// good until the next push.
func (f *fifo[T]) peek() *T {
	if f.head == len(f.items) {
		return nil
	}
	return &f.items[f.head]
}

// pop removes and returns the front item; ok is false if the queue is
// empty.
func (f *fifo[T]) pop() (v T, ok bool) {
	if f.head == len(f.items) {
		return v, false
	}
	v = f.items[f.head]
	f.head++
	return v, true
}

// jobRef names a request waiting in a tier's queue: a request whose gen has
// moved on since it was queued is a stale entry.
type jobRef struct {
	id  int32
	gen uint32
}
