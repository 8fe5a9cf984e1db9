//go:build race

package breaker

// raceEnabled says the tests run under the race detector, which slows a
// long single-goroutine simulation twentyfold and adds nothing to it: such
// a test runs a part of its cases then.
const raceEnabled = true
