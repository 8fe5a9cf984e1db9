package breakerhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Retry-After is the time until probes, in whole seconds rounded up, never
// below 1; anything that is not a refusal writes nothing.
func TestWriteOpenError(t *testing.T) {
	f := newFixture(t, testutil.Policy())
	b, err := f.group.Get("inventory.internal")
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		_ = b.Do(context.Background(), func(context.Context) error { return errors.New("boom") })
	}
	require.Equal(t, breaker.Open, b.State())
	refusal := b.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refusal, breaker.ErrOpen)

	write := func(err error) (*httptest.ResponseRecorder, bool) {
		rec := httptest.NewRecorder()
		return rec, WriteOpenError(rec, err)
	}
	steps := []struct {
		advance time.Duration
		err     error
		want    string
	}{
		{0, refusal, "10"}, // 10s left
		{0, &url.Error{Op: "Get", URL: "http://inventory.internal/", Err: refusal}, "10"}, // as http.Client returns it
		{800 * time.Millisecond, refusal, "10"},                                           // 9.2s left: rounded up
		{time.Second, refusal, "9"},                                                       // 8.2s left
		{7*time.Second + 700*time.Millisecond, refusal, "1"},                              // 0.5s left
		{time.Second, refusal, "1"},                                                       // cooldown over: probes may go
		{0, breaker.ErrOpen, "1"},                                                         // no details
		{0, fmt.Errorf("x: %w", breaker.ErrOpen), "1"},
	}
	for i, s := range steps {
		f.clk.Add(s.advance)
		rec, ok := write(s.err)
		require.True(t, ok, "step %d", i)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "step %d", i)
		assert.Equal(t, s.want, rec.Header().Get("Retry-After"), "step %d", i)
		assert.NotContains(t, rec.Body.String(), "inventory", "step %d: internal name leaked", i)
	}

	for _, err := range []error{nil, errors.New("boom"), context.DeadlineExceeded} {
		rec, ok := write(err)
		assert.False(t, ok, "%v", err)
		assert.Equal(t, http.StatusOK, rec.Code, "%v: wrote a status", err)
		assert.Empty(t, rec.Header(), "%v: wrote headers", err)
		assert.Zero(t, rec.Body.Len(), "%v: wrote a body", err)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0: 1, -time.Second: 1, time.Nanosecond: 1, time.Second: 1,
		time.Second + 1: 2, 30 * time.Second: 30, 119*time.Second + 1: 120,
	} {
		assert.Equal(t, want, retryAfterSeconds(d), "%v", d)
	}
}
