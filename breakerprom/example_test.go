package breakerprom_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func ExampleNewCollector() {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	c := breakerprom.NewCollector(g)

	// A registry of its own keeps the example's output to the breakers;
	// prometheus.MustRegister(c) adds them to the default one instead.
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	failing := func(context.Context) error { return errors.New("pricing: 503") }
	for i := 0; i < breaker.DefaultPolicy().MinRequests; i++ {
		_ = g.Do(context.Background(), "pricing.GetPrice", failing)
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		// The state, why the outage began (for all of it), and the trips
		// by each rule: the ones not made yet are there at 0, so that
		// increase() sees the first.
		if line := sc.Text(); strings.HasPrefix(line, "breaker_state{") || strings.HasPrefix(line, "breaker_trip_") ||
			strings.HasPrefix(line, `breaker_transitions_total{from="closed"`) {
			fmt.Println(line)
		}
	}
	// Output:
	// breaker_state{name="pricing.GetPrice",state="closed"} 0
	// breaker_state{name="pricing.GetPrice",state="half_open"} 0
	// breaker_state{name="pricing.GetPrice",state="open"} 1
	// breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="consecutive_failures",to="open"} 0
	// breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="error_count",to="open"} 0
	// breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="error_ratio",to="open"} 1
	// breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="forced_open",to="open"} 0
	// breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="slow_ratio",to="open"} 0
	// breaker_trip_reason{name="pricing.GetPrice",reason="error_ratio"} 1
	// breaker_trip_run{name="pricing.GetPrice"} 0
	// breaker_trip_slow_call_seconds{name="pricing.GetPrice"} 0
	// breaker_trip_window_calls{name="pricing.GetPrice"} 20
	// breaker_trip_window_failures{name="pricing.GetPrice"} 20
	// breaker_trip_window_slow{name="pricing.GetPrice"} 0
	// breaker_trip_window_timeouts{name="pricing.GetPrice"} 0
}

func ExampleNewHandler() {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	// The application's own metrics, served in the same response.
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_requests_total", Help: "Requests served."})
	reg.MustRegister(requests)
	h, err := breakerprom.NewHandler(g, reg)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)

	failing := func(context.Context) error { return errors.New("pricing: 503") }
	for i := 0; i < breaker.DefaultPolicy().MinRequests; i++ {
		_ = g.Do(context.Background(), "pricing.GetPrice", failing)
		requests.Inc()
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fmt.Println(rec.Header().Get("Content-Type"))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "app_requests_total ") || strings.HasPrefix(line, "breaker_state{") {
			fmt.Println(line)
		}
	}
	// Output:
	// text/plain; version=0.0.4; charset=utf-8
	// app_requests_total 20
	// breaker_state{name="pricing.GetPrice",state="closed"} 0
	// breaker_state{name="pricing.GetPrice",state="half_open"} 0
	// breaker_state{name="pricing.GetPrice",state="open"} 1
}
