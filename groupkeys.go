package breaker

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
)

// keyCache answers a group's lookups of existing keys without the
// sync.Map: two fixed tables of atomic pointers to breakers, one chosen by
// a hash of the key's bytes (byKey), one by the address of those bytes
// (byPtr). It keeps nothing of a key: a breaker's name is a copy of the
// key it was created with (see create), so the key passed to Get, Lookup
// and Do does not escape, and a key the caller concatenates for each call
// ("payment.Charge@"+addr) of up to 32 bytes is built on the caller's
// stack, allocating nothing. Nothing here blocks or allocates.
//
// A slot only says where to look: a breaker loaded from one is a hit only
// if its name equals the key asked and it has not been dropped. A
// constant key passes the same address on every call, and so does a key
// concatenated on the caller's stack at one call site; a hit in byKey is
// stored in the address's slot, so the next call from there costs an
// address multiply and a compare. An address reused for other bytes
// fails the compare. Every store goes through store, whose rule keeps a
// dropped breaker out of the slots against a drop racing it, and a drop
// clears the breaker's slots (forget), so the tables keep no dropped
// breaker alive. docs/internals.md, "The key cache", has the measurements.
type keyCache struct {
	byPtr [cacheSlots]atomic.Pointer[Breaker]
	byKey [cacheSlots]atomic.Pointer[Breaker]
	seed  maphash.Seed
}

const (
	cacheBits  = 9
	cacheSlots = 1 << cacheBits // a table's slots: 4 KiB a table
)

// ptrSlot is the slot of the address of key's bytes.
func (c *keyCache) ptrSlot(key string) *atomic.Pointer[Breaker] {
	return &c.byPtr[uint64(uintptr(unsafe.Pointer(unsafe.StringData(key))))*0x9E3779B97F4A7C15>>(64-cacheBits)]
}

// keySlot is the slot of the hash of key's bytes.
func (c *keyCache) keySlot(key string) *atomic.Pointer[Breaker] {
	return &c.byKey[maphash.String(c.seed, key)&(cacheSlots-1)]
}

// find returns the cached breaker for key, or nil.
func (c *keyCache) find(key string) *Breaker {
	p := c.ptrSlot(key)
	if b := p.Load(); b != nil && b.name == key && !b.dropped() {
		return b
	}
	if b := c.keySlot(key).Load(); b != nil && b.name == key && !b.dropped() {
		if p.Load() != b {
			c.store(p, b)
		}
		return b
	}
	return nil
}

// put caches b, found in the group's map under key; it may have been
// dropped since.
func (c *keyCache) put(key string, b *Breaker) {
	if b.name != key {
		return
	}
	c.store(c.keySlot(key), b)
	c.store(c.ptrSlot(key), b)
}

// store puts b in slot unless it has been dropped. If the drop is not
// seen after the store, forget comes after it and undoes it; if it is
// seen, the store is undone.
func (c *keyCache) store(slot *atomic.Pointer[Breaker], b *Breaker) {
	if b.dropped() {
		return
	}
	slot.Store(b)
	if b.dropped() {
		slot.CompareAndSwap(b, nil)
	}
}

// forget clears the slots that hold b, which has been dropped. Its slots
// in byPtr are those of whatever addresses its key was passed at, so the
// table is swept: a drop is rare, and the sweep is cacheSlots loads.
func (c *keyCache) forget(b *Breaker) {
	c.keySlot(b.name).CompareAndSwap(b, nil)
	for i := range c.byPtr {
		if c.byPtr[i].Load() == b {
			c.byPtr[i].CompareAndSwap(b, nil)
		}
	}
}
