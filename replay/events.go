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
	evTimeout                    // a caller's deadline (FIFO only)
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

// fifo is a queue of events whose times never decrease.
type fifo struct {
	items []event
	head  int
}

func (f *fifo) push(e event) {
	if f.head > 0 && f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head >= 1024 && f.head*2 >= len(f.items) {
		// Reuse the consumed front instead of growing for ever.
		n := copy(f.items, f.items[f.head:])
		f.items, f.head = f.items[:n], 0
	}
	f.items = append(f.items, e)
}

func (f *fifo) peek() *event {
	if f.head == len(f.items) {
		return nil
	}
	return &f.items[f.head]
}

func (f *fifo) pop() event {
	e := f.items[f.head]
	f.head++
	return e
}

// ring is a tier's queue of waiting requests. Requests that leave it early
// (their caller gave up) stay in it as stale entries and are skipped when
// they come to the front, which keeps leaving O(1).
type ring struct {
	items []jobRef
	head  int
}

type jobRef struct {
	id  int32
	gen uint32
}

func (r *ring) push(j jobRef) {
	if r.head > 0 && r.head == len(r.items) {
		r.items, r.head = r.items[:0], 0
	} else if r.head >= 1024 && r.head*2 >= len(r.items) {
		n := copy(r.items, r.items[r.head:])
		r.items, r.head = r.items[:n], 0
	}
	r.items = append(r.items, j)
}

func (r *ring) pop() (jobRef, bool) {
	if r.head == len(r.items) {
		return jobRef{}, false
	}
	j := r.items[r.head]
	r.head++
	return j, true
}
