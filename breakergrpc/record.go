package breakergrpc

import (
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
)

// WithRecorder records every guarded call to r, one [calltrace.Record] a
// call, for the replay (package github.com/govkit/breaker/replay):
//
//   - Key is the key of the breaker that guarded the call (see [WithKey]
//     and [WithTarget]).
//   - A call the breaker refused is recorded as refused: it never reached
//     the network. A refusal by the throttle (Policy.Throttle) is recorded
//     as throttled too.
//   - Any other is recorded when its outcome is decided (for a stream,
//     see [StreamClientInterceptor]), with the outcome the interceptor
//     reported to the breaker, whether it was a half-open probe of that
//     breaker, and its duration: from when the breaker was asked to the
//     outcome, the time Policy.CallTimeout and Policy.SlowCall judge.
//
// Times are read on the group's clock ([breaker.Group.Now]), the one its
// breakers judge by, so the recorder's Options.Clock and Options.Classifier
// do not apply; nor does Options.Sample: every call is recorded. Calls
// that no breaker guards (a key of ""), and calls that never reached a
// breaker (the caller's context already done, a key the group refuses),
// are not recorded. Neither is a stream the caller abandons before its
// outcome.
//
// Recording never blocks a call (see [calltrace.Recorder]). A nil r
// records nothing, and costs a call a nil check. Close r once the calls
// it records have ended, or the last records are lost: see "Recording
// traffic" in the package documentation.
func WithRecorder(r *calltrace.Recorder) Option {
	return func(c *config) { c.rec = r }
}

// tracked is the record of one guarded call while it is in flight. A nil
// *tracked records nothing, so the interceptors call its methods without
// asking whether they record.
type tracked struct {
	r   *calltrace.Recorder
	g   *breaker.Group
	rec calltrace.Record
}

// track starts the record of a call to key's breaker, at the group's time
// before the breaker is asked, or returns nil if the interceptors record
// nothing.
func (c *config) track(key string) *tracked {
	if c.rec == nil {
		return nil
	}
	return &tracked{r: c.rec, g: c.group, rec: calltrace.Record{Time: c.group.Now(), Key: key}}
}

// refused records the call as refused by its breaker, with err, the
// refusal, telling the throttle's from an open breaker's.
func (t *tracked) refused(err error) {
	if t == nil {
		return
	}
	t.rec.Refused = true
	t.rec.Throttled = calltrace.IsThrottled(err)
	t.r.Record(t.rec)
}

// admitted notes whether the admitted call is a probe; the mark must be
// read while the call is live.
func (t *tracked) admitted(probe bool) {
	if t != nil {
		t.rec.Probe = probe
	}
}

// ended records the call with outcome o, once it is decided. A clock that
// stepped back makes the call last 0, as the breaker's timeline does.
func (t *tracked) ended(o breaker.Outcome) {
	if t == nil {
		return
	}
	t.rec.Duration = max(t.g.Now().Sub(t.rec.Time), 0)
	t.rec.Outcome = o
	t.r.Record(t.rec)
}
