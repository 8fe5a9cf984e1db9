package breaker

import "github.com/govkit/breaker/internal/keycache"

// keyCache answers a group's lookups of existing keys without the
// sync.Map (see internal/keycache). A breaker's name is a copy of the key
// it was created with (see create), so the key passed to Get, Lookup and
// Do does not escape, and a key the caller concatenates for each call
// ("payment.Charge@"+addr) of up to 32 bytes is built on the caller's
// stack, allocating nothing. A drop clears the breaker's slots (Forget).
type keyCache struct {
	keycache.Cache[Breaker, breakerKeys]
}

// breakerKeys tells the key cache what a breaker stands for.
type breakerKeys struct{}

func (breakerKeys) Key(b *Breaker) string   { return b.name }
func (breakerKeys) Dropped(b *Breaker) bool { return b.dropped() }

// find returns the cached breaker for key, or nil. It checks its hits
// itself rather than through breakerKeys, which a generic lookup calls
// through a dictionary (see docs/internals.md, "The key cache").
func (c *keyCache) find(key string) *Breaker {
	p := c.PtrSlot(key)
	if b := p.Load(); b != nil && b.name == key && !b.dropped() {
		return b
	}
	if b := c.KeySlot(key).Load(); b != nil && b.name == key && !b.dropped() {
		if p.Load() != b {
			c.Store(p, b)
		}
		return b
	}
	return nil
}
