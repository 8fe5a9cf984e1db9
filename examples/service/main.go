// Command service is a small HTTP service that calls two downstreams
// through a breaker group, the way a real service would.
//
// GET /product?sku=42 asks inventory.GetStock and pricing.GetPrice, each
// through its own breaker. Stock is essential: while its breaker is open
// the endpoint answers 503 with Retry-After. Price is not: when pricing
// fails or its breaker is open, the catalogue's list price is served.
// Both downstreams are in-process fakes whose faults can be switched with
// POST /faults. GET /metrics serves the breakers' Prometheus metrics,
// GET /breakers the group's snapshot as JSON, GET /status the same as a
// page for a browser; every transition is logged with log/slog.
//
//	go run . -addr 127.0.0.1:8080
//
// See README.md for a walk through an outage with curl.
package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := serve(*addr, log); err != nil {
		log.Error("service stopped", "err", err)
		os.Exit(1)
	}
}

// serve runs the service on addr until SIGINT or SIGTERM.
func serve(addr string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	svc, err := newService(log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", ln.Addr().String())
	if err := run(ctx, ln, svc.routes(), log); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
