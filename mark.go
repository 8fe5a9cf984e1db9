package breaker

import "errors"

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
	return marked{err, o}
}

type marked struct {
	err error
	o   Outcome
}

func (e marked) Error() string { return e.err.Error() }
func (e marked) Unwrap() error { return e.err }

// markOf returns the outcome of the outermost Mark in err's chain: the
// first marked error in the order errors.As visits the tree.
func markOf(err error) (o Outcome, ok bool) {
	// The walk calls the error's own methods; a typed nil panics there
	// (see DefaultClassifier) and carries no mark.
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
// without its escaping target. It gives up
// (settled false) at an error with an As method of its own, which could
// claim to be a marked error.
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

// markOrDefault is markOf, then DefaultClassifier if err carries no mark,
// in one walk of err's tree: the outcome of every failed call of a breaker
// with the default classifier. The walk looks for a mark to the end of the
// tree, noting on the way what DefaultClassifier would say; a tree it
// cannot settle (see timeoutScan and findMark), or whose methods panic
// (a typed nil, see DefaultClassifier), goes to the two in turn, which
// each have their own answer to a panic.
func markOrDefault(err error) Outcome {
	if o, ok := leafOutcome(err); ok {
		return o
	}
	if o, ok := scanMarkAndTimeout(err); ok {
		return o
	}
	if m, ok := markOf(err); ok {
		return m
	}
	return DefaultClassifier(err)
}

// leafOutcome settles an error that wraps nothing and has none of the
// methods classification asks (Unwrap, Timeout, Is, As): it carries no
// mark, and its outcome follows from its identity, with no method called,
// so nothing can panic and no recover is needed. It is the most common
// failure, a plain error value, and false for everything else.
func leafOutcome(err error) (Outcome, bool) {
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }, interface{ Timeout() bool },
		interface{ Is(error) bool }, interface{ As(any) bool }:
		return 0, false
	}
	if err == ErrOpen {
		return Ignored, true
	}
	return Failure, true
}

func scanMarkAndTimeout(err error) (o Outcome, settled bool) {
	defer func() {
		if recover() != nil {
			o, settled = 0, false
		}
	}()
	var s timeoutScan
	if !s.scan(err, true) {
		return 0, false
	}
	if s.marked {
		return s.mark, true
	}
	return s.outcome(), true
}

// markByAs is findMark by errors.As, for the trees findMark cannot settle.
func markByAs(err error) (Outcome, bool) {
	var m marked
	if errors.As(err, &m) {
		return m.o, true
	}
	return 0, false
}
