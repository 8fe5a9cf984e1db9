// Package benchmarks compares the cost of github.com/govkit/breaker with
// other Go circuit breakers under the same workload: a call that returns
// nil through a closed breaker, and a call refused by an open one.
//
// It is a module of its own so that the core module keeps no dependency
// on the breakers it is measured against. The comparisons are benchmarks
// in the _test.go files; run.sh runs them with the core's own benchmarks
// and writes BENCHMARKS.md at the repository root.
package benchmarks
