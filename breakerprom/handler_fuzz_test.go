package breakerprom

import (
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// FuzzHandler_WritesWhatTheCollectorGathers gives the handler and the
// collector a group whose keys, and a constant label's value, are the
// fuzzer's bytes, and checks that the handler writes what promhttp would
// write for the collector.
func FuzzHandler_WritesWhatTheCollectorGathers(f *testing.F) {
	f.Add("orders.Create", "payment.Charge@10.0.0.1", "a", "eu-west-1", uint8(0))
	f.Add(`quote"d`, "back\\slash", "line\nfeed", "x\"y\\z\n", uint8(5))
	f.Add("prix.Café", "prix.Caf\xe9", "Zeta", "", uint8(2))
	f.Add("a\xff", `a\xff`, "a\xfe", "", uint8(1)) // one label value twice
	f.Fuzz(func(t *testing.T, k1, k2, k3, zone string, fails uint8) {
		if !utf8.ValidString(zone) {
			t.Skip("a constant label's value must be UTF-8: NewHandler refuses it")
		}
		opts := []Option{WithConstLabels(prometheus.Labels{"zone": zone})}
		fx := newFixture(t, opts...)
		boom := errors.New("boom")
		for i, k := range []string{k1, k2, k3} {
			if k == "" {
				continue
			}
			// Keys that write one label value (see
			// TestCollector_KeysThatAreOneLabelValueKeepTheScrape) are let through:
			// both expose the first.
			b := fx.Breaker(k)
			for j := 0; j < int(fails>>i)%40; j++ {
				_ = b.Do(context.Background(), func(context.Context) error { return boom })
			}
			_ = b.Do(context.Background(), func(context.Context) error { return nil })
		}
		h, err := NewHandler(fx.Group, nil, opts...)
		require.NoError(t, err)
		require.Equal(t, registryText(t, NewCollector(fx.Group, opts...)), handlerText(t, h))
	})
}
