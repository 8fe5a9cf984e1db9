package breaker

import (
	"context"
	"errors"
	"syscall"
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
	return classifyDefault(err, &refusal)
}

// refusal is how the walk below knows another breaker's refusal.
var refusal = refusalForm{
	sentinel: ErrOpen,
	isTyped:  func(err error) bool { _, ok := err.(*OpenError); return ok },
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
		o = markOrDefault(err, &refusal)
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

// Ignore wraps err so that the breaker does not count it: use it for errors
// that are not the downstream's fault, such as a validation error, a
// permission refusal or a business rejection. It is Mark(err, Ignored).
func Ignore(err error) error { return Mark(err, Ignored) }

// Mark wraps err so that the breaker counts it as o, whatever the
// classifier would say: the way for code that has already decided an
// outcome (an HTTP transport that saw the status, say) to report it
// through Do or Allow's done without depending on the classifier. The
// result matches err with errors.Is and errors.As and has the same
// message. Mark(nil, o) is nil, which is a success; an o outside the four
// outcomes counts as Failure. The outermost mark wins.
func Mark(err error, o Outcome) error {
	if err == nil {
		return nil
	}
	return marked{err: err, o: o}
}

// Reading a failed call's error: the mark that settles it, or else
// whether it is a timeout, another breaker's refusal, or a plain failure.
// The walk visits an error's tree in the order errors.Is and errors.As do,
// so that the common errors cost no allocation, and hands over to them for
// the trees it cannot settle.

// refusalForm is how another breaker's refusal looks: a sentinel, and a test
// for the typed error whose Is method matches the sentinel and nothing
// else, and that wraps nothing. The walk asks IsTyped only of an error
// with an Is or As method of its own, so that a plain error pays nothing
// for it; IsTyped must not panic.
type refusalForm struct {
	sentinel error
	isTyped  func(error) bool
}

// marked is an error with the outcome it counts as, whatever a classifier
// would say. It has err's message and matches what err matches.
type marked struct {
	err error
	o   Outcome
}

func (e marked) Error() string { return e.err.Error() }
func (e marked) Unwrap() error { return e.err }

// Default is the default classification of a non-nil err: Timeout for a
// deadline, a Timeout() method answering true, or a connection nothing
// answered; Ignored for a refusal; Failure otherwise, and for an error
// whose methods panic (a typed nil).
func classifyDefault(err error, r *refusalForm) (o Outcome) {
	if err == nil {
		return Success
	}
	// errors.Is and errors.As call the error's own Unwrap, Is, As and
	// Timeout methods, which panic on a nil pointer receiver.
	defer func() {
		if recover() != nil {
			o = Failure
		}
	}()
	var s scan
	if s.walk(err, r, false) {
		return s.outcome()
	}
	return classifyByErrors(err, r)
}

// classifyByErrors is Default in terms of errors.Is and errors.As, for the trees
// the walk cannot settle. It allocates: the target of errors.As escapes.
func classifyByErrors(err error, r *refusalForm) Outcome {
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return Timeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return Timeout
	}
	if errors.Is(err, r.sentinel) {
		return Ignored
	}
	return Failure
}

// scan settles Default's question in one walk of the error's tree (see
// docs/internals.md, "Classifying without allocating"). The walk visits
// the errors in the order errors.Is and errors.As do (depth first, an
// error before what it wraps). Its answer is theirs while no error in the
// tree has an Is or an As method of its own, since those can claim to
// match anything; the walk gives up at the first such error (walk returns
// false). syscall.Errno is the exception: its Is method matches only the
// os package's ErrPermission, ErrExist, ErrNotExist and
// errors.ErrUnsupported, none of which is asked about here. The typed
// refusal is the other: its Is method matches the sentinel and nothing
// else, which the walk notes; it wraps nothing.
//
// With marks set, the walk also looks for the first marked error, as
// markOf does, and goes on to the end of the tree until it finds one.
type scan struct {
	timeout bool // the answer: a timeout
	refusal bool // an error matching the refusal was seen (Ignored, if not a timeout)
	// sawTimeoutMethod is set at the first error with a Timeout method:
	// errors.As stops at it, so only its answer counts.
	sawTimeoutMethod bool
	marked           bool    // a mark was found (marks only)
	mark             Outcome // its outcome
}

// walk reports whether it settled the question for err's tree; s.timeout
// and s.refusal (and s.marked, s.mark) are then the answer.
func (s *scan) walk(err error, r *refusalForm, marks bool) bool {
	for err != nil {
		if marks {
			if m, ok := err.(marked); ok {
				s.marked, s.mark = true, m.o
				return true
			}
		}
		if e, ok := err.(syscall.Errno); ok {
			switch e {
			case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
				syscall.EHOSTUNREACH, syscall.ENETUNREACH:
				s.timeout = true
			}
		} else {
			switch err {
			case context.DeadlineExceeded:
				s.timeout = true
			case r.sentinel:
				s.refusal = true
			}
			// One type switch rather than one assertion a method: Go
			// caches a switch's answer for a type at the switch, so
			// each is one lookup however many cases it has.
			switch err.(type) {
			case interface{ Is(error) bool }, interface{ As(any) bool }:
				if r.isTyped(err) {
					s.refusal = true
					return true // a leaf: it wraps nothing
				}
				return false
			}
		}
		var next error
		var list []error
		switch u := err.(type) {
		case timeoutUnwrapper:
			s.timeoutMethod(u)
			next = u.Unwrap()
		case timeoutUnwrapperMulti:
			s.timeoutMethod(u)
			list = u.Unwrap()
		case interface{ Timeout() bool }:
			s.timeoutMethod(u)
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			list = u.Unwrap()
		}
		if s.timeout && !marks {
			return true
		}
		if list != nil {
			for _, e := range list {
				if !s.walk(e, r, marks) {
					return false
				}
				if s.marked || (s.timeout && !marks) {
					return true
				}
			}
			return true
		}
		err = next
	}
	return true
}

type timeoutUnwrapper interface {
	Timeout() bool
	Unwrap() error
}

type timeoutUnwrapperMulti interface {
	Timeout() bool
	Unwrap() []error
}

// outcome is Default's answer once walk has settled it.
func (s *scan) outcome() Outcome {
	switch {
	case s.timeout:
		return Timeout
	case s.refusal:
		return Ignored
	}
	return Failure
}

// timeoutMethod takes the answer of the first error with a Timeout
// method: errors.As stops there.
func (s *scan) timeoutMethod(te interface{ Timeout() bool }) {
	if !s.sawTimeoutMethod {
		s.sawTimeoutMethod = true
		if te.Timeout() {
			s.timeout = true
		}
	}
}

// markOf returns the outcome of the outermost marked error in err's tree:
// the first in the order errors.As visits the tree. An error whose
// methods panic (a typed nil) carries no mark.
func markOf(err error) (o Outcome, ok bool) {
	defer func() {
		if recover() != nil {
			o, ok = 0, false
		}
	}()
	o, ok, settled := findMark(err)
	if !settled {
		return markByAs(err)
	}
	return o, ok
}

// findMark looks for a marked error in err's tree the way errors.As does,
// without its escaping target. It gives up (settled false) at an error
// with an As method of its own, which could claim to be a marked error.
func findMark(err error) (o Outcome, ok, settled bool) {
	for err != nil {
		if m, is := err.(marked); is {
			return m.o, true, true
		}
		if _, has := err.(interface{ As(any) bool }); has {
			return 0, false, false
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if o, ok, settled = findMark(e); ok || !settled {
					return o, ok, settled
				}
			}
			return 0, false, true
		default:
			return 0, false, true
		}
	}
	return 0, false, true
}

// markByAs is findMark by errors.As, for the trees findMark cannot settle.
func markByAs(err error) (Outcome, bool) {
	var m marked
	if errors.As(err, &m) {
		return m.o, true
	}
	return 0, false
}

// markOrDefault is markOf, then Default if err carries no mark, in one
// walk of err's tree: the outcome of every failed call of a breaker with
// the default classifier. A tree the walk cannot settle (see scan and
// findMark), or whose methods panic, goes to the two in turn, which each
// have their own answer to a panic.
func markOrDefault(err error, r *refusalForm) Outcome {
	if o, ok := leaf(err, r); ok {
		return o
	}
	if o, ok := scanMarkAndTimeout(err, r); ok {
		return o
	}
	if m, ok := markOf(err); ok {
		return m
	}
	return classifyDefault(err, r)
}

// leaf settles an error that wraps nothing and has none of the methods
// classification asks (Unwrap, Timeout, Is, As): it carries no mark, and
// its outcome follows from its identity, with no method called, so
// nothing can panic and no recover is needed. It is the most common
// failure, a plain error value, and false for everything else.
func leaf(err error, r *refusalForm) (Outcome, bool) {
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }, interface{ Timeout() bool },
		interface{ Is(error) bool }, interface{ As(any) bool }:
		return 0, false
	}
	if err == r.sentinel {
		return Ignored, true
	}
	return Failure, true
}

func scanMarkAndTimeout(err error, r *refusalForm) (o Outcome, settled bool) {
	defer func() {
		if recover() != nil {
			o, settled = 0, false
		}
	}()
	var s scan
	if !s.walk(err, r, true) {
		return 0, false
	}
	if s.marked {
		return s.mark, true
	}
	return s.outcome(), true
}
