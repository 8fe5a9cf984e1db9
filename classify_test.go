package breaker

import (
	"context"
	"errors"
	"net"
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
	}
	for _, c := range cases {
		assert.Equal(t, c.want, DefaultClassifier(c.err), "%v", c.err)
	}
	for o, s := range map[Outcome]string{Success: "success", Ignored: "ignored", Failure: "failure", Timeout: "timeout"} {
		assert.Equal(t, s, o.String())
	}
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
