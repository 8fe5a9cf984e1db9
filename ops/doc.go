// Package ops is what an operator runs over a [breaker.Group]: alerts on
// breakers that stay open, graded by how long they have been open, a
// watcher that notifies each rise of an alert's severity, and a snapshot
// of the whole group ready to be served as JSON.
//
// It lives apart from the core so that the core keeps no goroutine and no
// ticker, and because alerting is policy: the thresholds, the grading and
// the message here are one team's choice, built on the core's exported
// API only ([breaker.Group.Range], [breaker.Breaker.Status],
// [breaker.Group.EvictIdle], [breaker.Group.Now]). An operator with other
// needs can write their own in its place.
//
// # Alerts
//
// [Alerts] grades each breaker of a group that has been open (or half-open
// without recovering) for at least the P3 threshold; [Snapshot] adds the
// status of every breaker. Both are plain functions of the group and the
// [Thresholds], with no state.
//
// # Watching
//
// [Watch] starts the one goroutine: every interval it drops the group's
// idle breakers and calls notify for each alert whose severity has risen.
// [Watcher.Close] stops it, and goleak in the tests proves it.
package ops
