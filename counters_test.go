package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSince_SpansReopensUntilClose(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	_, ok := h.b.OpenSince()
	assert.False(t, ok)
	h.at(time.Second)
	h.trip()
	h.at(31 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	since, ok := h.b.OpenSince()
	require.True(t, ok)
	assert.Equal(t, h.t0.Add(time.Second), since)
}

func TestCounters_OpenTimeCoversEveryOutageIncludingTheCurrentOne(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(3, nil) // closed after 30 s open
	assert.Equal(t, 30*time.Second, h.b.Counters().OpenTime)
	h.at(10 * time.Minute)
	h.trip()
	h.at(10*time.Minute + 12*time.Second)
	assert.Equal(t, 42*time.Second, h.b.Counters().OpenTime, "the current outage counts up to now")
	assert.Equal(t, uint64(2), h.b.Counters().Opens)
}
