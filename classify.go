package breaker

import (
	"context"
	"errors"

	"github.com/govkit/breaker/internal/errclass"
)

// Outcome is what one admitted call says about the health of the
// downstream.
type Outcome uint8

const (
	// Success: the downstream did its job. Counted in the window; a probe
	// passes.
	Success Outcome = iota
	// Ignored: the call says nothing about the downstream (the caller gave
	// up, or the request itself was bad). Not counted; a probe's slot is
	// released without a verdict.
	Ignored
	// Failure: the downstream answered with an error. Counted as a failure;
	// a probe passes unless Policy.StrictProbes is set, since an answer,
	// even an error, proves the path to the downstream works.
	Failure
	// Timeout: nothing useful came back in time, or nothing answered at
	// all (connection refused or reset). Counted as a failure; a probe
	// fails.
	Timeout
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Ignored:
		return "ignored"
	case Failure:
		return "failure"
	case Timeout:
		return "timeout"
	}
	return "outcome(" + itoa(uint64(o)) + ")"
}

// A Classifier maps the non-nil error a call returned to an [Outcome]. It is
// called only for errors the breaker has not already settled: a nil error
// with an in-time call is a Success, the caller's own cancellation is
// Ignored, an error wrapped by [Mark] (or [Ignore]) has its mark, and a
// call slower than Policy.CallTimeout is a Timeout, before any classifier runs. To extend the
// default rather than replace it, fall through to [DefaultClassifier]:
//
//	func(err error) breaker.Outcome {
//		if errors.Is(err, ErrOutOfStock) {
//			return breaker.Ignored // a business answer, not a fault
//		}
//		return breaker.DefaultClassifier(err)
//	}
//
// A classifier must be safe for concurrent use and should be fast: it runs
// on every failed call. A value outside the four outcomes counts as Failure.
// A classifier that panics is treated like a function that panics: the call
// counts as a failure (a half-open probe frees its slot, or fails the
// episode under Policy.StrictProbes), and the panic goes on to the caller
// of Do, or of Allow's done.
type Classifier func(err error) Outcome

// DefaultClassifier treats as Timeout an error that is
// context.DeadlineExceeded, that has a Timeout() method returning true
// (net.Error), or that is a refused, reset or aborted connection (nothing
// answered); as Ignored any other error that matches [ErrOpen], the
// refusal of another breaker that the function passed on; and every other
// error as Failure. An error whose methods panic when asked (the classic
// typed nil: a nil *net.OpError returned as an error) is a Failure.
//
// Another breaker's refusal is not an answer from the downstream: the
// call never reached it, and the breaker that refused already judges it.
// Counted as a failure, an inner breaker that opens would trip every
// breaker around it, which would then refuse calls the inner one does not
// guard and stay open after it closes. A classifier that wants such
// refusals counted can say so before it falls through to this one.
func DefaultClassifier(err error) Outcome {
	return Outcome(errclass.Default(err, &refusal))
}

// refusal is how internal/errclass knows another breaker's refusal.
var refusal = errclass.Refusal{
	Sentinel: ErrOpen,
	IsTyped:  func(err error) bool { _, ok := err.(*OpenError); return ok },
}

// outcome settles the outcome of a finished call. elapsed is negative when
// the call's start time was not taken (no CallTimeout and no SlowCall).
func (b *Breaker) outcome(caller context.Context, err error, elapsed int64, r *rules) Outcome {
	if err != nil && callerCanceled(caller, err) {
		return Ignored // the caller gave up; says nothing of the downstream
	}
	if r.timeout > 0 && elapsed > r.timeout {
		return Timeout // late, whatever it returned
	}
	if err == nil {
		return Success
	}
	var o Outcome
	if b.opt.classify == nil {
		o = markOrDefault(err)
	} else if m, ok := markOf(err); ok {
		o = m
	} else {
		o = b.opt.classify(err)
	}
	if o > Timeout {
		return Failure
	}
	return o
}

// callerCanceled reports whether err is the caller's own cancellation: the
// caller's context was canceled, and err is context.Canceled or the
// cancellation's cause (net/http returns the cause of a context canceled
// with context.WithCancelCause, not context.Canceled).
func callerCanceled(caller context.Context, err error) (yes bool) {
	if !errors.Is(caller.Err(), context.Canceled) {
		return false
	}
	defer func() {
		if recover() != nil {
			yes = false // a typed nil error (see DefaultClassifier)
		}
	}()
	if errors.Is(err, context.Canceled) {
		return true
	}
	cause := context.Cause(caller)
	return cause != nil && errors.Is(err, cause)
}

func itoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}
