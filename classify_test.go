package breaker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// timeoutErr is an error with a Timeout method, like a net.Error.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// connRefused and connReset are shaped as net/http returns them.
func connRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

func connReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
}

func TestClassifier_DefaultTable(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, Success},
		{errBoom, Failure},
		{context.DeadlineExceeded, Timeout},
		{timeoutErr{}, Timeout},
		{errors.Join(errBoom, context.DeadlineExceeded), Timeout},
		{connRefused(), Timeout},
		{connReset(), Timeout},
		{context.Canceled, Failure}, // only the caller's own cancel is ignored, by the breaker
		{ErrOpen, Ignored},          // another breaker's refusal
		{&OpenError{Name: "payments"}, Ignored},
		{fmt.Errorf("charge: %w", &OpenError{Name: "payments"}), Ignored},
		{errors.Join(&OpenError{}, context.DeadlineExceeded), Timeout}, // a timeout is an answer
	}
	for _, c := range cases {
		assert.Equal(t, c.want, DefaultClassifier(c.err), "%v", c.err)
	}
	for o, s := range map[Outcome]string{Success: "success", Ignored: "ignored", Failure: "failure", Timeout: "timeout"} {
		assert.Equal(t, s, o.String())
	}
}

// A typed nil pointer returned as an error (var e *net.OpError; return e)
// is a failure, for DefaultClassifier and through Do.
// Regression (020431c): DefaultClassifier panicked in errors.As; Do counted nothing.
func TestClassifier_ATypedNilErrorIsAFailureNotAPanic(t *testing.T) {
	for _, err := range []error{(*net.OpError)(nil), (*url.Error)(nil), (*net.DNSError)(nil)} {
		assert.Equal(t, Failure, DefaultClassifier(err), "%T", err)
	}
	h := newHarness(t, DefaultPolicy())
	err := h.b.Do(context.Background(), func(context.Context) error { var e *net.OpError; return e })
	assert.Error(t, err)
	assert.Equal(t, uint64(1), h.b.Counters().Failures)
}

func TestMark_ReportsADecidedOutcomeWhateverTheClassifier(t *testing.T) {
	// A classifier that would call everything a success.
	h := newHarness(t, DefaultPolicy(), WithClassifier(func(error) Outcome { return Success }))
	refused := errors.New("dial tcp: connection refused")
	for i := 0; i < 20; i++ {
		err := h.call(Mark(refused, Timeout))
		require.ErrorIs(t, err, refused)
		require.Equal(t, refused.Error(), err.Error())
	}
	h.requireState(Open)
	assert.Equal(t, uint64(20), h.b.Counters().Timeouts)
	assert.Nil(t, Mark(nil, Failure))
	o, ok := markOf(Mark(errBoom, Ignored))
	assert.True(t, ok && o == Ignored, "Mark(err, Ignored) carries Ignored")
	o, ok = markOf(Mark(errBoom, Failure))
	assert.True(t, ok && o == Failure, "Mark(err, Failure) carries Failure")
	assert.Equal(t, Ignored, func() Outcome { o, _ := markOf(Mark(Mark(errBoom, Failure), Ignored)); return o }(), "the outermost mark wins")
}

// TestFailurePath_AllocatesNothing: a failing call costs no allocation,
// whatever its outcome, with the default classifier and with errors
// marked by Mark or Ignore. At the onset of an outage every call takes
// this path at full rate; classification used to allocate 40 bytes a
// call (the escaping targets of errors.As in markOf and
// DefaultClassifier).
func TestFailurePath_AllocatesNothing(t *testing.T) {
	p := DefaultPolicy()
	p.MinRequests = 1 << 40 // never trips: every call takes the failure path
	b, err := New("allocs", p)
	require.NoError(t, err)
	ctx := context.Background()
	for name, e := range map[string]error{
		"failure":  errBoom,
		"wrapped":  fmt.Errorf("charge: %w", errBoom),
		"joined":   errors.Join(errBoom, errors.New("second")),
		"timeout":  timeoutErr{},
		"deadline": context.DeadlineExceeded,
		"refused":  connRefused(),
		"ignored":  Ignore(errBoom),
		"marked":   Mark(errBoom, Timeout),
		"refusal":  fmt.Errorf("charge: %w", &OpenError{Name: "payments"}),
	} {
		fn := func(context.Context) error { return e }
		allocs := testing.AllocsPerRun(200, func() { _ = b.Do(ctx, fn) })
		assert.Zero(t, allocs, "%s: allocations per failing Do", name)
	}
	assert.Equal(t, Closed, b.State())
}

// Reading a failed call's error (classify.go): the walk agrees with the
// errors package.

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

func TestClassifyDefault_AgreesWithErrorsIsAndAs(t *testing.T) {
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
		{fmt.Errorf("a: %w", &OpenError{}), Ignored},
		{errors.Join(errBoom, &OpenError{}), Ignored},
		{errors.Join(&OpenError{}, timeoutErr{}), Timeout},
		{errors.Join(isDeadline{}, ErrOpen), Timeout},
		{notTimeout{&OpenError{}}, Ignored},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, classifyDefault(c.err, &refusal), "%v", c.err)
		assert.Equal(t, c.want, classifyByErrors(c.err, &refusal), "%v: the errors package's answer", c.err)
	}
}

func TestMarkOf_FoundWhereErrorsAsFindsIt(t *testing.T) {
	o, ok := markOf(asMarked{Ignore(errBoom)})
	assert.True(t, ok && o == Ignored, "a mark behind an As method")
	o, ok = markOf(errors.Join(errBoom, fmt.Errorf("x: %w", Mark(errBoom, Timeout))))
	assert.True(t, ok && o == Timeout, "a mark in a joined error")
	_, ok = markOf(fmt.Errorf("x: %w", errBoom))
	assert.False(t, ok, "no mark")
	var typedNil *net.OpError
	_, ok = markOf(fmt.Errorf("x: %w", typedNil))
	assert.False(t, ok, "a typed nil carries no mark")
}

// TestMarkOrDefault_OneWalkAgreesWithMarkThenDefault: with the default
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
		asMarked{Ignore(errBoom)},
		Ignore(errBoom),
		Mark(context.DeadlineExceeded, Failure),
		fmt.Errorf("x: %w", Mark(errBoom, Timeout)),
		errors.Join(context.DeadlineExceeded, Ignore(errBoom)),
		errors.Join(timeoutErr{}, fmt.Errorf("y: %w", Mark(errBoom, Success))),
		errors.Join(errBoom, syscall.ECONNRESET),
		errors.Join(isDeadline{}, Ignore(errBoom)),
		Mark(Mark(errBoom, Failure), Ignored),
		fmt.Errorf("x: %w", typedNil),
		errors.Join(context.DeadlineExceeded, typedNil),
		errors.Join(Ignore(errBoom), typedNil),
		errors.Join(typedNil, Ignore(errBoom)),
		Mark(errBoom, Outcome(9)),
		&OpenError{},
		fmt.Errorf("x: %w", ErrOpen),
		errors.Join(&OpenError{}, Mark(errBoom, Failure)),
		errors.Join(Mark(errBoom, Failure), &OpenError{}),
		errors.Join(&OpenError{}, context.DeadlineExceeded),
		errors.Join(&OpenError{}, isDeadline{}),
		// Leaves: no Unwrap, Timeout, Is or As (see leafOutcome).
		ErrOpen,
		errors.New("plain"),
		leafErr{},
		(*leafPtr)(nil),
		syscall.EPIPE,
	} {
		want, ok := markOf(err)
		if !ok {
			want = classifyDefault(err, &refusal)
		}
		assert.Equal(t, want, markOrDefault(err, &refusal), "%#v", err)
	}
}

// leafErr and leafPtr are errors with no method but Error: a value, and a
// pointer that may be a typed nil, whose Error would panic.
type leafErr struct{}

func (leafErr) Error() string { return "leaf" }

type leafPtr struct{ msg string }

func (e *leafPtr) Error() string { return e.msg }
