package breaker

import (
	"hash/maphash"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The group's key cache (groupkeys.go), on breakers of its own.

func newKeyCache() *keyCache { return &keyCache{seed: maphash.MakeSeed()} }

func cachedBreaker(t *testing.T, key string) *Breaker {
	t.Helper()
	b, err := New(strings.Clone(key), DefaultPolicy())
	require.NoError(t, err)
	return b
}

// dropBreaker sets b's dropped bit, as a group's drop does.
func dropBreaker(b *Breaker) {
	for {
		w := b.state.Load()
		if b.state.CompareAndSwap(w, w.drop()) {
			return
		}
	}
}

// A breaker put under its key is found by any equal string, whatever the
// address of its bytes; a string that is not its key finds nothing.
func TestKeyCache_FindsByEqualKey(t *testing.T) {
	c := newKeyCache()
	b := cachedBreaker(t, "orders.Create@10.0.0.1")
	assert.Nil(t, c.find(b.name))
	c.put(b.name, b)
	assert.Same(t, b, c.find(b.name))
	built := string([]byte("orders.Create@10.0.0.1"))
	assert.Same(t, b, c.find(built), "an equal key with its own bytes")
	assert.Same(t, b, c.ptrSlot(built).Load(), "the hit is stored in the address's slot")
	assert.Nil(t, c.find("orders.Create@10.0.0.2"))
}

// A breaker is cached only under its own name: put with another key is a
// no-op, so a slot never holds a breaker a compare would not accept.
func TestKeyCache_PutUnderAnotherKeyIsIgnored(t *testing.T) {
	c := newKeyCache()
	b := cachedBreaker(t, "a")
	c.put("b", b)
	assert.Nil(t, c.find("b"))
	assert.Nil(t, c.find("a"))
}

// A dropped breaker is never returned, even while still in a slot, and
// is never stored again; forget clears every slot that holds it.
func TestKeyCache_ADroppedBreakerIsNeverFound(t *testing.T) {
	c := newKeyCache()
	b := cachedBreaker(t, "a")
	c.put(b.name, b)
	built := string([]byte("a"))
	require.Same(t, b, c.find(built))
	dropBreaker(b)
	assert.Nil(t, c.find("a"))
	assert.Nil(t, c.find(built))
	c.put(b.name, b)
	c.forget(b)
	for i := range c.byPtr {
		assert.Nil(t, c.byPtr[i].Load(), "byPtr[%d] still holds the dropped breaker", i)
	}
	for i := range c.byKey {
		assert.Nil(t, c.byKey[i].Load(), "byKey[%d] still holds the dropped breaker", i)
	}
	next := cachedBreaker(t, "a")
	c.put(next.name, next)
	assert.Same(t, next, c.find(built), "the successor is found")
}

// A put racing a drop and its forget leaves no dropped breaker behind:
// whichever order they run in, find never returns it (under -race, and
// checked after).
func TestKeyCache_PutRacingADropLeavesNothingBehind(t *testing.T) {
	c := newKeyCache()
	for i := 0; i < 200; i++ {
		b := cachedBreaker(t, "k")
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.put(b.name, b) }()
		go func() { defer wg.Done(); dropBreaker(b); c.forget(b) }()
		wg.Wait()
		require.Nil(t, c.find("k"), "round %d", i)
		require.Nil(t, c.keySlot("k").Load(), "round %d: the dropped breaker is kept alive", i)
	}
}

// A lookup keeps nothing of the key: a key built on the caller's stack
// for each lookup costs no allocation.
func TestKeyCache_ALookupAllocatesNothing(t *testing.T) {
	c := newKeyCache()
	b := cachedBreaker(t, "inventory.GetStock@10.0.1.44")
	c.put(b.name, b)
	addr := "10.0.1.44"
	allocs := testing.AllocsPerRun(100, func() {
		if c.find("inventory.GetStock@"+addr) != b {
			t.Fatal("miss")
		}
	})
	assert.Zero(t, allocs)
}
