package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerprom"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/live"
	"github.com/govkit/breaker/ops"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// One breaker per downstream method, named after it: the name is the key
// in the group, in the logs, in /breakers and in the metrics.
const (
	keyStock = "inventory.GetStock"
	keyPrice = "pricing.GetPrice"
)

// policies is the group's policy document, as it might be read from a
// config file. Ten calls in the window are enough to judge here so that a
// few curls show a trip; the default, twenty, suits production traffic.
// Every downstream gets a deadline: without one a hung dependency makes
// every page as slow as it is, and its breaker, which sees only calls that
// return, never trips on it. Inventory answers in milliseconds when
// healthy, so 200ms is already far off; the page waits no more than 300ms
// for a price it can take from the catalogue.
const policies = `{
  "default":   {"min_requests": 10, "open_for": "15s", "max_open_for": "1m"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "200ms"},
    "pricing.GetPrice":   {"call_timeout": "300ms"}
  }
}`

// service is the example's HTTP service: a product endpoint that calls two
// downstreams through a breaker group, and the endpoints to watch it.
type service struct {
	group *breaker.Group
	// follower applies the policy source the service was given, if any;
	// the metrics, /breakers and /status report its reloads.
	follower  *live.Follower
	registry  *prometheus.Registry
	status    *ops.StatusPage
	inventory *inventoryClient
	pricing   *pricingClient
	log       *slog.Logger
	// rec records every call through the breakers when the service runs
	// with -trace; nil records nothing and costs nothing.
	rec *calltrace.Recorder
}

// newService builds the service, its breakers following src if it is not
// nil, until close. opts go to the breaker group after the logger; the
// test passes a mock clock there.
func newService(log *slog.Logger, src live.Source, opts ...breaker.Option) (*service, error) {
	gp, err := breaker.ParseGroupPolicy([]byte(policies))
	if err != nil {
		return nil, err
	}
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: gp},
		append([]breaker.Option{breaker.WithLogger(log)}, opts...)...)
	if err != nil {
		return nil, err
	}
	s := &service{
		group:     g,
		registry:  prometheus.NewRegistry(),
		inventory: &inventoryClient{downstream{name: "inventory"}},
		pricing:   &pricingClient{downstream{name: "pricing"}},
		log:       log,
	}
	// The follower first, so that the metrics and the status page report
	// its reloads from the start. It runs until close.
	if src != nil {
		if s.follower, err = live.Follow(context.Background(), g, src); err != nil {
			return nil, err
		}
	}
	// A registry of the service's own rather than the global default, so
	// that a test can build several services in one process. A real
	// service registers its other collectors (collectors.NewGoCollector(),
	// its request metrics) on the same registry.
	if err := s.registry.Register(breakerprom.NewCollector(g, breakerprom.WithFollower(s.follower))); err != nil {
		return nil, errors.Join(err, s.close())
	}
	// The status page subscribes to the group from the start, so that it
	// lists every transition with its time. It lives as long as the group.
	if s.status, err = ops.NewStatusPage(g, ops.StatusConfig{Title: "service: breakers", Follower: s.follower}); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// close stops the follower, if any, and the status page's subscription,
// and returns the error the source stopped with, if it gave up.
func (s *service) close() error {
	var err error
	if s.follower != nil {
		err = s.follower.Close()
	}
	if s.status != nil {
		err = errors.Join(err, s.status.Close())
	}
	return err
}

// routes returns the service's HTTP handler.
func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /product", s.product)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /breakers", s.breakers)
	mux.Handle("GET /status", s.status)
	mux.HandleFunc("GET /faults", s.faults)
	mux.HandleFunc("POST /faults", s.setFaults)
	return mux
}

// productView is the product endpoint's answer.
type productView struct {
	SKU        string `json:"sku"`
	Stock      int    `json:"stock"`
	PriceCents int64  `json:"price_cents"`
	// PriceSource is "pricing" for a live price, "catalogue" for the
	// printed list price served while pricing is failing.
	PriceSource string `json:"price_source"`
}

// breaker returns the group's breaker for key. It is looked up on every
// request rather than kept, because a group configured with IdleAfter may
// drop an idle breaker and create a new one, and a kept pointer would then
// miss the metrics and the snapshot. The lookup of a constant key costs a
// few nanoseconds and never fails.
func (s *service) breaker(key string) *breaker.Breaker {
	b, _ := s.group.Get(key)
	return b
}

// product answers GET /product?sku=42. Stock is essential: without it the
// page cannot be served, so a refusal is a 503 with Retry-After. Price is
// not: a failing or refused pricing call falls back to the catalogue.
func (s *service) product(w http.ResponseWriter, r *http.Request) {
	sku := r.URL.Query().Get("sku")
	if sku == "" {
		http.Error(w, "missing sku", http.StatusBadRequest)
		return
	}
	ctx := r.Context()

	getStock, stockDone := calltrace.Track(s.rec, keyStock, func(ctx context.Context) (int, error) {
		n, err := s.inventory.GetStock(ctx, sku)
		if errors.Is(err, errUnknownSKU) {
			// The caller asked for something that does not exist; that
			// says nothing about the health of inventory.
			return 0, breaker.Ignore(err)
		}
		return n, err
	})
	stock, err := breaker.Call(ctx, s.breaker(keyStock), getStock)
	stockDone(err)
	if err != nil {
		s.fail(w, err)
		return
	}

	source := "pricing"
	getPrice, priceDone := calltrace.Track(s.rec, keyPrice, func(ctx context.Context) (int64, error) { return s.pricing.GetPrice(ctx, sku) })
	price, err := breaker.FallbackOnFailure(ctx, s.breaker(keyPrice), getPrice,
		func(context.Context, error) (int64, error) {
			source = "catalogue"
			return catalogue[sku].listPrice, nil
		})
	priceDone(err)
	if err != nil {
		s.fail(w, err)
		return
	}

	writeJSON(w, productView{SKU: sku, Stock: stock, PriceCents: price, PriceSource: source})
}

// fail answers a request whose essential call did not succeed.
func (s *service) fail(w http.ResponseWriter, err error) {
	var open *breaker.OpenError
	switch {
	case errors.As(err, &open):
		// Tell clients when to come back instead of letting them retry
		// into an open breaker.
		if d := open.RetryAfter(); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, errUnknownSKU):
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// breakers answers GET /breakers with the group's snapshot: every
// breaker's state (and why it is open), window, counters and policy, and
// the current alerts at the default thresholds.
func (s *service) breakers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, ops.Snapshot(s.group, ops.Thresholds{}, s.follower))
}

// faults answers GET /faults with what each fake downstream does.
func (s *service) faults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]string{
		"inventory": s.inventory.get().String(),
		"pricing":   s.pricing.get().String(),
	})
}

// setFaults answers POST /faults?pricing=error (or inventory=, with ok,
// error or slow, and for the last two an optional share of the calls:
// inventory=error:0.7 fails 70% of them): the demo's way to make a
// downstream sick, wholly or in part. Every parameter is checked before
// any is applied; setting a switch starts its count of calls again.
func (s *service) setFaults(w http.ResponseWriter, r *http.Request) {
	targets := map[string]*downstream{"inventory": &s.inventory.downstream, "pricing": &s.pricing.downstream}
	q := r.URL.Query()
	if len(q) == 0 {
		http.Error(w, "want inventory= or pricing= with ok, error or slow (error:0.7 for a share of the calls)", http.StatusBadRequest)
		return
	}
	set := map[*downstream]setting{}
	for name, vals := range q {
		d, ok := targets[name]
		if !ok {
			http.Error(w, "unknown downstream "+strconv.Quote(name)+": want inventory or pricing", http.StatusBadRequest)
			return
		}
		f, err := parseSetting(vals[len(vals)-1])
		if err != nil {
			http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
			return
		}
		set[d] = f
	}
	for d, f := range set {
		d.set(f)
		s.log.Info("fault injected", "downstream", d.name, "fault", f.String())
	}
	s.faults(w, r)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client has gone if this fails
}

// run serves h on ln until ctx is done, then shuts the server down, giving
// requests in flight up to shutdownGrace to finish. It returns nil after
// a clean shutdown.
func run(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler: h,
		// Without it a client that sends headers slowly holds a
		// connection for ever.
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelError),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(stop)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

const shutdownGrace = 5 * time.Second
