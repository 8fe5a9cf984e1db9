//go:build race

package breaker

// raceEnabled says the tests run under the race detector, which makes
// every atomic operation some thirty times slower: the tests that make a
// million calls make fewer then.
const raceEnabled = true
