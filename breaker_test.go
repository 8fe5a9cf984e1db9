package breaker

import (
	"testing"
	"time"

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
