// Package testutil is the test harness that the tests of every module of
// the repository share: the test policies, a group on a mock clock, the
// goroutine and file-descriptor leak checks, the accounting of chaos
// experiments, and the helpers of the commands' tests. Only tests import
// it.
//
// It is an ordinary package of the root module rather than a _test.go
// file so that the nested modules' tests can import it: the internal rule
// goes by import path, and every module of the repository has a path
// under github.com/govkit/breaker. The nested modules build it from the
// root module at the version they require, as they build the root
// package; changing its API means changing their tests in the same commit.
//
// It imports testify, goleak and github.com/benbjohnson/clock, which the
// root module already requires for its own tests, so its go.mod requires
// nothing more. No package that a user imports imports this one (a test
// here checks it), so nothing a user of the root's packages compiles
// changes: they still build on the standard library alone.
//
// The root package's own tests cannot use it: it imports the root
// package, and a package's in-package tests cannot import a package that
// imports it. They keep helpers of their own (helpers_test.go).
package testutil
