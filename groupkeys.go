package breaker

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
)

// keyCache answers lookups of existing keys without the sync.Map, in two
// tables of breakers. A hit is always a breaker whose name equals the key
// and that has not been dropped; the tables only choose where to look.
//
// byKey is chosen by a hash of the key's bytes (hash/maphash): any string
// equal to a key the group holds finds its breaker there.
//
// byPtr is chosen by the address of the key's bytes, with no hashing of
// the key at all: a constant passes the same address on every call, and
// so does a key concatenated on the caller's stack at one call site. A
// hit in byKey stores the breaker in the address's slot, so the next call
// from there costs an address multiply and a compare. An address can be
// reused for other bytes; the compare of the name makes that a miss.
//
// Nothing of the key is kept: a breaker's name is a copy of the key it
// was created with (see create). So the key passed to Get, Lookup and Do
// does not escape, and a key the caller concatenates for each call
// ("payment.Charge@"+addr) of up to 32 bytes is built on the caller's
// stack, allocating nothing (see docs/internals.md, "The key cache").
//
// Collisions only cost a miss. Every hit checks that the breaker has not
// been dropped, so a dropped breaker left in a slot is never returned, and
// a drop clears its slots (forget) so that the tables do not keep it
// alive. put and find store with the same rule: if the drop's mark is not
// seen after the store, the clearing comes after it and undoes it; if it
// is seen, the store is undone.
type keyCache struct {
	byPtr [keyCacheSlots]atomic.Pointer[Breaker]
	byKey [keyCacheSlots]atomic.Pointer[Breaker]
	seed  maphash.Seed
}

const (
	keyCacheBits  = 9
	keyCacheSlots = 1 << keyCacheBits // 4 KiB a table
)

func (c *keyCache) ptrSlot(key string) *atomic.Pointer[Breaker] {
	return &c.byPtr[c.ptrIndex(key)]
}

func (*keyCache) ptrIndex(key string) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.StringData(key)))) * 0x9E3779B97F4A7C15 >> (64 - keyCacheBits)
}

func (c *keyCache) keySlot(key string) *atomic.Pointer[Breaker] {
	return &c.byKey[maphash.String(c.seed, key)&(keyCacheSlots-1)]
}

// find returns the cached breaker for key, or nil.
func (c *keyCache) find(key string) *Breaker {
	p := c.ptrSlot(key)
	if b := p.Load(); b != nil && b.name == key && !b.dropped() {
		return b
	}
	if b := c.keySlot(key).Load(); b != nil && b.name == key && !b.dropped() {
		if p.Load() != b {
			store(p, b)
		}
		return b
	}
	return nil
}

// put caches b, found in the map under key; it may have been dropped
// since.
func (c *keyCache) put(key string, b *Breaker) {
	if b.name != key {
		return
	}
	store(c.keySlot(key), b)
	store(c.ptrSlot(key), b)
}

func store(slot *atomic.Pointer[Breaker], b *Breaker) {
	if b.dropped() {
		return
	}
	slot.Store(b)
	if b.dropped() {
		slot.CompareAndSwap(b, nil)
	}
}

// forget clears the slots that hold b. Its slots in byPtr are those of
// whatever addresses its key was passed at, so the table is swept: a drop
// is rare, and the sweep is 512 loads.
func (c *keyCache) forget(b *Breaker) {
	c.keySlot(b.name).CompareAndSwap(b, nil)
	for i := range c.byPtr {
		if c.byPtr[i].Load() == b {
			c.byPtr[i].CompareAndSwap(b, nil)
		}
	}
}
