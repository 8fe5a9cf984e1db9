package breakergrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzDefaultClassify$' -fuzztime 90s .

// codeOutcome is DefaultClassify's documented table.
func codeOutcome(c codes.Code) breaker.Outcome {
	switch c {
	case codes.OK:
		return breaker.Success
	case codes.DeadlineExceeded, codes.Unavailable:
		return breaker.Timeout
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.Aborted, codes.OutOfRange:
		return breaker.Ignored
	}
	return breaker.Failure // Unknown, Internal, ..., and codes grpc-go has no name for
}

// nilStatusErr claims to be a status error but has no status: grpc-go
// reads it as Unknown.
type nilStatusErr struct{ msg string }

func (e nilStatusErr) Error() string              { return e.msg }
func (e nilStatusErr) GRPCStatus() *status.Status { return nil }

// FuzzDefaultClassify builds an error from the fuzzer's choices (a status
// of any code and message, a context error, a plain error, a status joined
// or wrapped with others, at any depth), works out from how it was built
// what the table says of it, and checks DefaultClassify says the same.
func FuzzDefaultClassify(f *testing.F) {
	for c := uint32(0); c <= 17; c++ {
		f.Add(c, "message", uint8(0), uint8(0))
	}
	f.Add(uint32(codes.InvalidArgument), "bad sku", uint8(0), uint8(3))
	f.Add(uint32(codes.Internal), "", uint8(4), uint8(1))
	f.Add(uint32(0), "deadline", uint8(1), uint8(2))
	f.Add(uint32(0), "canceled", uint8(2), uint8(0))
	f.Add(uint32(0), "plain", uint8(3), uint8(5))
	f.Add(uint32(0), "nil status", uint8(5), uint8(1))
	f.Add(uint32(codes.NotFound), "both", uint8(6), uint8(2))
	f.Add(uint32(1<<31), "%w %!", uint8(0), uint8(4))
	f.Fuzz(func(t *testing.T, code uint32, msg string, shape, depth uint8) {
		c := codes.Code(code)
		var err error
		var want breaker.Outcome
		switch shape % 7 {
		case 0:
			err, want = status.Error(c, msg), codeOutcome(c) // nil for OK
		case 1:
			err, want = context.DeadlineExceeded, breaker.Timeout
		case 2:
			err, want = context.Canceled, breaker.Failure // not the caller's
		case 3:
			err, want = errors.New(msg), breaker.Failure // read as Unknown
		case 4:
			err, want = errors.Join(errors.New(msg), status.Error(c, msg)), codeOutcome(c)
			if c == codes.OK { // the join holds only the plain error
				want = breaker.Failure
			}
		case 5:
			err, want = nilStatusErr{msg}, breaker.Failure
		case 6:
			// A status wins over a context error beside it; with no
			// status, the context error decides.
			err, want = fmt.Errorf("%w: %w", context.DeadlineExceeded, status.Error(c, msg)), codeOutcome(c)
			if c == codes.OK {
				want = breaker.Timeout
			}
		}
		if err != nil {
			for i := 0; i < int(depth%6); i++ {
				err = fmt.Errorf("%s: %w", msg, err)
			}
		}
		got := DefaultClassify(err)
		if got > breaker.Timeout {
			t.Fatalf("%v: outcome %d is outside the four", err, got)
		}
		if got != want {
			t.Fatalf("DefaultClassify(%#v) = %v, want %v", err, got, want)
		}
	})
}

// FuzzUnaryOutcome makes one call through the unary interceptor with an
// invoker that ends with the fuzzer's status, and checks the breaker
// counted exactly the table's outcome; or, when the caller cancels its
// context during the call, that the call is ignored whatever the code.
func FuzzUnaryOutcome(f *testing.F) {
	for c := uint32(0); c <= 17; c++ {
		f.Add(c, "message", false)
	}
	f.Add(uint32(codes.Internal), "boom", true)
	f.Add(uint32(codes.Unavailable), "", true)
	f.Add(uint32(0), "", true)
	f.Fuzz(func(t *testing.T, code uint32, msg string, cancelled bool) {
		clk := testutil.NewClock()
		g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}}, breaker.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		callErr := status.Error(codes.Code(code), msg)
		invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			if cancelled {
				cancel()
			}
			return callErr
		}
		got := UnaryClientInterceptor(g)(ctx, checkMethod, nil, nil, nil, invoker)
		// The call's error comes back wrapped with the breaker's outcome,
		// but unchanged for every way a caller reads it.
		if (got == nil) != (callErr == nil) || !errors.Is(got, callErr) {
			t.Fatalf("the interceptor returned %v, want the call's error %v", got, callErr)
		}
		if got != nil {
			gs, ok := status.FromError(got)
			if !ok || !proto.Equal(gs.Proto(), status.Convert(callErr).Proto()) || got.Error() != callErr.Error() {
				t.Fatalf("the interceptor returned %v (status %v, %v), want the call's status %v", got, gs, ok, callErr)
			}
		}
		want := codeOutcome(codes.Code(code))
		if cancelled && callErr != nil {
			want = breaker.Ignored
		}
		var wantCounts testutil.Outcomes
		switch want {
		case breaker.Success:
			wantCounts = success
		case breaker.Failure:
			wantCounts = failure
		case breaker.Timeout:
			wantCounts = timeout
		case breaker.Ignored:
			wantCounts = ignored
		}
		b, err := g.Get(checkMethod)
		if err != nil {
			t.Fatal(err)
		}
		if c := testutil.OutcomesOf(b); c != wantCounts {
			t.Fatalf("code %d, cancelled %v: counted %+v, want %+v (%v)", code, cancelled, c, wantCounts, want)
		}
	})
}
