package breakerhttp

import (
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/govkit/breaker"
)

// calls is a Transport's note of the responses it has returned whose calls
// [Fallback] may still ask about, so that Fallback finds the call behind a
// response whatever has wrapped its Body since: http.Client does when
// Client.Timeout is set, and so do RoundTrippers that trace or log. They
// keep the *http.Response, which is what Fallback looks for.
//
// The invariant: a response's note exists from the moment RoundTrip returns
// it until the first of
//
//   - its call ending with an outcome other than a failure or a timeout
//     (Fallback then reads the response, which it would do without a note);
//   - its body being closed (Fallback closes it last);
//   - its body becoming garbage, found by the GC (see slab).
//
// While a caller holds the response and its body, none of these has
// happened unless the caller did it, so nothing is ever dropped to make
// room: there is no bound but the responses in flight, and a caller that
// neither reads its bodies to the end nor closes them (against the
// http.Client contract) leaves notes that go with its bodies.
type calls struct {
	shards [callShards]callShard
}

const (
	callShards = 64 // a power of two: the shard is 6 bits of a hash
	// shrinkAt is the size past which a shard's map is let go when it
	// empties, so that a burst does not keep its memory for ever.
	shrinkAt = 256
)

// callShard is a part of the notes, chosen by the response's address, under
// a lock of its own. A note is keyed by the response's address, which is
// only ever compared, never turned back into a pointer: the note must not
// keep the response alive, or a dropped one would never be collected.
type callShard struct {
	mu    sync.Mutex
	m     map[uintptr]note
	slab  *slab  // whose free slots new notes take
	slabs uint64 // slabs made, for their ids
	peak  int
	n     atomic.Int32 // len(m), for clear to skip an empty shard without the lock
	_     [20]byte     // a shard to a cache line
}

// note is what Fallback needs of a call: the breaker that guarded it and
// how it ended, if it ended as a failure or a timeout. It holds nothing
// that leads back to the response or its body.
type note struct {
	b       *breaker.Breaker
	id      uint64 // the body's slot (slab.base + slot), never 0
	status  int32  // the response's StatusCode, checked by find (see slab)
	outcome int32  // plus one; 0 while the call is open
}

// slabSize is the number of bodies that share a slab.
const slabSize = 64

// slab tells which notes belong to bodies that became garbage: a block of
// slots, one per body of a shard, each body pointing to its slab, with a
// finalizer that forgets the notes still in its slots once no body points
// to it. A body cannot carry the finalizer itself: it is on a cycle
// (response to body to response), which the GC never finalizes; a slab
// points only to its shard, which points to a newer slab once this one is
// full. One slab serves slabSize bodies, so the two allocations the
// Transport adds to a request stay two, and the notes of dropped bodies
// that outlive them are at most those in the slabs that live bodies and
// the shards still point to.
//
// The GC may free a dropped response before its slab's finalizer runs,
// and give its address to another response while the note is still
// there. Every response this Transport returns takes that note over (add)
// or clears it (clear); find checks the status of any other response, one
// that did not come through this Transport.
type slab struct {
	shard *callShard
	base  uint64 // the id of slot 0
	used  uint32 // slots handed out, under shard.mu
	// keys holds each slot's key until its note is forgotten: whoever
	// swaps it to 0 forgets the note.
	keys [slabSize]atomic.Uintptr
}

// release forgets the notes of s's bodies, which are all garbage, that
// neither ended well nor were closed.
func (s *slab) release() {
	sh := s.shard
	sh.mu.Lock()
	for i := range s.used {
		if key := s.keys[i].Swap(0); key != 0 {
			sh.forget(key, s.base+uint64(i))
		}
	}
	sh.mu.Unlock()
}

func addressOf(resp *http.Response) uintptr { return uintptr(unsafe.Pointer(resp)) }

func (c *calls) shard(key uintptr) *callShard {
	return &c.shards[(uint64(key)*0x9E3779B97F4A7C15)>>(64-6)]
}

// add notes bd, the body of bd.resp, whose call ended with o (plus one),
// or is open (0). A note already there is a stale one (see slab) or the
// same response returned twice by the base: the newest wins.
func (c *calls) add(bd *body, outcome int32) {
	key := addressOf(bd.resp)
	sh := c.shard(key)
	sh.mu.Lock()
	s := sh.slab
	if s == nil || s.used == slabSize {
		sh.slabs++
		s = &slab{shard: sh, base: sh.slabs * slabSize}
		runtime.SetFinalizer(s, (*slab).release)
		sh.slab = s
	}
	i := s.used
	s.used++
	s.keys[i].Store(key)
	bd.slab, bd.slot = s, i
	if sh.m == nil {
		sh.m = make(map[uintptr]note)
	}
	sh.m[key] = note{b: bd.b, id: s.base + uint64(i), status: int32(bd.resp.StatusCode), outcome: outcome}
	sh.peak = max(sh.peak, len(sh.m))
	sh.n.Store(int32(len(sh.m)))
	sh.mu.Unlock()
}

// clear forgets whatever note is kept under resp's address, for a
// response that the Transport returns without noting it: a note there is
// a dead response's (see slab).
func (c *calls) clear(resp *http.Response) {
	key := addressOf(resp)
	sh := c.shard(key)
	if sh.n.Load() == 0 {
		return
	}
	sh.mu.Lock()
	if _, ok := sh.m[key]; ok {
		sh.delete(key)
	}
	sh.mu.Unlock()
}

// remove forgets bd's note, once.
func (c *calls) remove(bd *body) {
	s := bd.slab
	if key := s.keys[bd.slot].Swap(0); key != 0 {
		s.shard.mu.Lock()
		s.shard.forget(key, s.base+uint64(bd.slot))
		s.shard.mu.Unlock()
	}
}

// ended notes that bd's call ended with o, if it is still noted.
func (c *calls) ended(bd *body, o breaker.Outcome) {
	s := bd.slab
	key := s.keys[bd.slot].Load()
	if key == 0 {
		return
	}
	s.shard.mu.Lock()
	if n, ok := s.shard.m[key]; ok && n.id == s.base+uint64(bd.slot) {
		n.outcome = int32(o) + 1
		s.shard.m[key] = n
	}
	s.shard.mu.Unlock()
}

// find returns the note of resp, if there is one.
func (c *calls) find(resp *http.Response) (note, bool) {
	key := addressOf(resp)
	sh := c.shard(key)
	sh.mu.Lock()
	n, ok := sh.m[key]
	sh.mu.Unlock()
	if ok && int(n.status) != resp.StatusCode {
		return note{}, false
	}
	return n, ok
}

// forget deletes the note under key if it is id's; sh.mu is held.
func (sh *callShard) forget(key uintptr, id uint64) {
	if n, ok := sh.m[key]; ok && n.id == id {
		sh.delete(key)
	}
}

// delete deletes the note under key; sh.mu is held.
func (sh *callShard) delete(key uintptr) {
	delete(sh.m, key)
	if len(sh.m) == 0 && sh.peak > shrinkAt {
		sh.m, sh.peak = nil, 0
	}
	sh.n.Store(int32(len(sh.m)))
}
