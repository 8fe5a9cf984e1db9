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
	// closed -> open (err_ratio)
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
// downstream does not answer) gives its results to RecoverOnFailure, which
// serves the fallback and counts it on the breaker that guarded the call.
func ExampleRecoverOnFailure() {
	g, _ := breaker.NewGroup(breaker.GroupConfig{})
	client := &http.Client{Transport: breakerhttp.New(unreachable{}, g)}

	resp, err := client.Get("http://inventory.internal/stock/42")
	resp, err = breaker.RecoverOnFailure(context.Background(), resp, err,
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
