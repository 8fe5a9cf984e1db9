//go:build race

package breaker

// raceEnabled says the tests run under the race detector, which makes
// every atomic operation some thirty times slower and a long
// single-goroutine simulation twentyfold: the tests that make a million
// calls, or simulate hours, run a part of their cases then.
const raceEnabled = true
