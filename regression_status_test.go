package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario: a status page and a metrics scrape read the Status of each of
// 10,000 breakers, none of them timed and none with a candidate policy.
// Status declared the latency and the candidate it might point to in the
// scope whose address it took, so both moved to the heap on every call:
// two allocations per breaker for pointers that stayed nil, and a
// snapshot of the group that allocated in proportion to its size.
func TestRegression_StatusAllocatesOnlyWhatItPointsTo(t *testing.T) {
	plain, err := New("status.Plain", DefaultPolicy())
	require.NoError(t, err)
	_ = plain.Do(context.Background(), func(context.Context) error { return nil })
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = plain.Status() }), "untimed, no candidate")

	// A timed breaker pays for the latency it reports, and no more.
	timed, err := New("status.Timed", policy(func(p *Policy) { p.Timeout = time.Second }))
	require.NoError(t, err)
	s := timed.Status()
	require.NotNil(t, s.Latency)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = timed.Status() }), "timed")
}
