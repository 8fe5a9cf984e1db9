package breakerhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerhttp"
	"github.com/govkit/breaker/calltrace"
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
	tr := breakerhttp.New(base, g)
	client := &http.Client{Transport: tr}

	ctx := context.Background()
	resp, err := client.Get(downstream.URL + "/stock/42")
	stock, err := breakerhttp.Fallback(ctx, tr, resp, err,
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

// A service records the requests its client sends through the Transport,
// for breaker-replay, and flushes the trace when it shuts down: first the
// server, whose Shutdown returns once no handler is still sending, then
// the recorder, which writes out what it has buffered. The trace holds
// the failures that opened the breaker, the refusal, and the probe that
// closed it. (The group runs on a mock clock so that the example need not
// wait out the breaker's cooldown.)
func ExampleWithRecorder() {
	var down atomic.Bool
	down.Store(true)
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "database on fire", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "42")
	}))
	defer inventory.Close()

	var trace bytes.Buffer // a file, in a real service
	rec, err := calltrace.NewRecorder(&trace, calltrace.Options{})
	if err != nil {
		panic(err)
	}
	clk := clock.NewMock()
	p := breaker.DefaultPolicy()
	p.MinRequests = 3
	p.Probes = 1
	p.Jitter = 0
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: breakerhttp.New(base, g,
		breakerhttp.WithKey(func(*http.Request) string { return "inventory" }),
		breakerhttp.WithRecorder(rec))}

	// The service: each of its requests sends one to inventory.
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get(inventory.URL + "/stock/42")
		if err != nil {
			http.Error(w, "inventory unavailable", http.StatusServiceUnavailable)
			return
		}
		io.Copy(w, resp.Body)
		resp.Body.Close() // the request ends, and is recorded, here
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	users := &http.Client{Transport: &http.Transport{}}
	defer users.CloseIdleConnections()
	get := func() {
		resp, err := users.Get("http://" + l.Addr().String() + "/product/42")
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := 0; i < 4; i++ {
		get() // three failures open the breaker; it refuses the fourth
	}
	down.Store(false)
	clk.Add(p.OpenFor)
	get() // the probe

	// Shutting down: the server first, so that no handler is still
	// sending, then the recorder.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		panic(err)
	}
	if err := rec.Close(); err != nil {
		panic(err) // the trace is incomplete: writing it failed
	}

	dec := calltrace.NewDecoder(&trace)
	for {
		r, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		switch {
		case r.Refused:
			fmt.Println(r.Key, "refused")
		case r.Probe:
			fmt.Println(r.Key, r.Outcome, "(probe)")
		default:
			fmt.Println(r.Key, r.Outcome)
		}
	}
	// Output:
	// inventory failure
	// inventory failure
	// inventory failure
	// inventory refused
	// inventory success (probe)
}
