package breakergrpc

import (
	"errors"
	"time"

	"github.com/govkit/breaker"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// openError is the error of a call the breaker refused. It is a gRPC
// status error (codes.Unavailable, so that code-based retry and fallback
// logic treats it like any other unavailable downstream) and it wraps the
// breaker's refusal, so errors.Is(err, breaker.ErrOpen) holds and
// errors.As finds the *breaker.OpenError.
//
// When the time until the next probe is known, the status carries it as a
// google.rpc.RetryInfo detail too, the standard place for gRPC clients and
// gateways to look for a retry delay.
type openError struct {
	refusal error
	st      *status.Status
}

func newOpenError(refusal error) *openError {
	msg := "breaker open"
	var wait time.Duration
	var oe *breaker.OpenError
	if errors.As(refusal, &oe) {
		wait = oe.RetryAfter()
		msg = "breaker " + oe.Name + " " + oe.State.String() + ": " + string(oe.Reason)
		if wait > 0 {
			msg += ", retry in " + wait.Round(time.Millisecond).String()
		}
	}
	st := status.New(codes.Unavailable, msg)
	if wait > 0 {
		if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
			st = withInfo
		}
	}
	return &openError{refusal: refusal, st: st}
}

func (e *openError) Error() string { return e.st.Err().Error() }

// GRPCStatus makes status.FromError and status.Code see the error as
// codes.Unavailable.
func (e *openError) GRPCStatus() *status.Status { return e.st }

// Unwrap gives the breaker's refusal, which matches breaker.ErrOpen.
func (e *openError) Unwrap() error { return e.refusal }

// callError is the error of a call the interceptors guarded: the call's
// error, unchanged in its message and for errors.Is and errors.As, plus the
// breaker that guarded the call and the outcome it counted, which
// breaker.FallbackResultOnFailure reads.
type callError struct {
	err error
	b   *breaker.Breaker
	o   breaker.Outcome
}

// statusCallError is a callError whose error is a status error itself; it
// hands on that status as it is. A callError around any other error must
// not have a GRPCStatus method: status.FromError would then take it for a
// status error, where it takes the call's own error for one only through
// errors.As (and keeps its message).
type statusCallError struct {
	callError
	st interface{ GRPCStatus() *status.Status }
}

func outcomeError(err error, b *breaker.Breaker, o breaker.Outcome) error {
	c := callError{err: err, b: b, o: o}
	if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return &statusCallError{callError: c, st: st}
	}
	return &c
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// BreakerOutcome is read by breaker.FallbackResultOnFailure.
func (e *callError) BreakerOutcome() (*breaker.Breaker, breaker.Outcome) { return e.b, e.o }

// GRPCStatus is the call's own status.
func (e *statusCallError) GRPCStatus() *status.Status { return e.st.GRPCStatus() }
