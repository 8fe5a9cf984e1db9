package breakergrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakergrpc"
	"github.com/govkit/breaker/calltrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// broken is a health service whose every check fails inside the server.
type broken struct {
	healthpb.UnimplementedHealthServer
}

func (broken) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Internal, "database on fire")
}

// A client whose downstream fails every call: after MinRequests failures
// the method's breaker opens, and the next call fails at once with
// Unavailable, without reaching the server.
func Example() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, broken{})
	go srv.Serve(l)
	defer srv.Stop()

	p := breaker.DefaultPolicy()
	p.MinRequests = 3
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(breakergrpc.UnaryClientInterceptor(g)),
		grpc.WithStreamInterceptor(breakergrpc.StreamClientInterceptor(g)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)

	for i := 0; i < 4; i++ {
		_, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err), errors.Is(err, breaker.ErrOpen))
	}
	// Output:
	// Internal false
	// Internal false
	// Internal false
	// Unavailable true
}

// serving is a health service that answers every check.
type serving struct {
	healthpb.UnimplementedHealthServer
}

func (serving) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Testing a service through the interceptor on a mock clock, with
// Policy.CallTimeout set: the call's deadline reads in real time, so grpc-go
// sends it and the call succeeds, while the breaker's own time stays the
// mock's (here, 1970).
func Example_mockClock() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, serving{})
	go srv.Serve(l)
	defer srv.Stop()

	clk := clock.NewMock()
	p := breaker.DefaultPolicy()
	p.CallTimeout = time.Second
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, breaker.WithClock(clk))
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(breakergrpc.UnaryClientInterceptor(g)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), status.Code(err))
	// Output:
	// SERVING OK
}

// flaky is a health service that fails every check while down is set.
type flaky struct {
	healthpb.UnimplementedHealthServer
	down *atomic.Bool
}

func (f flaky) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if f.down.Load() {
		return nil, status.Error(codes.Internal, "database on fire")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// A client records its calls through the interceptors, for
// breaker-replay, and flushes the trace when it shuts down: once it makes
// no more calls (a server of its own stopped first, with GracefulStop or
// http.Server.Shutdown), the recorder writes out what it has buffered.
// The trace holds the failures that opened the breaker, the refusal, and
// the probe that closed it. (The group runs on a mock clock so that the
// example need not wait out the breaker's cooldown.)
func ExampleWithRecorder() {
	var down atomic.Bool
	down.Store(true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, flaky{down: &down})
	go srv.Serve(l)
	defer srv.Stop()

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
	record := breakergrpc.WithRecorder(rec)
	conn, err := grpc.NewClient(l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(breakergrpc.UnaryClientInterceptor(g, record)),
		grpc.WithStreamInterceptor(breakergrpc.StreamClientInterceptor(g, record)),
	)
	if err != nil {
		panic(err)
	}
	health := healthpb.NewHealthClient(conn)

	for i := 0; i < 4; i++ {
		// Three failures open the breaker; it refuses the fourth.
		health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	}
	down.Store(false)
	clk.Add(p.OpenFor)
	health.Check(context.Background(), &healthpb.HealthCheckRequest{}) // the probe

	// Shutting down: no more calls, then the recorder.
	conn.Close()
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
	// /grpc.health.v1.Health/Check failure
	// /grpc.health.v1.Health/Check failure
	// /grpc.health.v1.Health/Check failure
	// /grpc.health.v1.Health/Check refused
	// /grpc.health.v1.Health/Check success (probe)
}
