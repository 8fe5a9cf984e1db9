package breakergrpc

import (
	"context"
	"errors"

	"github.com/govkit/breaker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultClassify is the default classifier of the interceptors. It maps
// the call's status code:
//
//	OK                                        Success
//	DeadlineExceeded, Unavailable             Timeout
//	Unknown, Internal, DataLoss,
//	ResourceExhausted, Unimplemented,
//	Canceled (not by the caller), any other   Failure
//	InvalidArgument, NotFound, AlreadyExists,
//	PermissionDenied, Unauthenticated,
//	FailedPrecondition, Aborted, OutOfRange   Ignored
//
// Unavailable is a timeout, not a failure, because it is the code grpc-go
// itself gives when nothing answered: connection refused or reset, no
// address, a transport that closed. A server that answers Unavailable on
// purpose says the same thing, that it cannot serve now, and in both cases
// a half-open probe must fail.
//
// Unknown, Internal and DataLoss are the server breaking; ResourceExhausted
// is the server shedding load (HTTP's 429), and callers that keep sending
// make it worse. Unimplemented counts too: a method missing on the server
// is a bad deployment that fails every call alike, not a bad request. A
// Canceled that the caller did not cause came from the server or a proxy
// in between.
//
// The ignored codes are about the request or the caller (bad input, a
// missing or conflicting entity, no permission, a precondition the caller
// must fix, a transaction to retry) and say nothing of the downstream's
// health; Aborted is there with FailedPrecondition, as HTTP's 409 is with
// the other 4xx.
//
// A refusal by a breaker further in, another interceptor's on the same
// connection (an error matching breaker.ErrOpen, whatever its status), is
// Ignored: the call never reached the downstream, and that breaker already
// judges it. Counted, an inner breaker that opened would trip this one,
// which would then refuse calls the inner one does not guard.
//
// An error that is not a status is read as grpc-go reads context errors:
// context.DeadlineExceeded as DeadlineExceeded, context.Canceled as
// Canceled, anything else as Unknown. The caller's own cancellation never
// reaches the classifier; see [WithClassifier].
func DefaultClassify(err error) breaker.Outcome {
	if err != nil && errors.Is(err, breaker.ErrOpen) {
		return breaker.Ignored
	}
	switch code(err) {
	case codes.OK:
		return breaker.Success
	case codes.DeadlineExceeded, codes.Unavailable:
		return breaker.Timeout
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.Aborted, codes.OutOfRange:
		return breaker.Ignored
	}
	return breaker.Failure
}

func code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// settle classifies an ended call, reports it to the breaker, records it
// (if tr records) and returns the outcome.
func (c *config) settle(caller context.Context, done func(error), tr *tracked, err error) breaker.Outcome {
	var o breaker.Outcome
	switch {
	case err == nil:
		o = breaker.Success
	case errors.Is(caller.Err(), context.Canceled):
		// The caller gave up; whatever the call ended with then (Canceled,
		// or the error of a stream torn down under it) says nothing about
		// the downstream.
		o = breaker.Ignored
	default:
		o = c.classify(err)
	}
	report(done, o, err)
	tr.ended(o)
	return o
}

// report passes an outcome the interceptor has already decided to the
// breaker. breaker.Mark puts it ahead of whatever classifier the group has;
// the error is a fresh one that wraps nothing.
func report(done func(error), o breaker.Outcome, err error) {
	if o == breaker.Success {
		done(nil)
		return
	}
	msg := "breakergrpc: call ended with no error"
	if err != nil {
		msg = "breakergrpc: " + err.Error()
	}
	done(breaker.Mark(errors.New(msg), o))
}
