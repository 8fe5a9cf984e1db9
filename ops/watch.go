package ops

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker"
)

// WatchConfig configures a [Watcher].
type WatchConfig struct {
	// Interval is the time between two rounds of the watcher. It must be
	// positive.
	Interval time.Duration `json:"interval"`
	// Thresholds grade the alerts. The zero value means
	// [DefaultThresholds].
	Thresholds Thresholds `json:"thresholds"`
	// Tick, when set, is the source of the ticks that drive the watcher,
	// in place of a [time.Ticker]. Watch calls it once, with Interval,
	// before the watcher starts; the watcher makes one round per value
	// received on ticks (the value itself is not used: every decision
	// reads the group's clock), and calls stop when it returns. A closed
	// ticks channel ends the rounds; Close still stops the watcher. Tick
	// is how a test drives the watcher with the clock it gave
	// [breaker.WithClock]; JSON leaves it out. With a *clock.Mock from
	// github.com/benbjohnson/clock:
	//
	//	Tick: func(d time.Duration) (<-chan time.Time, func()) {
	//		t := mock.Ticker(d)
	//		return t.C, t.Stop
	//	},
	Tick func(interval time.Duration) (ticks <-chan time.Time, stop func()) `json:"-"`
	// Logger receives the panics the watcher recovers. Nil means
	// slog.Default().
	Logger *slog.Logger `json:"-"`
}

// A Watcher is the goroutine started by [Watch]. Its only method is
// Close.
//
// A Watcher is safe for concurrent use by multiple goroutines.
type Watcher struct {
	g      *breaker.Group
	th     Thresholds
	notify func(Alert)
	log    *slog.Logger

	once sync.Once     // closes stop
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the goroutine returns
	gid  atomic.Uint64 // the goroutine's id, so that Close can tell it calls from notify
}

// Watch starts a goroutine that, every cfg.Interval, drops the group's
// idle breakers (see [breaker.Group.EvictIdle]) and calls notify for each
// alert whose severity has risen since it was last notified.
//
// Every outage ([breaker.Outage]: from a breaker's trip, or the end of a
// forced open, until it has stayed closed for Policy.MaxOpenFor) is
// notified on its own, named by its key and its start ([Alert.Since]),
// which its closes do not change: at the severity a round first finds it
// at, then at each higher one, once each. A breaker that closes and trips
// again before its outage has settled is the same outage, and is not
// notified again at a severity already notified. An outage that begins
// after the last one settled, or on a breaker dropped from the group and
// made again under its key (a restart of the process too), is a new one,
// notified from its first severity, even when its breaker was notified
// at P1 just before. So is the outage of a breaker released from a
// forced open: the release starts its clock again ([breaker.Outage]). An outage keeps what was notified of it while it
// lasts, through a spell in another mode too; its end (it settles) is
// not notified.
//
// notify runs on the watcher's goroutine, one call at a time, and may
// call any method of the group or of the watcher, [Watcher.Close]
// included. A notify that blocks holds up the rounds after it (a
// time.Ticker drops the ticks missed meanwhile), and Close waits for it
// to return.
//
// Watch returns an error if g or notify is nil, the interval is not
// positive, the thresholds are invalid, or cfg.Tick returns a nil
// channel or a nil stop function.
//
// Each watcher is on its own: two watchers of one group (with different
// thresholds, say) each notify every rise they see.
//
// The watcher survives panics: one raised by notify is recovered and
// logged to cfg.Logger, and the round notifies its other alerts; the
// alert whose notify panicked is not notified again at its severity.
// One raised by a subscriber, a hook or a classifier while the watcher
// looks at the breakers, or by the tick source's stop function, is
// recovered and logged too, and the watcher goes on at the next
// interval.
func Watch(g *breaker.Group, cfg WatchConfig, notify func(Alert)) (*Watcher, error) {
	switch {
	case g == nil:
		return nil, errors.New("ops: nil group")
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("ops: WatchConfig.Interval must be positive, got %v", cfg.Interval)
	case notify == nil:
		return nil, errors.New("ops: nil notify function")
	}
	if err := cfg.Thresholds.Validate(); err != nil {
		return nil, err
	}
	w := &Watcher{
		g: g, th: cfg.Thresholds.orDefault(), notify: notify, log: cfg.Logger,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	// The ticks start here, on the caller's goroutine, not in the
	// watcher's: a mock ticker then counts its first interval from the
	// mock's time at Watch, whatever the test does to the mock before the
	// goroutine runs.
	ticks, stop, err := w.ticks(cfg)
	if err != nil {
		return nil, err
	}
	go w.loop(ticks, stop)
	return w, nil
}

// ticks starts the watcher's tick source.
func (w *Watcher) ticks(cfg WatchConfig) (<-chan time.Time, func(), error) {
	if cfg.Tick == nil {
		t := time.NewTicker(cfg.Interval)
		return t.C, t.Stop, nil
	}
	ticks, stop := cfg.Tick(cfg.Interval)
	switch {
	case ticks == nil && stop == nil:
		return nil, nil, errors.New("ops: WatchConfig.Tick returned a nil channel and a nil stop function")
	case ticks == nil:
		w.stopTicks(stop)
		return nil, nil, errors.New("ops: WatchConfig.Tick returned a nil channel")
	case stop == nil:
		return nil, nil, errors.New("ops: WatchConfig.Tick returned a nil stop function")
	}
	return ticks, stop, nil
}

func (w *Watcher) loop(ticks <-chan time.Time, stop func()) {
	defer close(w.done)
	defer w.stopTicks(stop)
	w.gid.Store(goid())
	notified := map[outage]Severity{}
	for {
		select {
		case <-w.stop:
			return
		case _, ok := <-ticks:
			if !ok {
				ticks = nil // closed: no more rounds, and no busy loop
				continue
			}
		}
		if !w.round(notified) {
			return
		}
	}
}

// stopTicks stops a tick source. A stop function from WatchConfig.Tick is
// user code, and a panic from it is recovered and logged like one from
// notify: on the watcher's goroutine, which the package started, nothing
// else would recover it and the process would end.
func (w *Watcher) stopTicks(stop func()) {
	defer func() {
		if v := recover(); v != nil {
			w.reportPanic("ops: WatchConfig.Tick's stop function panicked", "", v)
		}
	}()
	stop()
}

// An outage is one outage of a breaker ([breaker.Outage]), named by its
// key and when it began on the group's clock, to the nanosecond. Its start
// stays the same through its closes and trips until it settles. The key
// alone is not enough: an outage may settle and another begin, or the
// breaker be dropped and made again under its key, between two rounds;
// the new outage's counts then start from zero. The start tells outages
// apart: the group's time never goes back, and an outage alerts only once
// it has lasted the P3 threshold, so a later outage of the key began
// after the round that saw this one alert, at a later instant.
type outage struct {
	key  string
	sec  int64 // since.Unix(), defined for every time, unlike UnixNano
	nsec int32
}

func outageOf(key string, since time.Time) outage {
	return outage{key: key, sec: since.Unix(), nsec: int32(since.Nanosecond())}
}

// round is one round of the watcher: it notifies every outage that has
// reached a severity above the one last notified for it, and forgets the
// outages that have settled or whose breaker is gone. It reports false when the watcher was stopped
// during the round (by notify calling Close, say).
func (w *Watcher) round(notified map[outage]Severity) (goOn bool) {
	defer func() {
		if v := recover(); v != nil {
			// A subscriber, hook or classifier, set off as the round
			// looked at the breakers. What notified holds stays true;
			// the next round goes on from it.
			w.reportPanic("ops: watcher recovered a panic", "", v)
			goOn = true
		}
	}()
	w.g.EvictIdle()
	// An outage is remembered while it lasts, in any mode and at any
	// severity, not only while it alerts: one that is shadowed for a
	// while and comes back, still the same outage, is not notified again.
	live := make(map[outage]bool, len(notified))
	alerts := scan(w.g, w.th, func(key string, since time.Time) {
		if o := outageOf(key, since); notified[o] != SeverityNone {
			live[o] = true
		}
	})
	for _, a := range alerts {
		o := outageOf(a.Name, a.Since)
		if a.Severity <= notified[o] {
			continue
		}
		select {
		case <-w.stop:
			return false
		default:
		}
		notified[o] = a.Severity // at most once, even if notify panics
		live[o] = true
		w.notifyOne(a)
	}
	for o := range notified {
		if !live[o] {
			delete(notified, o) // settled, or gone from the group
		}
	}
	return true
}

// notifyOne calls notify, and recovers and logs a panic from it, so that
// the round's other alerts are notified all the same.
func (w *Watcher) notifyOne(a Alert) {
	defer func() {
		if v := recover(); v != nil {
			w.reportPanic("ops: watcher recovered a panic", a.Name, v)
		}
	}()
	w.notify(a)
}

// reportPanic logs a panic recovered from user code. Run from the
// deferred function, debug.Stack still shows where the panic began.
func (w *Watcher) reportPanic(msg, name string, v any) {
	args := []any{"panic", v, "stack", string(debug.Stack())}
	if name != "" {
		args = append([]any{slog.Group("breaker", slog.String("name", name))}, args...)
	}
	w.log.Error(msg, args...)
}

// goid returns the id of the calling goroutine, read from the header of
// its stack trace ("goroutine 18 [running]:"). Go hides goroutine ids on
// purpose, and nothing else may depend on this one: it only lets Close
// tell a call from the watcher's own notify, which must not wait for the
// watcher to return, from any other, which must.
func goid() uint64 {
	var buf [40]byte
	n := runtime.Stack(buf[:], false)
	s, _ := strings.CutPrefix(string(buf[:n]), "goroutine ")
	var id uint64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		id = id*10 + uint64(s[i]-'0')
	}
	return id
}

// Close stops the watcher and waits for it to return; called from the
// watcher's notify, it stops the watcher and returns at once (the watcher
// returns when notify does, without notifying again). Every Close waits,
// not only the first. The group and its breakers keep working. Close is
// safe to call more than once, and on a nil *Watcher does nothing.
func (w *Watcher) Close() error {
	if w == nil {
		return nil
	}
	w.once.Do(func() { close(w.stop) })
	if w.gid.Load() != goid() {
		<-w.done
	}
	return nil
}
