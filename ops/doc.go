// Package ops is what an operator runs over a [breaker.Group]: alerts on
// outages, graded by how long each has lasted, a watcher that notifies
// each rise of an alert's severity, a snapshot of
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
// [Alerts] grades each outage of a group's breakers ([breaker.Outage]:
// from a trip until the breaker has stayed closed for Policy.MaxOpenFor,
// its closes and trips in between included) that has lasted at least the
// P3 threshold; a breaker closed in an outage that has not settled yet is
// still its alert, marked Recovering. [Snapshot] adds the status of every
// breaker. Both are plain functions of the group and the [Thresholds],
// with no state.
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
// Each outage has its own alert history, named by its key and its start:
// a breaker that closes and trips again before its outage has settled is
// the same outage, not notified again at a severity already notified; an
// outage that begins after the last one settled, or on a breaker made
// again under its key, is notified from its first severity.
// [Watcher.Close] stops it, and goleak in the tests proves it.
//
// # Status page
//
// [NewStatusPage] returns an [net/http.Handler] that renders the group as
// one HTML page: every breaker with its state, since when its outage has
// failed and for how long (a closed one still in its outage as recovering,
// with when it settles), the evidence of the trip, its window against the
// policy's threshold, its next probe, its latest transitions with their
// reasons, a closed breaker's throttling ("Throttling 86%", with the calls
// throttled), the alerts by severity, and a banner while the policy
// source is gone or unreadable. The page
// is self-contained (no script, no external asset) and reloads itself:
//
//	page, err := ops.NewStatusPage(group, ops.StatusConfig{})
//	if err != nil {
//		return err
//	}
//	defer page.Close()
//	mux.Handle("GET /status", page)
package ops
