package check

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/govkit/breaker"
)

// FuzzParseWorkload: a traffic document of any bytes is decoded or
// refused with an error, never a panic; one that decodes is valid, checks
// without error, and reads back the same after encoding.
func FuzzParseWorkload(f *testing.F) {
	f.Add([]byte(`{"defaults": {"deadline": "1s", "rtt": "1ms"}, "keys": {"a.B": {"rate": 200, "p50": "8ms", "p99": "40ms", "error_ratio": 0.01}}}`))
	f.Add([]byte(`{"keys": {"a.B@10.0.0.7": {"rate": 3, "targets": 4, "instances": 2, "workers": 8, "fallback": true}}}`))
	f.Add([]byte(`{"keys": {"a": {"rate": 1, "rate": 2}}}`))
	f.Add([]byte(`{"keys": {"a": {"p50": "40ms", "p99": "1ms"}}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload(data)
		if err != nil {
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("decoded an invalid workload: %v", err)
		}
		if len(w.Keys) <= 50 {
			if _, err := Group(breaker.GroupPolicy{}, w, Options{SimCalls: 2_000}); err != nil {
				t.Fatalf("a valid workload is refused: %v", err)
			}
		}
		out, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseWorkload(out)
		if err != nil {
			t.Fatalf("re-encoded workload does not decode: %v\n%s", err, out)
		}
		if len(back.Keys) != len(w.Keys) {
			t.Fatalf("keys: got %d back, want %d", len(back.Keys), len(w.Keys))
		}
		for k, tr := range w.Keys {
			if !reflect.DeepEqual(back.Keys[k], tr) {
				t.Fatalf("key %q: got %+v back, want %+v", k, back.Keys[k], tr)
			}
		}
	})
}
