package breaker

import "time"

// Clock is the breaker's source of time. Every time-dependent decision
// (which bucket a call lands in, whether a cooldown has ended, whether a
// target is still warming up) reads it, so a test can drive a breaker through
// all its states without sleeping.
//
// *clock.Mock from github.com/benbjohnson/clock satisfies Clock directly, as
// does any type with a Now method. A Clock that also has a WithTimeout
// method, as *clock.Mock does, times Policy.CallTimeout: the call's context
// expires when that clock's timer fires, but its Deadline reads in real
// time, since real I/O (grpc-go, net/http) compares it with the real clock.
//
// The breaker's own time never goes backwards. It follows the clock's
// readings at the clock's rate, but a reading earlier than one the breaker
// has already seen (a clock that stepped back, such as a wall clock without
// a monotonic reading being set, or a mock set to an earlier time) is taken
// as a pause of zero length: the breaker's time stays where it was, and
// later readings carry on from there. So a step back neither freezes the
// window nor stretches a cooldown past its length. A reading more than
// about 146 years from the previous ones (a clock that read the zero time
// before it was set) is taken as a pause too. Every duration (buckets,
// window, cooldowns, warmup, call durations) is measured on the breaker's
// time, and the times it reports (Event.Time, OpenError.Since and Until,
// OpenSince) are the clock's first reading plus the breaker's time since
// then: the clock's own readings for as long as it has not stepped back.
//
// A nil Clock is the real clock, which never steps back; the breaker reads
// it through the monotonic clock at the cost of one time.Since.
type Clock interface {
	Now() time.Time
}
