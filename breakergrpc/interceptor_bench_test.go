package breakergrpc

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkUnaryLoopback is a whole unary call on a loopback connection
// (health.Check against grpc-go's own health server), without an
// interceptor and through UnaryClientInterceptor: the difference per call
// is the cost the interceptor adds on a real round trip, and "recorded"
// what recording every call (WithRecorder) adds to that.
func BenchmarkUnaryLoopback(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(l)
	}()
	defer func() {
		s.Stop()
		<-served
	}()
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rec, err := calltrace.NewRecorder(io.Discard, calltrace.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	for _, c := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"bare", nil},
		{"guarded", []grpc.DialOption{grpc.WithUnaryInterceptor(UnaryClientInterceptor(g))}},
		// Every call recorded, to a recorder that writes to io.Discard.
		{"recorded", []grpc.DialOption{grpc.WithUnaryInterceptor(UnaryClientInterceptor(g, WithRecorder(rec)))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, c.opts...)
			conn, err := grpc.NewClient(l.Addr().String(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			hc := healthpb.NewHealthClient(conn)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			if _, err := hc.Check(ctx, req); err != nil { // the connection, outside the timing
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := hc.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
