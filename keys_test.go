package breaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// SplitKey reads back the method and the target TargetKey joined, a target
// holding "@" included; a per-method key is its own method.
func TestSplitKey_ReadsBackWhatTargetKeyJoined(t *testing.T) {
	for _, c := range []struct{ method, target string }{
		{"inventory.GetStock", "10.0.0.7:443"},
		{"/shop.v1.Inventory/GetStock", "dns:///inventory:443"},
		{"pricing.GetPrice", "user@host"},
		{"pricing.GetPrice", ""},
	} {
		m, tg := SplitKey(TargetKey(c.method, c.target))
		assert.Equal(t, c.method, m, "method of %q", TargetKey(c.method, c.target))
		assert.Equal(t, c.target, tg, "target of %q", TargetKey(c.method, c.target))
	}
	m, tg := SplitKey("inventory.GetStock")
	assert.Equal(t, "inventory.GetStock", m)
	assert.Empty(t, tg)
	assert.Equal(t, "inventory.GetStock@10.0.0.7", TargetKey("inventory.GetStock", "10.0.0.7"))
}
