package errclass

import "errors"

// MarkOf returns the outcome of the outermost Marked error in err's tree:
// the first in the order errors.As visits the tree. An error whose
// methods panic (a typed nil) carries no mark.
func MarkOf(err error) (o Outcome, ok bool) {
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

// findMark looks for a Marked error in err's tree the way errors.As does,
// without its escaping target. It gives up (settled false) at an error
// with an As method of its own, which could claim to be a Marked error.
func findMark(err error) (o Outcome, ok, settled bool) {
	for err != nil {
		if m, is := err.(Marked); is {
			return m.O, true, true
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
	var m Marked
	if errors.As(err, &m) {
		return m.O, true
	}
	return 0, false
}

// MarkOrDefault is MarkOf, then Default if err carries no mark, in one
// walk of err's tree: the outcome of every failed call of a breaker with
// the default classifier. A tree the walk cannot settle (see scan and
// findMark), or whose methods panic, goes to the two in turn, which each
// have their own answer to a panic.
func MarkOrDefault(err error, r *Refusal) Outcome {
	if o, ok := leaf(err, r); ok {
		return o
	}
	if o, ok := scanMarkAndTimeout(err, r); ok {
		return o
	}
	if m, ok := MarkOf(err); ok {
		return m
	}
	return Default(err, r)
}

// leaf settles an error that wraps nothing and has none of the methods
// classification asks (Unwrap, Timeout, Is, As): it carries no mark, and
// its outcome follows from its identity, with no method called, so
// nothing can panic and no recover is needed. It is the most common
// failure, a plain error value, and false for everything else.
func leaf(err error, r *Refusal) (Outcome, bool) {
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }, interface{ Timeout() bool },
		interface{ Is(error) bool }, interface{ As(any) bool }:
		return 0, false
	}
	if err == r.Sentinel {
		return Ignored, true
	}
	return Failure, true
}

func scanMarkAndTimeout(err error, r *Refusal) (o Outcome, settled bool) {
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
