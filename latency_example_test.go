package breaker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
)

// A breaker whose deadline follows its calls' latency. Calls of 50 ms
// arrive five times a second; at the first recompute, 30 s in, the
// deadline moves from where it started to twice the window's P99,
// rounded up to the top of its histogram bin. The change is an event and
// a log record.
func ExampleBreaker_Latency() {
	clk := clock.NewMock()
	p := breaker.DefaultPolicy()
	p.AdaptiveTimeout.Enabled = true
	p.CallTimeout = 500 * time.Millisecond // where it starts
	p.AdaptiveTimeout.Min, p.AdaptiveTimeout.Max = 20*time.Millisecond, 2*time.Second
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	b, err := breaker.New("inventory.GetStock", p,
		breaker.WithClock(clk),
		breaker.WithLogger(log),
		breaker.OnTransition(func(e breaker.Event) {
			if e.Timeout != nil {
				fmt.Printf("%s: %v -> %v (P%v = %v over %d calls)\n",
					e.Reason, e.Timeout.Old, e.Timeout.New, e.Timeout.Quantile*100, e.Timeout.Latency.Round(time.Millisecond), e.Timeout.Samples)
			}
		}))
	if err != nil {
		panic(err)
	}
	fmt.Println("deadline:", b.Timeout())
	for i := 0; i < 155; i++ { // 31 s
		_ = b.Do(context.Background(), func(context.Context) error {
			clk.Add(50 * time.Millisecond) // the call takes 50 ms
			return nil
		})
		clk.Add(150 * time.Millisecond)
	}
	lat, _ := b.Latency()
	fmt.Println("p99:", lat.P99.Round(time.Millisecond), "deadline:", lat.Timeout.Round(time.Millisecond))
	// Output:
	// deadline: 500ms
	// level=INFO msg="timeout changed" breaker.name=inventory.GetStock breaker.state=closed breaker.reason=timeout_adapted breaker.old=500ms breaker.new=100.663296ms breaker.quantile=0.99 breaker.latency=50.331648ms breaker.samples=23
	// timeout_adapted: 500ms -> 100.663296ms (P99 = 50ms over 23 calls)
	// p99: 49ms deadline: 101ms
}
