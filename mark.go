package breaker

import "github.com/govkit/breaker/internal/errclass"

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
	return errclass.Marked{Err: err, O: errclass.Outcome(o)}
}

// markOf returns the outcome of the outermost Mark in err's chain.
func markOf(err error) (Outcome, bool) {
	o, ok := errclass.MarkOf(err)
	return Outcome(o), ok
}

// markOrDefault is markOf, then DefaultClassifier if err carries no mark,
// in one walk of err's tree: the outcome of every failed call of a
// breaker with the default classifier.
func markOrDefault(err error) Outcome {
	return Outcome(errclass.MarkOrDefault(err, &refusal))
}
