package breaker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outage that has settled stays settled when a policy with a longer
// MaxOpenFor is set afterwards. Scenario: a trip, a close 30 s later, the
// outage settles at 2 m 30 s (MaxOpenFor 2 m); at 3 m a push sets
// MaxOpenFor to 10 m. Regression: settling was read with the policy in
// force at the read, so the push brought the settled outage back (in
// Status, recovering, its length from the first trip), and the next trip
// doubled the cooldown as if it were inside it.
func TestOutage_ASettledOutageStaysSettledWhenMaxOpenForIsRaised(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)
	h.at(3 * time.Minute)
	require.Nil(t, h.b.Status().Outage, "settled at 2m30s")

	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.MaxOpenFor = 10 * time.Minute })))
	assert.Nil(t, h.b.Status().Outage, "a settled outage does not come back")
	h.trip()
	st := h.b.Status()
	require.NotNil(t, st.Outage)
	assert.Equal(t, h.t0.Add(3*time.Minute), st.Outage.Since, "a new outage")
	assert.Equal(t, 1, st.Outage.Trips)
	assert.Equal(t, 30*time.Second, st.Cooldown, "the doubling started over")
}

// A recovering outage settles by the MaxOpenFor in force: a push that
// raises it to 5 m while the breaker is closed in it makes it wait longer,
// and one that lowers it to 1 m once it has been closed 2 m 30 s settles
// it at once.
func TestOutage_ARecoveringOutageSettlesByTheMaxOpenForInForce(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.calls(3, nil)
	h.requireState(Closed)

	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.MaxOpenFor = 5 * time.Minute })))
	h.at(2*time.Minute + 31*time.Second)
	o := h.b.Status().Outage
	require.NotNil(t, o, "raised to 5m while recovering: not settled at 2m31s")
	assert.Equal(t, h.t0.Add(30*time.Second+5*time.Minute), o.SettlesAt)

	h.at(3 * time.Minute)
	require.NoError(t, h.b.SetPolicy(policy(func(p *Policy) { p.MaxOpenFor = time.Minute })))
	assert.Nil(t, h.b.Status().Outage, "closed for 2m30s under a MaxOpenFor of 1m: settled")
}
