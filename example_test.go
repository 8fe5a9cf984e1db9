package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerhttp"
)

var errUnavailable = errors.New("inventory unavailable")

// getStock stands for a call to a downstream service.
func getStock(ctx context.Context, sku string) (int, error) { return 7, nil }

func Example() {
	b, err := breaker.New("inventory.GetStock", breaker.DefaultPolicy())
	if err != nil {
		panic(err)
	}
	n, err := breaker.Call(context.Background(), b, func(ctx context.Context) (int, error) {
		return getStock(ctx, "sku-42")
	})
	if errors.Is(err, breaker.ErrOpen) {
		fmt.Println("inventory is failing; serving the cached count")
		return
	}
	fmt.Println(n, err)
	// Output: 7 <nil>
}

func ExampleBreaker_Do() {
	b, _ := breaker.New("inventory.Reserve", breaker.DefaultPolicy())
	err := b.Do(context.Background(), func(ctx context.Context) error {
		return nil // the call to the downstream
	})
	fmt.Println(err, b.State())
	// Output: <nil> closed
}

// A test drives a breaker through its states with a mock clock: no sleeps.
func Example_testingWithAMockClock() {
	clk := clock.NewMock()
	b, _ := breaker.New("inventory.GetStock", breaker.DefaultPolicy(),
		breaker.WithClock(clk),
		breaker.WithRand(func() float64 { return 0.5 }), // no jitter: cooldowns are exact
		breaker.OnTransition(func(e breaker.Event) {
			fmt.Printf("%s -> %s (%s)\n", e.From, e.To, e.Reason)
		}))
	failing := func(context.Context) error { return errUnavailable }
	for i := 0; i < 20; i++ {
		_ = b.Do(context.Background(), failing)
	}
	err := b.Do(context.Background(), failing)
	var oe *breaker.OpenError
	if errors.As(err, &oe) {
		fmt.Println("refused; retry in", oe.RetryAfter())
	}
	clk.Add(30 * time.Second)
	for i := 0; i < 3; i++ {
		_ = b.Do(context.Background(), func(context.Context) error { return nil })
	}
	fmt.Println(b.State())
	// Output:
	// closed -> open (error_ratio)
	// refused; retry in 30s
	// open -> half_open (cooldown_elapsed)
	// half_open -> closed (probes_passed)
	// closed
}

func ExampleBreaker_Allow() {
	b, _ := breaker.New("prices.Stream", breaker.DefaultPolicy())
	ctx, done, err := b.Allow(context.Background())
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	// Open the stream with ctx, read it to the end, then report.
	_ = ctx
	done(nil)
	fmt.Println(b.Counters().Successes)
	// Output: 1
}

func ExampleIgnore() {
	b, _ := breaker.New("orders.Create", breaker.DefaultPolicy())
	errInvalid := errors.New("invalid quantity")
	for i := 0; i < 50; i++ {
		_ = b.Do(context.Background(), func(context.Context) error {
			// A bad request is the caller's fault, not the downstream's.
			return breaker.Ignore(errInvalid)
		})
	}
	fmt.Println(b.State(), b.Counters().Ignored)
	// Output: closed 50
}

func ExampleParsePolicy() {
	p, err := breaker.ParsePolicy([]byte(`{"error_ratio": 0.6, "open_for": "45s"}`))
	fmt.Println(p.ErrorRatio, p.OpenFor, p.MinRequests, err)
	_, err = breaker.ParsePolicy([]byte(`{"open_for": "10s", "max_open_for": "5s", "probs": 3}`))
	fmt.Println(err)
	// Output:
	// 0.6 45s 20 <nil>
	// breaker: invalid policy: probs: unknown field
}

func ExampleBreaker_SetMode() {
	b, _ := breaker.New("payment.Charge", breaker.DefaultPolicy())
	_ = b.SetMode(breaker.ModeForcedOpen) // maintenance: refuse everything
	err := b.Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println(err)
	// Output: breaker: payment.Charge is open (forced_open)
}

// Reads fall back to a cached value, writes that can wait to "try again
// later"; a write that must not be lost uses no fallback at all.
func ExampleFallback() {
	b, _ := breaker.New("catalog.GetPrice", breaker.DefaultPolicy())
	_ = b.SetMode(breaker.ModeForcedOpen) // the catalog is down
	price, err := breaker.Fallback(context.Background(), b,
		func(ctx context.Context) (int, error) { return 1299, nil },
		func(ctx context.Context, refusal error) (int, error) {
			return 1250, nil // the last price we saw
		})
	fmt.Println(price, err, b.Counters().Fallbacks)
	// Output: 1250 <nil> 1
}

// A call guarded by an integration (here the HTTP transport, whose
// downstream does not answer) gives its results to FallbackResultOnFailure, which
// serves the fallback and counts it on the breaker that guarded the call.
func ExampleFallbackResultOnFailure() {
	g, _ := breaker.NewGroup(breaker.GroupConfig{})
	client := &http.Client{Transport: breakerhttp.New(unreachable{}, g)}

	resp, err := client.Get("http://inventory.internal/stock/42")
	resp, err = breaker.FallbackResultOnFailure(context.Background(), resp, err,
		func(ctx context.Context, err error) (*http.Response, error) {
			return nil, fmt.Errorf("inventory is down, try later: %w", err)
		})
	fmt.Println(resp, err)

	b, _ := g.Lookup("inventory.internal")
	fmt.Println("timeouts:", b.Counters().Timeouts, "fallbacks:", b.Counters().Fallbacks)
	// Output:
	// <nil> inventory is down, try later: Get "http://inventory.internal/stock/42": connection refused
	// timeouts: 1 fallbacks: 1
}

// unreachable is a RoundTripper whose downstream never answers.
type unreachable struct{}

func (unreachable) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

// Call is Do for a function that returns a value: no closure variable is
// needed to get the result out, and a refusal returns the zero value.
func ExampleCall() {
	b, _ := breaker.New("inventory.GetStock", breaker.DefaultPolicy())
	n, err := breaker.Call(context.Background(), b, func(ctx context.Context) (int, error) {
		return getStock(ctx, "sku-42")
	})
	fmt.Println(n, err)

	_ = b.SetMode(breaker.ModeForcedOpen)
	n, err = breaker.Call(context.Background(), b, func(ctx context.Context) (int, error) {
		return getStock(ctx, "sku-42")
	})
	fmt.Println(n, errors.Is(err, breaker.ErrOpen))
	// Output:
	// 7 <nil>
	// 0 true
}

// FallbackOnFailure serves the fallback when the breaker refuses the call,
// and also when the call fails or times out; the fallback sees why.
func ExampleFallbackOnFailure() {
	b, _ := breaker.New("inventory.GetStock", breaker.DefaultPolicy())
	cache := map[string]int{"sku-42": 6}
	stock, err := breaker.FallbackOnFailure(context.Background(), b,
		func(ctx context.Context) (int, error) { return 0, errUnavailable },
		func(ctx context.Context, err error) (int, error) {
			fmt.Println("falling back:", err)
			if n, ok := cache["sku-42"]; ok {
				return n, nil // stale but useful
			}
			return 0, err
		})
	fmt.Println(stock, err, b.Counters().Failures, b.Counters().Fallbacks)
	// Output:
	// falling back: inventory unavailable
	// 6 <nil> 1 1
}

// FallbackResult falls back only on a refusal: the call's own error goes through.
func ExampleFallbackResult() {
	b, _ := breaker.New("reviews.Post", breaker.DefaultPolicy())
	_ = b.SetMode(breaker.ModeForcedOpen) // reviews is down for maintenance
	err := b.Do(context.Background(), func(context.Context) error { return nil })
	_, err = breaker.FallbackResult(context.Background(), struct{}{}, err,
		func(ctx context.Context, err error) (struct{}, error) {
			var oe *breaker.OpenError
			errors.As(err, &oe)
			return struct{}{}, fmt.Errorf("try again later (%s)", oe.Reason)
		})
	fmt.Println(err)
	// Output: try again later (forced_open)
}

// A policy document, as a config file or a config store holds it, applied
// to a running group: a bad one is refused whole, with every bad field
// named, and every breaker keeps the policy it had.
func ExampleGroup_LoadPolicies() {
	g, _ := breaker.NewGroup(breaker.GroupConfig{})
	err := g.LoadPolicies([]byte(`{
	  "default":   {},
	  "overrides": {"audit.Write": {"error_ratio": 0, "consecutive_failures": 6, "strict_probes": true}}
	}`))
	b, _ := g.Get("audit.Write")
	fmt.Println(err, b.Policy().ConsecutiveFailures, b.Policy().ErrorRatio)

	err = g.LoadPolicies([]byte(`{"overrides": {"audit.Write": {"open_for": "1m", "max_open_for": "30s"}}}`))
	fmt.Println(err)
	fmt.Println(b.Policy().ConsecutiveFailures)
	// Output:
	// <nil> 6 0
	// breaker: invalid policy: overrides["audit.Write"].max_open_for: must be at least open_for (1m0s), got 30s
	// 6
}
