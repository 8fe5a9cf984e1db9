// Command service is a small HTTP service that calls two downstreams
// through a breaker group, the way a real service would.
//
// GET /product?sku=42 asks inventory.GetStock and pricing.GetPrice, each
// through its own breaker. Stock is essential: while its breaker is open
// the endpoint answers 503 with Retry-After. Price is not: when pricing
// fails or its breaker is open, the catalogue's list price is served.
// Both downstreams are in-process fakes whose faults can be switched with
// POST /faults: ok, error (a 503 at once) or slow (an answer after 1s),
// for every call or a share of them (inventory=error:0.7). Each has a
// deadline, so that a hung downstream trips its breaker on timeouts. GET /metrics serves the breakers' Prometheus metrics,
// GET /breakers the group's snapshot as JSON, GET /status the same as a
// page for a browser; every transition is logged with log/slog.
//
//	go run . -addr 127.0.0.1:8080
//
// With -policy breakers.json the breakers follow that policy file while
// the service runs: each change is applied (or refused) within a second,
// logged, and shown under "policy" in GET /breakers.
//
// See README.md for a walk through an outage with curl.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/live"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	tracePath := flag.String("trace", "", "record every call through the breakers to this `file` (JSON lines; replay it with breaker-replay -trace)")
	var pf policyFlags
	pf.register(flag.CommandLine)
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	src, err := pf.source(nil)
	if err != nil {
		log.Error("bad flags", "err", err)
		os.Exit(2)
	}
	if err := serve(*addr, *tracePath, src, log); err != nil {
		log.Error("service stopped", "err", err)
		os.Exit(1)
	}
}

// serve runs the service on addr until SIGINT or SIGTERM, recording its
// calls to tracePath if it is not empty, its breakers following src if it
// is not nil.
func serve(addr, tracePath string, src live.Source, log *slog.Logger) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	svc, err := newService(log, src)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.close()) }()
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			return err
		}
		rec, err := calltrace.NewRecorder(f, calltrace.Options{})
		if err != nil {
			f.Close()
			return err
		}
		svc.rec = rec
		defer func() {
			// The server has stopped: no call can still be recording.
			rerr := rec.Close()
			ferr := f.Close()
			log.Info("trace written", "file", tracePath, "calls", rec.Written(), "dropped", rec.Dropped())
			err = errors.Join(err, rerr, ferr)
		}()
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
