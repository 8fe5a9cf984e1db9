// Package ops is what an operator runs over a [breaker.Group]: alerts on
// breakers that stay open, graded by how long they have been open, a
// watcher that notifies each rise of an alert's severity, a snapshot of
// the whole group ready to be served as JSON, and a status page of it
// for a browser.
//
// It lives apart from the core so that the core keeps no goroutine and no
// ticker, and because alerting is policy: the thresholds, the grading and
// the message here are one team's choice, built on the core's exported
// API only ([breaker.Group.Range], [breaker.Breaker.Status],
// [breaker.Group.Status], [breaker.Group.EvictIdle], [breaker.Group.Now]).
// An operator with other needs can write their own in its place.
//
// # Alerts
//
// [Alerts] grades each breaker of a group that has been open (or half-open
// without recovering) for at least the P3 threshold; [Snapshot] adds the
// status of every breaker. Both are plain functions of the group and the
// [Thresholds], with no state.
//
// A closed breaker whose policy throttles (breaker.Policy.Throttle) and
// refuses calls is no alert here: the alerts grade an outage by how long it
// has lasted, and throttling is not a state, with no start to grade from.
// The status page and the snapshot show it (the refusal probability and
// the calls throttled), and the Prometheus rule BreakerThrottling of
// package breakerprom, which has the history, alerts on a breaker that
// throttles most of its calls for minutes.
//
// # Watching
//
// [Watch] starts the one goroutine: every interval it drops the group's
// idle breakers and calls notify for each alert whose severity has risen.
// Each outage has its own alert history: a breaker that closes and trips
// again between two rounds is notified anew, from the first severity of
// its new outage. [Watcher.Close] stops it, and goleak in the tests
// proves it.
//
// # Status page
//
// [NewStatusPage] returns an [net/http.Handler] that renders the group as
// one HTML page: every breaker with its state and for how long, its
// window against the policy's threshold, its next probe, its latest
// transitions with their reasons, a closed breaker's throttling ("Throttling
// 86%", with the calls throttled), and the alerts by severity. The page
// is self-contained (no script, no external asset) and reloads itself:
//
//	page, err := ops.NewStatusPage(group, ops.StatusConfig{})
//	if err != nil {
//		return err
//	}
//	defer page.Close()
//	mux.Handle("GET /status", page)
package ops
