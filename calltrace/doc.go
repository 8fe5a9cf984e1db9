// Package calltrace records the calls a service makes through its breakers,
// one JSON object a line, so that a candidate policy can be replayed
// against what production really saw (see the command breaker-replay and
// package github.com/govkit/breaker/replay).
//
// # The format
//
// A trace is JSON lines, one call a line:
//
//	{"t":1764504000123456,"k":"inventory.GetStock","d":1523,"o":"success"}
//	{"t":1764504000124090,"k":"inventory.GetStock","d":600012,"o":"timeout","probe":true}
//	{"t":1764504000125001,"k":"inventory.GetStock","refused":true}
//	{"t":1764504000125307,"k":"inventory.GetStock","refused":true,"throttled":true}
//
//	t          when the call was made: Unix time in microseconds, from 0
//	           to MaxTime (required)
//	k          the breaker's key or name (required, not empty)
//	d          how long the call took, in microseconds, from 0 to 2^62 ns
//	           (required unless refused)
//	o          the outcome the breaker counted: "success", "failure",
//	           "timeout" or "ignored" (required unless refused)
//	probe      true if the call was a half-open probe (default false)
//	refused    true if the breaker refused the call: it never ran, so it
//	           has no "d" and no "o" (default false)
//	throttled  with refused: true if the refusal was the throttle's
//	           (Policy.Throttle), the breaker closed, rather than an open
//	           breaker's (default false). A trace written before the field
//	           existed reads every refusal as an open breaker's
//
// A trace may also hold what a replay needs to reproduce the recorded
// breakers' refusals:
//
//	{"t":1764504000000000,"origin":true}
//	{"t":1764504000125001,"k":"inventory.GetStock","to":"open","cooldown":33000000,"doublings":0}
//
//	origin     the instant the breakers' time starts from (t): their window
//	           buckets are aligned on it. A Recorder writes it first, when it
//	           knows it (Options.Origin)
//	to         a transition of the breaker k at t: "closed", "open" or
//	           "half_open"
//	cooldown   for "open": how long it stays open, in microseconds (the
//	           jittered cooldown the breaker drew)
//	doublings  for "open": how many times in a row the cooldown doubled
//
// [Decoder.Next] returns the calls; [Decoder.Transitions] and
// [Decoder.Origin] hold the rest.
//
// Lines are written when a call ends, so they are ordered by end rather
// than by start, and a clock stepped back writes earlier times after later
// ones; readers sort them. A line is at most MaxLine bytes. [Decoder]
// reads a trace strictly: an unknown field, a missing or malformed one, a
// value out of range, a refused call with an outcome, or a throttled call
// that is not refused is an error
// naming the line and the field and quoting the value (*[LineError]).
//
// # Recording
//
// A [Recorder] writes records on a goroutine of its own through a bounded
// buffer: a call never waits for the writer; when the buffer is full the
// record is dropped and counted ([Recorder.Dropped]). [Recorder.Do] wraps
// [breaker.Group.Do] and records the call; a nil *Recorder records nothing
// and adds nothing to the call but a nil check, so a service can leave the
// hook in place and switch recording on with a flag. Recording can be
// complete or sampled ([Options.Sample]); sampling keeps every n-th call
// rather than a random one, so two recordings of the same traffic agree.
// [Recorder.Close] flushes what is buffered and stops the goroutine.
// [Recorder.Do] also records the transitions of the group it is given;
// [Recorder.Watch] does so for a group whose calls are recorded some other
// way, and [Recorder.RecordTransition] is the hook for a single breaker.
//
// Whatever its clock does, a Recorder writes only lines a Decoder reads. A
// call during which the clock stepped back, or jumped more than 146 years
// ahead, lasted 0, as on the breaker's own timeline; a time before 1970 or
// after MaxTime is written as the nearer of the two; a record the format
// cannot hold (an empty key, a line over MaxLine) is dropped and counted.
// Times need not be in order: readers sort them.
package calltrace
