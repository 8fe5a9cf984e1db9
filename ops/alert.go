package ops

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
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
	return "severity(" + strconv.FormatUint(uint64(s), 10) + ")"
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
	return fmt.Errorf("ops: unknown severity %q", b)
}

// Thresholds are the open durations at which an open breaker becomes an
// alert of each severity. Each must be positive and at least the one
// before. The zero value means [DefaultThresholds].
type Thresholds struct {
	P3 time.Duration `json:"p3"`
	P2 time.Duration `json:"p2"`
	P1 time.Duration `json:"p1"`
}

// DefaultThresholds returns the default thresholds: P3 after one minute
// open, P2 after ten, P1 after thirty. It is a function, not a variable,
// so that no code can change the defaults of every other.
func DefaultThresholds() Thresholds {
	return Thresholds{P3: time.Minute, P2: 10 * time.Minute, P1: 30 * time.Minute}
}

// orDefault returns t, or the defaults for the zero value.
func (t Thresholds) orDefault() Thresholds {
	if t == (Thresholds{}) {
		return DefaultThresholds()
	}
	return t
}

// Validate reports whether the thresholds are usable: the zero value is,
// and so is any set of positive thresholds with P3 <= P2 <= P1.
func (t Thresholds) Validate() error {
	t = t.orDefault()
	if t.P3 <= 0 || t.P2 < t.P3 || t.P1 < t.P2 {
		return fmt.Errorf("ops: alert thresholds must be positive and in order P3 <= P2 <= P1, got P3=%v P2=%v P1=%v", t.P3, t.P2, t.P1)
	}
	return nil
}

// Severity returns the severity of a breaker open for d.
func (t Thresholds) Severity(d time.Duration) Severity {
	t = t.orDefault()
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
	Name   string        `json:"name"`
	Method string        `json:"method"`
	Target string        `json:"target,omitempty"`
	State  breaker.State `json:"state"`
	// Since is when the outage began; OpenDuration how long ago that was
	// (elapsed time, not a cooldown: that is Policy.OpenFor).
	Since        time.Time     `json:"since"`
	OpenDuration time.Duration `json:"open_duration_ns"`
	// TripReason and Snapshot are why the outage began: the rule that
	// tripped the breaker and the window that tripped it, the same for
	// the whole outage. Reason is what keeps it open now: the trip rule,
	// or what reopened it since (probe_failed), as [breaker.Status] says.
	TripReason breaker.Reason   `json:"trip_reason"`
	Snapshot   breaker.Snapshot `json:"snapshot"`
	Reason     breaker.Reason   `json:"reason"`
	// Message leads with the cause: "P3: breaker inventory.GetStock has
	// been open for 1m11s (opened on error_ratio: 9 of 18 calls failed, 9
	// of them timeouts; now probe_failed); check the health of
	// inventory.GetStock". The key in it is shown by [Printable], so that
	// it reads as what it holds.
	Message string `json:"message"`
}

// Alerts returns the group's breakers that have been open for at least
// the P3 threshold of th (the zero value means [DefaultThresholds]), most
// severe first, then by name. Breakers forced open, and shadow breakers,
// are not alerts. The open duration of a breaker released from a forced
// open counts from the release, not from the start of the forced open
// (see [breaker.Breaker.OpenSince]). A closed breaker that throttles is
// no alert (see the package documentation). Alerts may be called from a
// subscriber or a hook.
func Alerts(g *breaker.Group, th Thresholds) []Alert {
	return alerts(g, g.Now(), th.orDefault())
}

func alerts(g *breaker.Group, now time.Time, th Thresholds) []Alert {
	return scan(g, now, th, nil)
}

// scan grades the group's breakers at now, and calls out, if not nil,
// with the key and start of each breaker's outage, in any mode, whether
// it alerts or not.
func scan(g *breaker.Group, now time.Time, th Thresholds, out func(key string, since time.Time)) []Alert {
	var found []Alert
	g.Range(func(key string, b *breaker.Breaker) bool {
		// A closed breaker may still be in an outage that has not
		// settled, so every breaker's status is read.
		st := b.Status()
		if st.Outage != nil && out != nil {
			out(key, st.Outage.Since)
		}
		if st.Mode != breaker.ModeAuto {
			return true
		}
		if a, ok := alertOf(st, now, th); ok {
			found = append(found, a)
		}
		return true
	})
	sortAlerts(found)
	return found
}

// alertsOf grades statuses already read, as a snapshot has them.
func alertsOf(statuses []breaker.Status, now time.Time, th Thresholds) []Alert {
	var out []Alert
	for i := range statuses {
		if a, ok := alertOf(statuses[i], now, th); ok {
			out = append(out, a)
		}
	}
	sortAlerts(out)
	return out
}

// sortAlerts puts the most severe first, then by name.
func sortAlerts(a []Alert) {
	sort.Slice(a, func(i, j int) bool {
		if a[i].Severity != a[j].Severity {
			return a[i].Severity > a[j].Severity
		}
		return a[i].Name < a[j].Name
	})
}

// alertOf grades one breaker's status at now.
func alertOf(st breaker.Status, now time.Time, th Thresholds) (Alert, bool) {
	if st.Mode != breaker.ModeAuto || st.Outage == nil {
		return Alert{}, false
	}
	since := st.Outage.Since
	open := now.Sub(since)
	sev := th.Severity(open)
	if sev == SeverityNone {
		return Alert{}, false
	}
	a := Alert{Severity: sev, Name: st.Name, State: st.State, Since: since, OpenDuration: open,
		TripReason: st.Outage.Trip.Reason, Snapshot: st.Outage.Trip.Window, Reason: st.Reason}
	if a.TripReason == "" {
		a.TripReason = a.Reason
	}
	a.Method, a.Target = breaker.SplitKey(st.Name)
	a.Message = message(a)
	return a, true
}

// message is an alert's text for a person, its key shown by [Printable].
func message(a Alert) string {
	var sb strings.Builder
	writeMessage(a, func(t string) { sb.WriteString(t) }, func(k string) { sb.WriteString(Printable(k)) })
	return sb.String()
}

// writeMessage writes an alert's message, handing its own words to text
// and the key and its parts, which came with a request or a document, to
// key.
func writeMessage(a Alert, text, key func(string)) {
	text(fmt.Sprintf("%s: breaker ", a.Severity))
	key(a.Name)
	text(fmt.Sprintf(" has been open for %s", a.OpenDuration.Round(time.Second)))
	// Why it opened leads, with the window that tripped it; what
	// reopened it since (a failed probe) follows, never in its place.
	if a.TripReason != "" {
		text(" (" + cause(a.TripReason, a.Snapshot))
		if a.Reason != "" && a.Reason != a.TripReason {
			text("; now " + string(a.Reason))
		}
		text(")")
	}
	// The breaker only stops the bleeding; someone has to heal the
	// downstream, and the alert says which one.
	text("; check the health of ")
	key(a.Method)
	if a.Target != "" {
		text(" on ")
		key(a.Target)
	}
}

// cause says why an outage began, as the alerts and the status page
// write it: "opened on error_ratio: 9 of 18 calls failed, 9 of them
// timeouts", or "opened on forced_open" without a window.
func cause(trip breaker.Reason, snap breaker.Snapshot) string {
	if snap.Counted == 0 {
		return "opened on " + string(trip)
	}
	return fmt.Sprintf("opened on %s: %d of %d calls failed, %d of them timeouts",
		trip, snap.Failures, snap.Counted, snap.Timeouts)
}
