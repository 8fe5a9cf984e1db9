//go:build race

package main

// raceEnabled says the tests run under the race detector, which slows
// the replay several times over: timing budgets are not checked then.
const raceEnabled = true
