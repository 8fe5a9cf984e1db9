package candidate

import (
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/shadowhook"
)

// ShadowOf is the breaker that runs b's candidate, for the tests.
func ShadowOf(b *breaker.Breaker) *breaker.Breaker { return shadowhook.Of(b).(*observer).shadow }
