package breakerhttp

import (
	"net/http"
	"testing"

	"github.com/govkit/breaker"
)

// RoundTrip in the closed state over a base that answers at once, with a
// request carrying a handful of ordinary headers: the cost the Transport
// adds to each request.
func BenchmarkRoundTrip(b *testing.B) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ok := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) { return ok, nil }), g)
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []string{"Accept", "Accept-Encoding", "Authorization", "User-Agent", "X-Request-Id", "Traceparent"} {
		req.Header.Set(k, "v")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tr.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}
