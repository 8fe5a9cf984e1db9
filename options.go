package breaker

import (
	"log/slog"
	"math/rand/v2"

	"github.com/govkit/breaker/internal/timebase"
)

// Option configures a Breaker at creation: the parts of its behaviour that
// are code rather than numbers.
type Option func(*options)

type options struct {
	tb       timebase.Base
	classify Classifier // nil: DefaultClassifier, with marks read in the same walk
	randf    func() float64
	hooks    []func(Event)
	logger   *slog.Logger
	group    *Group // the group that made the breaker, if any
}

// WithClock makes the breaker read time from c instead of the real clock.
// *clock.Mock from github.com/benbjohnson/clock plugs in directly. If c also
// has a method WithTimeout(context.Context, time.Duration)
// (context.Context, context.CancelFunc), as *clock.Mock does, the deadlines
// of Policy.CallTimeout are made through it, so they follow the same clock.
// A nil c means the real clock.
func WithClock(c Clock) Option { return func(o *options) { o.tb = timebase.New(c) } }

// WithClassifier replaces [DefaultClassifier]. A nil c keeps the default.
func WithClassifier(c Classifier) Option {
	return func(o *options) {
		if c != nil {
			o.classify = c
		}
	}
}

// WithRand sets the source of the cooldown jitter: a function returning a
// number in [0, 1), safe for concurrent use. A value outside [0, 1) (or
// NaN) is treated as 0.5, no jitter, and so is a panic of f: f runs in the
// middle of a transition, under the breaker's lock, where a panic would
// leave the breaker locked or half moved. The default is
// math/rand/v2.Float64; tests inject a fixed value to know each cooldown
// exactly. A nil f keeps the default.
func WithRand(f func() float64) Option {
	return func(o *options) {
		if f != nil {
			o.randf = f
		}
	}
}

// OnTransition adds a hook called with every transition. Hooks run after the
// transition, outside any lock of the breaker, one event at a time and in
// the order of the transitions; each hook sees every event. A hook may call
// back into the breaker, even causing another transition, which is then
// delivered after the current hook returns. A slow hook delays only the
// call that caused the transition. A hook that panics does not hide the
// event from the hooks after it, nor the events after it: they are all
// delivered, and then the first panic goes on up to the call that caused
// the transition (a call, a read of the state, a scrape). A nil h is
// ignored.
//
// OnTransition is for hooks fixed at construction, on one breaker or, given
// to [NewGroup], on every breaker of a group, and cannot be removed; to
// listen to a group for a while, use [Group.Subscribe].
func OnTransition(h func(Event)) Option {
	return func(o *options) {
		if h != nil {
			o.hooks = append(o.hooks, h)
		}
	}
}

// defaultOptions is shared by every breaker created without options: it is
// never changed after creation.
var defaultOptions = buildOptions(nil)

func newOptions(opts []Option) *options {
	if len(opts) == 0 {
		return defaultOptions
	}
	return buildOptions(opts)
}

func buildOptions(opts []Option) *options {
	o := &options{randf: rand.Float64, tb: timebase.New(nil)}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

func (o *options) random() (u float64) {
	defer func() {
		if recover() != nil {
			u = 0.5 // see WithRand
		}
	}()
	u = o.randf()
	if !(u >= 0 && u < 1) {
		return 0.5
	}
	return u
}
