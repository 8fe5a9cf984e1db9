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
	overflow bool   // the breaker is a group's overflow breaker: forced closed for good
	obs      []Observer
}

// WithClock makes the breaker read time from c (nil: the real clock), such
// as a *clock.Mock of github.com/benbjohnson/clock. If c has a WithTimeout
// method as *clock.Mock does, the breaker's deadlines are made through it.
func WithClock(c Clock) Option { return func(o *options) { o.tb = timebase.New(c) } }

// WithClassifier replaces [DefaultClassifier]. A nil c keeps the default.
func WithClassifier(c Classifier) Option {
	return func(o *options) {
		if c != nil {
			o.classify = c
		}
	}
}

// WithRand sets the source of the cooldown jitter and of Policy.Throttle's
// draws (default math/rand/v2.Float64; nil keeps it): a function returning
// a number in [0, 1), safe for concurrent use. Another value, or a panic,
// counts as 0.5.
func WithRand(f func() float64) Option {
	return func(o *options) {
		if f != nil {
			o.randf = f
		}
	}
}

// OnTransition adds a hook called with every transition, after it, outside
// any lock, one event at a time in order. A hook may call back into the
// breaker; a slow one delays only the call that caused the transition. If
// hooks panic, every event is still delivered, then the first panic goes
// on up to that call. A nil h is ignored. Given to [NewGroup] it applies
// to every breaker of the group; [Group.Subscribe] can be removed.
func OnTransition(h func(Event)) Option {
	return func(o *options) {
		if h != nil {
			o.hooks = append(o.hooks, h)
		}
	}
}

// WithObserver adds o to the observers of every call the breaker makes
// (see [Observer]); given to [NewGroup], to every breaker of the group. A
// nil o is ignored.
func WithObserver(o Observer) Option {
	return func(opt *options) {
		if o != nil {
			opt.obs = append(opt.obs, o)
		}
	}
}

// defaultOptions is shared by every breaker created without options.
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
