//go:build !race

package testutil

// RaceEnabled says the tests run under the race detector, which slows
// code several times over: tests do not check timing budgets then.
const RaceEnabled = false
