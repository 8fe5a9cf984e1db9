package breakerhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerhttp"
)

// A client whose downstream answers 500 to everything: after MinRequests
// failures the breaker opens, and the next request is refused at once,
// without a connection.
func Example() {
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database on fire", http.StatusInternalServerError)
	}))
	defer downstream.Close()

	p := breaker.DefaultPolicy()
	p.MinRequests = 3
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	if err != nil {
		panic(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: breakerhttp.New(base, g)}

	for i := 0; i < 4; i++ {
		resp, err := client.Get(downstream.URL + "/stock/42")
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println("refused: serve the cached value")
			continue
		}
		if err != nil {
			fmt.Println(err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // the call ends here; its outcome is counted now
		fmt.Println(resp.Status)
	}
	// Output:
	// 500 Internal Server Error
	// 500 Internal Server Error
	// 500 Internal Server Error
	// refused: serve the cached value
}

// A handler that proxies to a guarded downstream answers 503 with
// Retry-After while the downstream's breaker is open.
func ExampleWriteOpenError() {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	b, _ := g.Get("inventory.internal")
	b.SetMode(breaker.ModeForcedOpen) // as if it had tripped; a forced breaker has no RetryAfter, so 1s
	client := &http.Client{Transport: breakerhttp.New(nil, g)}

	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get("http://inventory.internal/stock/42")
		if breakerhttp.WriteOpenError(w, err) {
			return
		}
		if err != nil {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})

	rec := httptest.NewRecorder()
	proxy.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stock/42", nil))
	fmt.Println(rec.Code, "Retry-After:", rec.Header().Get("Retry-After"))
	// Output:
	// 503 Retry-After: 1
}

// A read that serves the cache when the downstream fails: the 500 is
// counted as a failure of the breaker and the cached answer as a fallback,
// and no *http.Response has to be made up for it.
func ExampleFallback() {
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database on fire", http.StatusInternalServerError)
	}))
	defer downstream.Close()

	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: breakerhttp.New(base, g)}

	ctx := context.Background()
	resp, err := client.Get(downstream.URL + "/stock/42")
	stock, err := breakerhttp.Fallback(ctx, resp, err,
		func(resp *http.Response) (string, error) {
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		},
		func(ctx context.Context, err error) (string, error) {
			return "7 (cached)", nil // the last answer we had
		})
	fmt.Println(stock, err)

	b, _ := g.Lookup(strings.TrimPrefix(downstream.URL, "http://"))
	c := b.Counters()
	fmt.Println("failures:", c.Failures, "fallbacks:", c.Fallbacks)
	// Output:
	// 7 (cached) <nil>
	// failures: 1 fallbacks: 1
}
