package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is one line of a state-machine table: at t0+at, make the calls, then
// expect the state.
type step struct {
	at    time.Duration
	ok    int // calls returning nil
	fail  int // calls returning errBoom
	want  State
	label string
}

// runSteps is the table runner of the state-machine tests.
func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for i, s := range steps {
		h.at(s.at)
		h.calls(s.ok, nil)
		h.calls(s.fail, errBoom)
		require.Equal(t, s.want, h.b.State(), "step %d (%s) at t0+%v", i, s.label, s.at)
	}
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

func TestStrings(t *testing.T) {
	assert.Equal(t, "closed", Closed.String())
	assert.Equal(t, "open", Open.String())
	assert.Equal(t, "half_open", HalfOpen.String())
	assert.Equal(t, "state(7)", State(7).String())
	txt, _ := HalfOpen.MarshalText()
	assert.Equal(t, "half_open", string(txt))
	assert.Equal(t, "shadow", ModeShadow.String())
	assert.Equal(t, "mode(9)", Mode(9).String())
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
	assert.True(t, IsIgnored(Mark(errBoom, Ignored)))
	assert.False(t, IsIgnored(Mark(errBoom, Failure)))
	assert.Equal(t, Ignored, func() Outcome { o, _ := markOf(Mark(Mark(errBoom, Failure), Ignored)); return o }(), "the outermost mark wins")
}

// SPEC §7: a clock that goes backwards is harmless: no panic, no lost
// count, no early end of a cooldown.
func TestClock_GoingBackwardsIsHarmless(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(time.Hour)
	h.calls(10, nil)
	h.clk.Set(h.t0.Add(time.Minute)) // 59 minutes back
	h.calls(9, errBoom)
	assert.Equal(t, Snapshot{Counted: 19, Failures: 9}, h.b.Snapshot(), "counted in the newest bucket")
	h.calls(1, errBoom)
	h.requireState(Open)
	h.clk.Set(h.t0) // further back: the cooldown must not end
	require.ErrorIs(t, h.call(nil), ErrOpen)
	h.clk.Set(h.t0.Add(time.Minute + 30*time.Second))
	h.requireState(HalfOpen)
}
