package candidate

import "github.com/govkit/breaker"

// ShadowOf is the breaker that runs b's candidate, for the tests.
func ShadowOf(b *breaker.Breaker) *breaker.Breaker { return b.Candidate().Shadow() }
