// Package errclass reads the outcome of a failed call from its error: the
// mark that settles it, or else whether it is a timeout, a refusal of
// another breaker, or a plain failure. It walks an error's tree itself,
// in the order errors.Is and errors.As do, so that the common errors cost
// no allocation, and hands over to them for the trees it cannot settle.
//
// The refusal of another breaker is two errors the caller names (see
// Refusal). Everything here is safe for concurrent use.
package errclass

import (
	"context"
	"errors"
	"syscall"
)

// Outcome is what a call says about the downstream; the values are those
// of breaker.Outcome.
type Outcome uint8

const (
	Success Outcome = iota
	Ignored
	Failure
	Timeout
)

// Refusal is how another breaker's refusal looks: a sentinel, and a test
// for the typed error whose Is method matches the sentinel and nothing
// else, and that wraps nothing. The walk asks IsTyped only of an error
// with an Is or As method of its own, so that a plain error pays nothing
// for it; IsTyped must not panic.
type Refusal struct {
	Sentinel error
	IsTyped  func(error) bool
}

// Marked is an error with the outcome it counts as, whatever a classifier
// would say. It has err's message and matches what err matches.
type Marked struct {
	Err error
	O   Outcome
}

func (e Marked) Error() string { return e.Err.Error() }
func (e Marked) Unwrap() error { return e.Err }

// Default is the default classification of a non-nil err: Timeout for a
// deadline, a Timeout() method answering true, or a connection nothing
// answered; Ignored for a refusal; Failure otherwise, and for an error
// whose methods panic (a typed nil).
func Default(err error, r *Refusal) (o Outcome) {
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
	return ByErrors(err, r)
}

// ByErrors is Default in terms of errors.Is and errors.As, for the trees
// the walk cannot settle. It allocates: the target of errors.As escapes.
func ByErrors(err error, r *Refusal) Outcome {
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
	if errors.Is(err, r.Sentinel) {
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
// With marks set, the walk also looks for the first Marked error, as
// MarkOf does, and goes on to the end of the tree until it finds one.
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
func (s *scan) walk(err error, r *Refusal, marks bool) bool {
	for err != nil {
		if marks {
			if m, ok := err.(Marked); ok {
				s.marked, s.mark = true, m.O
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
			case r.Sentinel:
				s.refusal = true
			}
			// One type switch rather than one assertion a method: Go
			// caches a switch's answer for a type at the switch, so
			// each is one lookup however many cases it has.
			switch err.(type) {
			case interface{ Is(error) bool }, interface{ As(any) bool }:
				if r.IsTyped(err) {
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
