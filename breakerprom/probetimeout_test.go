package breakerprom

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
)

// A downstream that hangs: the breaker's probe is admitted and never
// answers, so the probe times out after one cooldown and the breaker
// reopens on probe_timeout. breaker_outage_probes_failed counts failed
// probes "timeouts included" (docs/observability.md), and BreakerProbesFailing
// grades on it, so the probe that timed out is a failed probe of the
// outage, in the collector and the handler alike.
// Regression: it counted Outage.ProbesFailed, the probes that answered
// and failed, so a hanging downstream read "0 failed probes" while its
// probes timed out, and BreakerProbesFailing never fired for it.
func TestCollector_AProbeThatTimesOutIsAFailedProbeOfTheOutage(t *testing.T) {
	f := newFixture(t)
	f.Calls(pricing, 4, errBoom) // trips at 0s, open for 10s
	f.At(10 * time.Second)
	_, done, err := f.Breaker(pricing).Allow(context.Background()) // the probe, which hangs
	require.NoError(t, err)
	defer done(nil)
	f.At(20 * time.Second) // in flight for one cooldown: the probe timed out
	require.ErrorIs(t, f.Call(pricing, nil), breaker.ErrOpen)
	o := f.Breaker(pricing).Status().Outage
	require.NotNil(t, o)
	require.Equal(t, 1, o.Reopens, "reopened on the probe timeout")

	f.expect(withHeaders(`
breaker_outage_probes_failed{name="pricing.GetPrice"} 1
`), "breaker_outage_probes_failed")
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	assert.Contains(t, handlerText(t, h), "breaker_outage_probes_failed{name=\"pricing.GetPrice\"} 1\n")
}
