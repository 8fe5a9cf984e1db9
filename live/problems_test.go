package live_test

import (
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
)

// A pushed edit that raises open_for above the max_open_for it inherits
// is refused at open_for, the field the operator edited, in the record
// and its log line; it was refused at max_open_for, a field the document
// does not name ("must be at least open_for (5m0s), got 2m0s").
func TestFollow_ARefusedOpenForEditNamesOpenFor(t *testing.T) {
	logs := &testutil.LogBuffer{}
	h := newFollowHarness(t, breaker.GroupConfig{}, breaker.WithLogger(testutil.TextLogger(logs)))
	c := h.doc("v1", `{"overrides": {"payment.Charge": {"open_for": "5m"}}}`)
	assert.Equal(t, live.Rejected, c.Result)
	assert.Equal(t, []breaker.FieldError{{Field: `overrides["payment.Charge"].open_for`,
		Problem: "5m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 5m0s"}}, c.Problems)
	assert.Contains(t, logs.String(), `"breaker.problems.overrides[\"payment.Charge\"].open_for"="5m0s is above max_open_for (2m0s); lower it, or set max_open_for to at least 5m0s"`)

	// Both set: the problem is at max_open_for, and names open_for.
	c = h.doc("v2", `{"overrides": {"payment.Charge": {"open_for": "5m", "max_open_for": "2m"}}}`)
	assert.Equal(t, []breaker.FieldError{{Field: `overrides["payment.Charge"].max_open_for`,
		Problem: "must be at least open_for (5m0s), got 2m0s"}}, c.Problems)
}
