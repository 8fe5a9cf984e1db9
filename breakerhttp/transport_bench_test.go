package breakerhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
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

// BenchmarkLoopback is a whole request on a loopback connection: a GET to
// a local server whose handler writes a short body, read to the end and
// closed, with a keep-alive http.Transport, bare and behind the Transport.
// The difference per request is the cost the Transport adds on a real
// round trip.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		wrap func(*http.Transport) http.RoundTripper
	}{
		{"bare", func(t *http.Transport) http.RoundTripper { return t }},
		{"guarded", func(t *http.Transport) http.RoundTripper { return New(t, g) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			base := &http.Transport{MaxIdleConnsPerHost: 64}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: c.wrap(base)}
			get := func() error {
				resp, err := client.Get(srv.URL)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return err
			}
			if err := get(); err != nil { // the connection, outside the timing
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := get(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundTripBody is RoundTrip in the closed state for a response
// with a body, read to the end and closed, over a base that answers at
// once: the cost of guarding an exchange whose call ends with its body.
// The base's response and body are made anew for every request, as a real
// base makes them.
func BenchmarkRoundTripBody(b *testing.B) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok"))}, nil
	}), g)
	get := func(req *http.Request) error {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	b.Run("serial", func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := get(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
			for pb.Next() {
				if err := get(req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// The same, serial, with every request recorded (WithRecorder) to a
	// recorder that writes to io.Discard: what recording adds.
	b.Run("recorded", func(b *testing.B) {
		rec, err := calltrace.NewRecorder(io.Discard, calltrace.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer rec.Close()
		recorded := New(tr.base, g, WithRecorder(rec))
		req, _ := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			resp, err := recorded.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
