package check

import (
	"bytes"
	"testing"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario: a key read from a service's snapshot, which took it from
// request data, held a right-to-left override (U+202E), and the text
// report wrote it as it is: the terminal showed the text after it
// reversed, so that "inventory.GetStock@<U+202E>7.0.0.01" read as
// inventory.GetStock@10.0.0.7. Keys, and the override a policy comes
// from, are written by ops.Printable.
func TestReport_WriteTextEscapesKeysThatDoNotShowAsThemselves(t *testing.T) {
	const poser = "inventory.GetStock@\u202e7.0.0.01"
	gp := breaker.GroupPolicy{Default: breaker.DefaultPolicy(), Overrides: map[string]breaker.Policy{
		poser:               breaker.DefaultPolicy(),
		"pricing.Get\u200b": breaker.DefaultPolicy(),
	}}
	w := Workload{Keys: map[string]Traffic{poser: {Rate: 0.01}, "orders.Create\xff": {Rate: 0.01}}}
	r, err := Group(gp, w, Options{SimCalls: 50_000})
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, r.WriteText(&out, Info))
	txt := out.String()
	for _, raw := range []string{"\u202e", "\u200b", "\xff"} {
		assert.NotContains(t, txt, raw)
	}
	assert.Contains(t, txt, "\n\"inventory.GetStock@\\u202e7.0.0.01\"  (0.01 calls/s, 0% errors; policy \"inventory.GetStock@\\u202e7.0.0.01\")\n")
	assert.Contains(t, txt, "\n\"orders.Create\\xff\"  (")
	assert.Contains(t, txt, "\n\"pricing.Get\\u200b\"\n")
	assert.Equal(t, poser, r.Keys[0].Key, "the report keeps the key itself")
}
