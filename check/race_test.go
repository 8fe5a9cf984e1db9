//go:build race

package check

// raceEnabled says the tests run under the race detector, which makes the
// simulations of the real breaker many times slower: the property tests
// draw fewer cases then.
const raceEnabled = true
