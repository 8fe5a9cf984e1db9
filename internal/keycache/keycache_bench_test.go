package keycache

import "testing"

// findKeyed is find written once for every T, asking K for a value's key
// and drop: what a generic lookup in this package would be.
func findKeyed[T any, K Keyed[T]](c *Cache[T, K], key string) *T {
	var k K
	p := c.PtrSlot(key)
	if v := p.Load(); v != nil && k.Key(v) == key && !k.Dropped(v) {
		return v
	}
	if v := c.KeySlot(key).Load(); v != nil && k.Key(v) == key && !k.Dropped(v) {
		if p.Load() != v {
			c.Store(p, v)
		}
		return v
	}
	return nil
}

// BenchmarkFind is a hit in the address's slot (a constant key) and in
// the hash's slot (a key at an address whose slot is empty), by find,
// which checks a hit itself, and by findKeyed, which asks Keyed.
func BenchmarkFind(b *testing.B) {
	c := newCache()
	v := &item{key: "inventory.GetStock@10.0.1.44"}
	c.Put(v.key, v)
	other := string([]byte("inventory.GetStock@10.0.1.44"))
	for _, bc := range []struct {
		name string
		find func(*Cache[item, itemKeys], string) *item
	}{
		{"concrete", find},
		{"keyed", findKeyed[item, itemKeys]},
	} {
		b.Run("by_ptr/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if bc.find(c, v.key) != v {
					b.Fatal("miss")
				}
			}
		})
		b.Run("by_key/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.PtrSlot(other).Store(nil) // the hash's slot must answer
				if bc.find(c, other) != v {
					b.Fatal("miss")
				}
			}
		})
	}
}
