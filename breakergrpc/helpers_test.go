package breakergrpc

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	checkMethod  = "/grpc.health.v1.Health/Check"
	watchMethod  = "/grpc.health.v1.Health/Watch"
	duplexMethod = testpb.TestService_FullDuplexCall_FullMethodName
	uploadMethod = testpb.TestService_StreamingInputCall_FullMethodName
)

// faulty is the health service with faults chosen by the request's service
// name:
//
//	""           answers SERVING (Watch: one message, then waits for the client to go)
//	"code:N"     fails with code N (Watch: after one message)
//	"first:N"    Watch only: fails with code N before any message
//	"send:K"     Watch only: K messages, then OK
//	"hold:K"     Watch only: K messages, then one more on each receive from
//	             tick, until the client goes away
//	"hang"       waits until the client goes away
//
// It counts calls and records the breaker_probe metadata of each, its
// metadata, and whether it came with a deadline.
type faulty struct {
	healthpb.UnimplementedHealthServer
	hits    atomic.Int64
	arrived chan string
	tick    chan struct{}

	mu        sync.Mutex
	probes    []string
	mds       []metadata.MD
	deadlines []bool
}

func (f *faulty) record(ctx context.Context, service string) {
	f.hits.Add(1)
	probe := ""
	if v := metadata.ValueFromIncomingContext(ctx, ProbeKey); len(v) > 0 {
		probe = strings.Join(v, ",")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	_, deadline := ctx.Deadline()
	f.mu.Lock()
	f.probes = append(f.probes, probe)
	f.mds = append(f.mds, md)
	f.deadlines = append(f.deadlines, deadline)
	f.mu.Unlock()
	f.arrived <- service
}

func (f *faulty) probeValues() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.probes...)
}

// hadDeadlines returns, for each call in order, whether it came with a
// deadline.
func (f *faulty) hadDeadlines() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.deadlines...)
}

// values returns, for each call in order, the values of the metadata key
// k it carried, joined with ",".
func (f *faulty) values(k string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.mds))
	for i, md := range f.mds {
		out[i] = strings.Join(md.Get(k), ",")
	}
	return out
}

func parseCode(s, prefix string) (codes.Code, bool) {
	if !strings.HasPrefix(s, prefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, prefix))
	if err != nil {
		panic(err)
	}
	return codes.Code(n), true
}

var serving = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}

func (f *faulty) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	f.record(ctx, req.Service)
	if c, ok := parseCode(req.Service, "code:"); ok {
		return nil, status.Error(c, "injected")
	}
	if req.Service == "hang" {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return serving, nil
}

func (f *faulty) Watch(req *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	f.record(s.Context(), req.Service)
	if c, ok := parseCode(req.Service, "first:"); ok {
		return status.Error(c, "injected")
	}
	if strings.HasPrefix(req.Service, "hold:") {
		k, _ := strconv.Atoi(strings.TrimPrefix(req.Service, "hold:"))
		for i := 0; i < k; i++ {
			if err := s.Send(serving); err != nil {
				return err
			}
		}
		for {
			select {
			case <-f.tick:
				if err := s.Send(serving); err != nil {
					return err
				}
			case <-s.Context().Done():
				return status.FromContextError(s.Context().Err()).Err()
			}
		}
	}
	if strings.HasPrefix(req.Service, "send:") {
		k, _ := strconv.Atoi(strings.TrimPrefix(req.Service, "send:"))
		for i := 0; i < k; i++ {
			if err := s.Send(serving); err != nil {
				return err
			}
		}
		return nil
	}
	if req.Service != "hang" {
		if err := s.Send(serving); err != nil {
			return err
		}
	}
	if c, ok := parseCode(req.Service, "code:"); ok {
		return status.Error(c, "injected")
	}
	<-s.Context().Done()
	return status.FromContextError(s.Context().Err()).Err()
}

// duplex is grpc-go's interop TestService for the streams on which the
// client sends: FullDuplexCall answers each request with one message until
// the client closes its side; StreamingInputCall answers once, with the
// size of all it received, when the client has closed its side.
type duplex struct {
	testpb.UnimplementedTestServiceServer
}

func (duplex) FullDuplexCall(s testpb.TestService_FullDuplexCallServer) error {
	for {
		if _, err := s.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

func (duplex) StreamingInputCall(s testpb.TestService_StreamingInputCallServer) error {
	n := 0
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(n)})
		}
		if err != nil {
			return err
		}
		n += len(req.GetPayload().GetBody())
	}
}

// server is a real gRPC server on a loopback TCP port.
type server struct {
	*faulty
	addr string
}

func newServer(t *testing.T) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serveOn(t, l)
}

func serveOn(t *testing.T, l net.Listener) *server {
	t.Helper()
	f := &faulty{arrived: make(chan string, 1024), tick: make(chan struct{})}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, f)
	testpb.RegisterTestServiceServer(s, duplex{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
	return &server{faulty: f, addr: l.Addr().String()}
}

// client is a connection through both interceptors, with a group on a
// mock clock.
type client struct {
	t     *testing.T
	clk   *clock.Mock
	group *breaker.Group
	conn  *grpc.ClientConn
	hc    healthpb.HealthClient
}

func newClient(t *testing.T, addr string, p breaker.Policy, opts ...Option) *client {
	t.Helper()
	return newClientWith(t, addr, p, testutil.NewClock(), opts...)
}

// newClientWith is newClient on clk; a nil clk is the real clock.
func newClientWith(t *testing.T, addr string, p breaker.Policy, clk *clock.Mock, opts ...Option) *client {
	t.Helper()
	var bopts []breaker.Option
	if clk != nil {
		bopts = append(bopts, breaker.WithClock(clk))
	}
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, bopts...)
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(g, opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(g, opts...)),
	)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, clk: clk, group: g, conn: conn, hc: healthpb.NewHealthClient(conn)}
}

func (c *client) breaker(key string) *breaker.Breaker {
	c.t.Helper()
	b, err := c.group.Get(key)
	require.NoError(c.t, err)
	return b
}

// check calls Check with service and a deadline of wait (5s if 0).
func (c *client) check(service string, wait time.Duration) error {
	if wait == 0 {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return err
}

var (
	success = testutil.Outcomes{Successes: 1}
	failure = testutil.Outcomes{Failures: 1}
	timeout = testutil.Outcomes{Timeouts: 1}
	ignored = testutil.Outcomes{Ignored: 1}
)
