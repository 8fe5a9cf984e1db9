package breakerotel

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/govkit/breaker"
)

// A downstream that hangs: the probe is admitted and never answers, so it
// times out after one cooldown and the breaker reopens on probe_timeout.
// breaker.outage.probes.failed counts failed probes "timeouts included",
// so the probe that timed out is one.
// Regression: it counted Outage.ProbesFailed, the probes that answered
// and failed, and read 0 for a hanging downstream whose probes timed out.
func TestMetrics_AProbeThatTimesOutIsAFailedProbeOfTheOutage(t *testing.T) {
	f := newFixture(t)
	f.Calls(pricing, 4, errBoom) // trips at 0s, open for 10s
	f.At(10 * time.Second)
	_, done, err := f.Breaker(pricing).Allow(context.Background()) // the probe, which hangs
	require.NoError(t, err)
	defer done(nil)
	f.At(20 * time.Second) // in flight for one cooldown: the probe timed out
	require.ErrorIs(t, f.Call(pricing, nil), breaker.ErrOpen)
	require.Equal(t, 1, f.Breaker(pricing).Status().Outage.Reopens)
	f.expect([]metricdata.Metrics{gauge("breaker.outage.probes.failed", point[int64](1, pricing))}, true)
}
