package breakerhttp

import (
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
)

// WithRecorder records every guarded request to r, one [calltrace.Record]
// a request, for the replay (package github.com/govkit/breaker/replay):
//
//   - Key is the key of the breaker that guarded the request (see
//     [WithKey] and [WithRequestKey]).
//   - A request the breaker refused is recorded as refused: the base was
//     not called. A refusal by the throttle (Policy.Throttle) is recorded
//     as throttled too.
//   - Any other is recorded when its exchange ends (see [Transport]),
//     with the outcome the Transport reported to the breaker, whether it
//     was a half-open probe of that breaker, and its duration: from when
//     the breaker was asked to the end of the exchange, body included,
//     the time Policy.CallTimeout and Policy.SlowCall judge.
//
// Times are read on the group's clock ([breaker.Group.Now]), the one its
// breakers judge by, so the recorder's Options.Clock and Options.Classifier
// do not apply; nor does Options.Sample: every request is recorded.
// Requests that no breaker guards (a key of ""), and requests that never
// reached a breaker (the caller's context already done, a key the group
// refuses), are not recorded. Neither is a request whose response body is
// never read to the end nor closed: its exchange never ends.
//
// Recording never blocks a request (see [calltrace.Recorder]). A nil r
// records nothing, and costs a request a nil check. Close r once the
// requests it records have ended, or the last records are lost: see
// "Recording traffic" in the package documentation.
func WithRecorder(r *calltrace.Recorder) Option {
	return func(t *Transport) { t.rec = r }
}

// tracked is the record of one guarded request while it is in flight. A
// nil *tracked records nothing, so the Transport calls its methods without
// asking whether it records.
type tracked struct {
	r   *calltrace.Recorder
	g   *breaker.Group
	rec calltrace.Record
}

// track starts the record of a request to key's breaker, at the group's
// time before the breaker is asked, or returns nil if the Transport
// records nothing.
func (t *Transport) track(key string) *tracked {
	if t.rec == nil {
		return nil
	}
	return &tracked{r: t.rec, g: t.group, rec: calltrace.Record{Time: t.group.Now(), Key: key}}
}

// refused records the request as refused by its breaker, with err, the
// refusal, telling the throttle's from an open breaker's.
func (c *tracked) refused(err error) {
	if c == nil {
		return
	}
	c.rec.Refused = true
	c.rec.Throttled = calltrace.IsThrottled(err)
	c.r.Record(c.rec)
}

// admitted notes whether the admitted request is a probe; the mark must be
// read while the call is live.
func (c *tracked) admitted(probe bool) {
	if c != nil {
		c.rec.Probe = probe
	}
}

// ended records the request with outcome o, once its exchange has ended. A
// clock that stepped back makes it last 0, as the breaker's timeline does.
func (c *tracked) ended(o breaker.Outcome) {
	if c == nil {
		return
	}
	c.rec.Duration = max(c.g.Now().Sub(c.rec.Time), 0)
	c.rec.Outcome = o
	c.r.Record(c.rec)
}
