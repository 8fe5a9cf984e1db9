package keycache

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type item struct {
	key  string
	gone atomic.Bool
}

type itemKeys struct{}

func (itemKeys) Key(v *item) string   { return v.key }
func (itemKeys) Dropped(v *item) bool { return v.gone.Load() }

// find is a lookup as a user of the cache writes it: the address's slot,
// then the hash's, each hit checked for its key and a drop, and a hit in
// the hash's slot stored in the address's.
func find(c *Cache[item, itemKeys], key string) *item {
	p := c.PtrSlot(key)
	if v := p.Load(); v != nil && v.key == key && !v.gone.Load() {
		return v
	}
	if v := c.KeySlot(key).Load(); v != nil && v.key == key && !v.gone.Load() {
		if p.Load() != v {
			c.Store(p, v)
		}
		return v
	}
	return nil
}

func newCache() *Cache[item, itemKeys] {
	return &Cache[item, itemKeys]{Seed: maphash.MakeSeed()}
}

// A value put under its key is found by any equal string, whatever the
// address of its bytes; a string that is not its key finds nothing.
func TestCache_FindsByEqualKey(t *testing.T) {
	c := newCache()
	v := &item{key: strings.Clone("orders.Create@10.0.0.1")}
	assert.Nil(t, find(c, v.key))
	c.Put(v.key, v)
	assert.Same(t, v, find(c, v.key))
	built := string([]byte("orders.Create@10.0.0.1"))
	assert.Same(t, v, find(c, built), "an equal key with its own bytes")
	assert.Same(t, v, c.PtrSlot(built).Load(), "the hit is stored in the address's slot")
	assert.Nil(t, find(c, "orders.Create@10.0.0.2"))
}

// A value is cached only under its own key: Put with another key is a
// no-op, so a slot never holds a value a compare would not accept.
func TestCache_PutUnderAnotherKeyIsIgnored(t *testing.T) {
	c := newCache()
	v := &item{key: "a"}
	c.Put("b", v)
	assert.Nil(t, find(c, "b"))
	assert.Nil(t, find(c, "a"))
}

// A dropped value is never returned, even while still in a slot, and is
// never stored again; Forget clears every slot that holds it.
func TestCache_ADroppedValueIsNeverFound(t *testing.T) {
	c := newCache()
	v := &item{key: "a"}
	c.Put(v.key, v)
	built := string([]byte("a"))
	require.Same(t, v, find(c, built))
	v.gone.Store(true)
	assert.Nil(t, find(c, "a"))
	assert.Nil(t, find(c, built))
	c.Put(v.key, v)
	c.Forget(v)
	for i := range c.byPtr {
		assert.Nil(t, c.byPtr[i].Load(), "byPtr[%d] still holds the dropped value", i)
	}
	for i := range c.byKey {
		assert.Nil(t, c.byKey[i].Load(), "byKey[%d] still holds the dropped value", i)
	}
	w := &item{key: "a"}
	c.Put(w.key, w)
	assert.Same(t, w, find(c, built), "the successor is found")
}

// A Put racing a drop and its Forget leaves no dropped value behind:
// whichever order they run in, Find never returns it (under -race, and
// checked after).
func TestCache_PutRacingADropLeavesNothingBehind(t *testing.T) {
	c := newCache()
	for i := 0; i < 200; i++ {
		v := &item{key: "k"}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.Put(v.key, v) }()
		go func() { defer wg.Done(); v.gone.Store(true); c.Forget(v) }()
		wg.Wait()
		require.Nil(t, find(c, "k"), "round %d", i)
		require.Nil(t, c.KeySlot("k").Load(), "round %d: the dropped value is kept alive", i)
	}
}

// A lookup keeps nothing of the key: a key built on the caller's stack for
// each lookup costs no allocation.
func TestCache_ALookupAllocatesNothing(t *testing.T) {
	c := newCache()
	v := &item{key: "inventory.GetStock@10.0.1.44"}
	c.Put(v.key, v)
	addr := "10.0.1.44"
	allocs := testing.AllocsPerRun(100, func() {
		if find(c, "inventory.GetStock@"+addr) != v {
			t.Fatal("miss")
		}
	})
	assert.Zero(t, allocs)
}
