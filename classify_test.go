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

	"github.com/govkit/breaker/internal/errclass"
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

// The outcomes are internal/errclass's, value for value: Mark and the
// default classifier convert between the two.
func TestOutcome_ValuesAreTheClassifiersOwn(t *testing.T) {
	for o, c := range map[Outcome]errclass.Outcome{
		Success: errclass.Success, Ignored: errclass.Ignored, Failure: errclass.Failure, Timeout: errclass.Timeout,
	} {
		assert.Equal(t, uint8(o), uint8(c), "%v", o)
	}
}
