package breaker

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Severity grades an alert on a breaker that stays open. The grades and
// their defaults come from a production team's incident history: 80% of
// downstream faults healed within ten minutes, and those still open at
// thirty needed people. Paging at the first minute paged twenty times a
// week for three real faults, and the fatigue slowed the response to the
// next two real ones.
type Severity uint8

const (
	SeverityNone Severity = iota
	SeverityP3            // record; do not page
	SeverityP2            // page the on-call engineer
	SeverityP1            // escalate; bring in the downstream's team
)

func (s Severity) String() string {
	switch s {
	case SeverityNone:
		return "none"
	case SeverityP3:
		return "P3"
	case SeverityP2:
		return "P2"
	case SeverityP1:
		return "P1"
	}
	return "severity(" + itoa(uint64(s)) + ")"
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	for c := SeverityNone; c <= SeverityP1; c++ {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown severity %q", b)
}

// AlertThresholds are the open durations at which an open breaker becomes
// an alert of each severity. Each must be positive and at least the one
// before.
type AlertThresholds struct {
	P3 time.Duration `json:"p3"`
	P2 time.Duration `json:"p2"`
	P1 time.Duration `json:"p1"`
}

// DefaultAlertThresholds: P3 after one minute open, P2 after ten, P1 after
// thirty.
var DefaultAlertThresholds = AlertThresholds{P3: time.Minute, P2: 10 * time.Minute, P1: 30 * time.Minute}

func (t AlertThresholds) validate() error {
	if t.P3 <= 0 || t.P2 < t.P3 || t.P1 < t.P2 {
		return fmt.Errorf("breaker: alert thresholds must be positive and in order P3 <= P2 <= P1, got P3=%v P2=%v P1=%v", t.P3, t.P2, t.P1)
	}
	return nil
}

// Severity returns the severity of a breaker open for d.
func (t AlertThresholds) Severity(d time.Duration) Severity {
	switch {
	case d >= t.P1:
		return SeverityP1
	case d >= t.P2:
		return SeverityP2
	case d >= t.P3:
		return SeverityP3
	}
	return SeverityNone
}

// Alert is a breaker that has been open (or half-open without recovering)
// for at least the P3 threshold. It says which downstream to check and
// what the window held when the breaker tripped, so the person it reaches
// can act without opening a dashboard first.
type Alert struct {
	Severity Severity `json:"severity"`
	// Name is the breaker's key; Method and Target are its parts before
	// and after "@" (Target is empty for a per-method key).
	Name   string `json:"name"`
	Method string `json:"method"`
	Target string `json:"target,omitempty"`
	State  State  `json:"state"`
	// Since is when the outage began; OpenDuration how long ago that was
	// (elapsed time, not a cooldown: that is Policy.OpenFor).
	Since        time.Time     `json:"since"`
	OpenDuration time.Duration `json:"open_duration_ns"`
	// Reason and Snapshot are the trip rule and the window that tripped
	// the breaker.
	Reason   Reason   `json:"reason"`
	Snapshot Snapshot `json:"snapshot"`
	Message  string   `json:"message"`
}

// Alerts returns the group's breakers that have been open for at least the
// P3 threshold, most severe first, then by name. Breakers forced open, and
// shadow breakers, are not alerts. The open duration of a breaker released
// from a forced open counts from the release, not from the start of the
// forced open (see [Breaker.OpenSince]).
func (g *Group) Alerts() []Alert {
	now := g.opt.tb.now()
	at := g.opt.tb.time(now)
	var out []Alert
	g.Range(func(key string, b *Breaker) bool {
		if a, ok := b.alert(at, g.cfg.Alerts); ok {
			out = append(out, a)
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Severity != out[j].Severity {
			return out[i].Severity > out[j].Severity
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// endForcedOpenLocked starts the outage afresh when a forced open ends. A forced
// open is an operator's decision, not a failing downstream: measured from
// its start, a breaker released after a two-hour maintenance window would
// be a P1 the moment its first probe went out. From the release on, the
// breaker is judged like any other, and if its probes fail the alert
// counts from the release. The time spent open so far, forced time
// included, stays in Counters.OpenTime. The open error, which the
// half-open episode's refusals copy, says the same. b.mu must be held.
func (b *Breaker) endForcedOpenLocked(now int64) {
	if b.outageStart() != never {
		b.histLocked().openTotal += max(0, now-b.outageStart())
	}
	b.setOutageStart(now)
	if e := b.openErr.Load(); e != nil {
		ne := *e
		ne.Since = b.opt.tb.time(now)
		b.openErr.Store(&ne)
	}
}

func (b *Breaker) alert(now time.Time, th AlertThresholds) (Alert, bool) {
	st := b.State()
	if st == Closed || b.Mode() != ModeAuto {
		return Alert{}, false
	}
	since, ok := b.OpenSince()
	if !ok {
		return Alert{}, false
	}
	open := now.Sub(since)
	sev := th.Severity(open)
	if sev == SeverityNone {
		return Alert{}, false
	}
	a := Alert{Severity: sev, Name: b.name, State: st, Since: since, OpenDuration: open}
	a.Method, a.Target, _ = strings.Cut(b.name, "@")
	if e := b.openErr.Load(); e != nil {
		a.Reason, a.Snapshot = e.Reason, e.Snapshot
	}
	a.Message = alertMessage(a)
	return a, true
}

func alertMessage(a Alert) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: breaker %s has been open for %s", a.Severity, a.Name, a.OpenDuration.Round(time.Second))
	if a.Snapshot.Counted > 0 {
		fmt.Fprintf(&sb, " (%s: %d of %d calls failed, %d of them timeouts)",
			a.Reason, a.Snapshot.Failures, a.Snapshot.Counted, a.Snapshot.Timeouts)
	} else if a.Reason != "" {
		fmt.Fprintf(&sb, " (%s)", a.Reason)
	}
	// The breaker only stops the bleeding; someone has to heal the
	// downstream, and the alert says which one.
	sb.WriteString("; check the health of ")
	sb.WriteString(a.Method)
	if a.Target != "" {
		sb.WriteString(" on ")
		sb.WriteString(a.Target)
	}
	return sb.String()
}

// watcher is the goroutine started by Watch.
type watcher struct {
	stop chan struct{}
	done chan struct{}
	gid  atomic.Uint64 // the goroutine's id, so that Close can tell it calls from notify
}

// Watch starts a goroutine that, every interval, drops idle breakers (when
// GroupConfig.IdleAfter is set) and calls notify for each alert whose
// severity has risen since it was last notified: once at P3, again at P2,
// again at P1, and again after the breaker has closed and reopened. notify
// runs on the watcher's goroutine, and may call any method of the group,
// [Group.Close] included. Close stops the watcher. Watch returns an error
// if a watcher is already running, interval is not positive, or
// GroupConfig.Tick returns a nil channel or a nil stop function.
//
// The interval is measured by a [time.Ticker], or by GroupConfig.Tick when
// it is set: a test hands the watcher the ticks of its mock clock and
// needs no real time to pass.
//
// The watcher survives panics: one raised by a subscriber, a hook or a
// classifier while it looks at the breakers, or by notify, is recovered
// and logged (see [Group.Subscribe]), and the watcher goes on at the next
// interval.
func (g *Group) Watch(interval time.Duration, notify func(Alert)) error {
	if interval <= 0 {
		return fmt.Errorf("breaker: watch interval must be positive, got %v", interval)
	}
	if notify == nil {
		return errors.New("breaker: nil notify function")
	}
	// The ticks start here, on the caller's goroutine, not in the
	// watcher's: a mock ticker then counts its first interval from the
	// mock's time at Watch, whatever the test does to the mock before the
	// goroutine runs. They start outside g.mu, which user code never runs
	// under, and are stopped again if the group already has a watcher.
	ticks, stop, err := g.ticks(interval)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if g.watch != nil {
		g.mu.Unlock()
		g.stopTicks(stop)
		return errors.New("breaker: the group already has a watcher")
	}
	w := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	g.watch = w
	go g.watchLoop(w, ticks, stop, notify)
	g.mu.Unlock()
	return nil
}

// ticks starts the watcher's tick source.
func (g *Group) ticks(interval time.Duration) (<-chan time.Time, func(), error) {
	if g.cfg.Tick == nil {
		t := time.NewTicker(interval)
		return t.C, t.Stop, nil
	}
	ticks, stop := g.cfg.Tick(interval)
	switch {
	case ticks == nil && stop == nil:
		return nil, nil, errors.New("breaker: GroupConfig.Tick returned a nil channel and a nil stop function")
	case ticks == nil:
		g.stopTicks(stop)
		return nil, nil, errors.New("breaker: GroupConfig.Tick returned a nil channel")
	case stop == nil:
		return nil, nil, errors.New("breaker: GroupConfig.Tick returned a nil stop function")
	}
	return ticks, stop, nil
}

func (g *Group) watchLoop(w *watcher, ticks <-chan time.Time, stop func(), notify func(Alert)) {
	defer close(w.done)
	defer g.stopTicks(stop)
	w.gid.Store(goid())
	notified := map[string]Severity{}
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
		if !g.watchOnce(w, notified, notify) {
			return
		}
	}
}

// stopTicks stops a tick source. A stop function from GroupConfig.Tick is
// user code, and a panic from it is recovered and logged like one from
// notify: on the watcher's goroutine, which the library started, nothing
// else would recover it and the process would end.
func (g *Group) stopTicks(stop func()) {
	defer func() {
		if v := recover(); v != nil {
			g.reportPanic("breaker: GroupConfig.Tick's stop function panicked", "", v)
		}
	}()
	stop()
}

// watchOnce is one round of the watcher. It reports false when the
// watcher was stopped during the round (by notify calling Close, say).
func (g *Group) watchOnce(w *watcher, notified map[string]Severity, notify func(Alert)) (goOn bool) {
	notifying := "" // the alert's breaker while notify runs
	defer func() {
		if v := recover(); v != nil {
			g.reportPanic("breaker: watcher recovered a panic", notifying, v)
			goOn = true
		}
	}()
	g.EvictIdle()
	alerts := g.Alerts()
	current := make(map[string]bool, len(alerts))
	for _, a := range alerts {
		current[a.Name] = true
		if a.Severity > notified[a.Name] {
			select {
			case <-w.stop:
				return false
			default:
			}
			notified[a.Name] = a.Severity
			notifying = a.Name
			notify(a)
			notifying = ""
		}
	}
	for name := range notified {
		if !current[name] {
			delete(notified, name) // recovered: a new outage alerts anew
		}
	}
	return true
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

// Close stops the watcher, if any, and waits for it to return; called
// from the watcher's notify, it stops the watcher and returns at once
// (the watcher returns when notify does, without notifying again). The
// group and its breakers keep working. Close is safe to call more than
// once.
func (g *Group) Close() error {
	g.mu.Lock()
	w := g.watch
	if w != nil {
		g.watch = nil
		g.stopped = w
		close(w.stop)
	} else {
		// Another Close may have stopped the watcher and still be
		// waiting for it; this one must wait too. Once the watcher has
		// returned, done is closed and this costs nothing.
		w = g.stopped
	}
	g.mu.Unlock()
	if w != nil && w.gid.Load() != goid() {
		<-w.done
	}
	return nil
}
