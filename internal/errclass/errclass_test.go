package errclass

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errBoom = errors.New("boom")

// errOpen and refused stand for a breaker's refusal: a sentinel, and a
// typed error whose Is matches it alone and that wraps nothing.
var errOpen = errors.New("open")

type refused struct{ name string }

func (*refused) Error() string        { return "refused" }
func (*refused) Is(target error) bool { return target == errOpen }

var refusal = Refusal{Sentinel: errOpen, IsTyped: func(err error) bool { _, ok := err.(*refused); return ok }}

func mark(err error, o Outcome) error { return Marked{err, o} }
func ignore(err error) error          { return mark(err, Ignored) }

// timeoutErr is an error with a Timeout method, like a net.Error.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func connRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

// isDeadline is an error whose own Is method says it is a deadline: the
// classifier must ask it, as errors.Is does.
type isDeadline struct{}

func (isDeadline) Error() string        { return "upstream deadline" }
func (isDeadline) Is(target error) bool { return target == context.DeadlineExceeded }

// asTimeout is an error whose own As method says it is an error that timed
// out, as an error that delegates As to a field it does not unwrap does.
type asTimeout struct{}

func (asTimeout) Error() string { return "wrapped timeout" }
func (asTimeout) As(target any) bool {
	if p, ok := target.(*interface{ Timeout() bool }); ok {
		*p = timeoutErr{}
		return true
	}
	return false
}

// asMarked delegates As to an error it holds but does not unwrap.
type asMarked struct{ inner error }

func (e asMarked) Error() string      { return e.inner.Error() }
func (e asMarked) As(target any) bool { return errors.As(e.inner, target) }

// A Timeout method that says false, met first, hides one that says true
// further down the chain: errors.As stops at the first.
type notTimeout struct{ inner error }

func (e notTimeout) Error() string { return "not a timeout" }
func (e notTimeout) Timeout() bool { return false }
func (e notTimeout) Unwrap() error { return e.inner }

func TestDefault_AgreesWithErrorsIsAndAs(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{isDeadline{}, Timeout},
		{fmt.Errorf("call: %w", isDeadline{}), Timeout},
		{asTimeout{}, Timeout},
		{errors.Join(errBoom, asTimeout{}), Timeout},
		{notTimeout{timeoutErr{}}, Failure},
		{notTimeout{context.DeadlineExceeded}, Timeout}, // the Is half still finds it
		{errors.Join(notTimeout{errBoom}, timeoutErr{}), Failure},
		{errors.Join(errBoom, fmt.Errorf("x: %w", syscall.ECONNRESET)), Timeout},
		{syscall.EPIPE, Failure},
		{syscall.ETIMEDOUT, Timeout}, // Errno's own Timeout method
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", errBoom)), Failure},
		{fmt.Errorf("a: %w", &refused{}), Ignored},
		{errors.Join(errBoom, &refused{}), Ignored},
		{errors.Join(&refused{}, timeoutErr{}), Timeout},
		{errors.Join(isDeadline{}, errOpen), Timeout},
		{notTimeout{&refused{}}, Ignored},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Default(c.err, &refusal), "%v", c.err)
		assert.Equal(t, c.want, ByErrors(c.err, &refusal), "%v: the errors package's answer", c.err)
	}
}

func TestMarkOf_FoundWhereErrorsAsFindsIt(t *testing.T) {
	o, ok := MarkOf(asMarked{ignore(errBoom)})
	assert.True(t, ok && o == Ignored, "a mark behind an As method")
	o, ok = MarkOf(errors.Join(errBoom, fmt.Errorf("x: %w", mark(errBoom, Timeout))))
	assert.True(t, ok && o == Timeout, "a mark in a joined error")
	_, ok = MarkOf(fmt.Errorf("x: %w", errBoom))
	assert.False(t, ok, "no mark")
	var typedNil *net.OpError
	_, ok = MarkOf(fmt.Errorf("x: %w", typedNil))
	assert.False(t, ok, "a typed nil carries no mark")
}

// TestDefault_OneWalkAgreesWithMarkThenDefault: with the default
// classifier the breaker reads the mark and classifies in one walk of the
// error's tree; it must say what markOf, then DefaultClassifier, say.
func TestMarkOrDefault_OneWalkAgreesWithMarkThenDefault(t *testing.T) {
	var typedNil *net.OpError
	for _, err := range []error{
		errBoom,
		fmt.Errorf("x: %w", errBoom),
		context.DeadlineExceeded,
		timeoutErr{},
		connRefused(),
		isDeadline{},
		asTimeout{},
		notTimeout{timeoutErr{}},
		asMarked{ignore(errBoom)},
		ignore(errBoom),
		mark(context.DeadlineExceeded, Failure),
		fmt.Errorf("x: %w", mark(errBoom, Timeout)),
		errors.Join(context.DeadlineExceeded, ignore(errBoom)),
		errors.Join(timeoutErr{}, fmt.Errorf("y: %w", mark(errBoom, Success))),
		errors.Join(errBoom, syscall.ECONNRESET),
		errors.Join(isDeadline{}, ignore(errBoom)),
		mark(mark(errBoom, Failure), Ignored),
		fmt.Errorf("x: %w", typedNil),
		errors.Join(context.DeadlineExceeded, typedNil),
		errors.Join(ignore(errBoom), typedNil),
		errors.Join(typedNil, ignore(errBoom)),
		mark(errBoom, Outcome(9)),
		&refused{},
		fmt.Errorf("x: %w", errOpen),
		errors.Join(&refused{}, mark(errBoom, Failure)),
		errors.Join(mark(errBoom, Failure), &refused{}),
		errors.Join(&refused{}, context.DeadlineExceeded),
		errors.Join(&refused{}, isDeadline{}),
		// Leaves: no Unwrap, Timeout, Is or As (see leafOutcome).
		errOpen,
		errors.New("plain"),
		leafErr{},
		(*leafPtr)(nil),
		syscall.EPIPE,
	} {
		want, ok := MarkOf(err)
		if !ok {
			want = Default(err, &refusal)
		}
		assert.Equal(t, want, MarkOrDefault(err, &refusal), "%#v", err)
	}
}

// leafErr and leafPtr are errors with no method but Error: a value, and a
// pointer that may be a typed nil, whose Error would panic.
type leafErr struct{}

func (leafErr) Error() string { return "leaf" }

type leafPtr struct{ msg string }

func (e *leafPtr) Error() string { return e.msg }
