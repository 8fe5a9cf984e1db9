// Package keycache is a lock-free cache of values by string key, in front
// of a map that holds them: two fixed tables of atomic pointers, one
// chosen by a hash of the key's bytes, one by the address of those bytes.
// It keeps nothing of a key, so a key looked up does not escape.
//
// A value knows its own key and whether it has been dropped (the Keyed
// type parameter says how to ask). A slot only says where to look: what a
// lookup loads from one is a hit only if its key equals the one asked and
// it has not been dropped, which the caller checks (see Store). A Cache
// is safe for concurrent use; nothing here blocks or allocates.
package keycache

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
)

// Keyed says what a cached *T stands for: the key it was made with (a
// copy the value keeps, never the caller's string) and whether it has
// been dropped. Dropped must stay true once true.
type Keyed[T any] interface {
	Key(v *T) string
	Dropped(v *T) bool
}

// Cache holds the two tables; the zero value needs its Seed set before
// use.
//
// byKey is chosen by a hash of the key's bytes (hash/maphash): any string
// equal to a cached key finds its value there.
//
// byPtr is chosen by the address of the key's bytes, with no hashing of
// the key at all: a constant passes the same address on every call, and
// so does a key concatenated on the caller's stack at one call site. A
// lookup that hits in byKey stores the value in the address's slot, so
// the next call from there costs an address multiply and a compare. An
// address can be reused for other bytes; the compare of the key makes
// that a miss.
//
// Collisions only cost a miss. Every hit checks that the value has not
// been dropped, so a dropped value left in a slot is never returned, and
// Forget clears its slots so that the tables do not keep it alive. Every
// store goes through Store, whose rule makes that hold against a drop
// racing it.
type Cache[T any, K Keyed[T]] struct {
	k     K // first: a trailing field of size zero would be padded
	byPtr [slots]atomic.Pointer[T]
	byKey [slots]atomic.Pointer[T]
	Seed  maphash.Seed
}

const (
	bits  = 9
	slots = 1 << bits // a table's slots: 4 KiB a table
)

// PtrSlot is the slot of the address of key's bytes.
func (c *Cache[T, K]) PtrSlot(key string) *atomic.Pointer[T] {
	return &c.byPtr[uint64(uintptr(unsafe.Pointer(unsafe.StringData(key))))*0x9E3779B97F4A7C15>>(64-bits)]
}

// KeySlot is the slot of the hash of key's bytes.
func (c *Cache[T, K]) KeySlot(key string) *atomic.Pointer[T] {
	return &c.byKey[maphash.String(c.Seed, key)&(slots-1)]
}

// Put caches v, found in the map under key; it may have been dropped
// since.
func (c *Cache[T, K]) Put(key string, v *T) {
	if c.k.Key(v) != key {
		return
	}
	c.Store(c.KeySlot(key), v)
	c.Store(c.PtrSlot(key), v)
}

// Store puts v in slot unless it has been dropped. If the drop is not
// seen after the store, Forget comes after it and undoes it; if it is
// seen, the store is undone.
func (c *Cache[T, K]) Store(slot *atomic.Pointer[T], v *T) {
	if c.k.Dropped(v) {
		return
	}
	slot.Store(v)
	if c.k.Dropped(v) {
		slot.CompareAndSwap(v, nil)
	}
}

// Forget clears the slots that hold v, which has been dropped. Its slots
// in byPtr are those of whatever addresses its key was passed at, so the
// table is swept: a drop is rare, and the sweep is slots loads.
func (c *Cache[T, K]) Forget(v *T) {
	c.KeySlot(c.k.Key(v)).CompareAndSwap(v, nil)
	for i := range c.byPtr {
		if c.byPtr[i].Load() == v {
			c.byPtr[i].CompareAndSwap(v, nil)
		}
	}
}
