package ops

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/enumtext"
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
	return enumtext.Unmarshal(s, b, SeverityNone, SeverityP1, "ops", "severity")
}

// Thresholds are the outage lengths at which an outage becomes an alert
// of each severity (see [breaker.Outage]: its length runs from its first
// trip, through its closes, until it has settled). Each must be positive
// and at least the one before. The zero value means [DefaultThresholds].
type Thresholds struct {
	P3 time.Duration `json:"p3"`
	P2 time.Duration `json:"p2"`
	P1 time.Duration `json:"p1"`
}

// DefaultThresholds returns the default thresholds: P3 once an outage has
// lasted a minute, P2 ten, P1 thirty. It is a function, not a variable,
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

// Severity returns the severity of an outage that has lasted d.
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

// Alert is a breaker's outage (see [breaker.Outage]) that has lasted at
// least the P3 threshold. An outage runs from its first trip until the
// breaker has stayed closed for Policy.MaxOpenFor, its closes and trips in
// between included, so one alert covers the whole incident: a downstream
// whose probes pass and that trips the breaker again at once raises one
// alert whose severity rises with the outage's length, not a new one at
// each close. The alert says which downstream to check, what tripped the
// breaker and what has happened since, so that the person it reaches can
// act without opening a dashboard first.
type Alert struct {
	Severity Severity `json:"severity"`
	// Name is the breaker's key; Method and Target are its parts before
	// and after "@" (Target is empty for a per-method key).
	Name   string        `json:"name"`
	Method string        `json:"method"`
	Target string        `json:"target,omitempty"`
	State  breaker.State `json:"state"`
	// Since is when the outage began (its first trip, or the end of a
	// forced open), the same for the whole outage. Duration is how long
	// it has lasted, closes included: what the severity grades. It is
	// elapsed time, not a cooldown (that is Policy.OpenFor).
	Since    time.Time     `json:"since"`
	Duration time.Duration `json:"duration_ns"`
	// Trip is the trip that began the outage: the rule and the evidence
	// it judged, the same for the whole outage. Reason is what keeps the
	// breaker open now: the trip's rule, or what reopened it since
	// (probe_failed), as [breaker.Status] says; empty while it is closed.
	Trip   breaker.Trip   `json:"trip"`
	Reason breaker.Reason `json:"reason,omitempty"`
	// Trips is the trips from closed in the outage, the first included;
	// Refused the calls refused with ErrOpen since it began.
	// ProbesPassedOnError is the probes that passed though the downstream
	// answered with an error (Policy.StrictProbes off).
	Trips               int    `json:"trips"`
	Refused             uint64 `json:"refused"`
	ProbesPassedOnError int    `json:"probes_passed_on_error"`
	// Recovering is true while the breaker is closed in the outage: its
	// probes passed at ClosedAt, and the outage is over at SettlesAt if
	// it stays closed. The alert lasts until then; both times are zero
	// while the breaker is open or half-open.
	Recovering bool      `json:"recovering"`
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	SettlesAt  time.Time `json:"settles_at,omitzero"`
	// Message leads with the trip's evidence and says what the outage has
	// been since: "P2: breaker inventory.GetStock has been failing for
	// 12m0s (opened on error_ratio: 9 of 18 calls failed, 9 of them
	// timeouts; tripped 4 times, 830 calls refused; closed at 05:18:07
	// UTC, settles at 05:20:07 UTC if it stays closed); ...; check the
	// health of inventory.GetStock". The key in it is shown by
	// [Printable], so that it reads as what it holds.
	Message string `json:"message"`
}

// Alerts returns the outages of the group's breakers that have lasted at
// least the P3 threshold of th (the zero value means
// [DefaultThresholds]), most severe first, then by name. An outage is an
// alert until it has settled, through its closes: a breaker closed in an
// outage is an alert marked Recovering. Breakers forced open, and shadow
// breakers, are not alerts; the outage of a breaker released from a
// forced open counts from the release, not from the start of the forced
// open. A closed breaker that throttles is no alert (see the package
// documentation). Alerts may be called from a subscriber or a hook.
func Alerts(g *breaker.Group, th Thresholds) []Alert {
	return alerts(g, th.orDefault())
}

func alerts(g *breaker.Group, th Thresholds) []Alert {
	return scan(g, th, nil)
}

// scan grades the group's breakers, and calls out, if not nil, with the
// key and start of each breaker's outage, in any mode, whether it alerts
// or not.
func scan(g *breaker.Group, th Thresholds, out func(key string, since time.Time)) []Alert {
	var found []Alert
	g.Range(func(key string, b *breaker.Breaker) bool {
		// A closed breaker may still be in an outage that has not
		// settled, so every breaker's status is read.
		st := b.Status()
		if st.Outage != nil && out != nil {
			out(key, st.Outage.Since)
		}
		if a, ok := alertOf(st, th); ok {
			found = append(found, a)
		}
		return true
	})
	sortAlerts(found)
	return found
}

// alertsOf grades statuses already read, as a snapshot has them.
func alertsOf(statuses []breaker.Status, th Thresholds) []Alert {
	var out []Alert
	for i := range statuses {
		if a, ok := alertOf(statuses[i], th); ok {
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

// alertOf grades one breaker's status by the length of its outage, as
// the status read it.
func alertOf(st breaker.Status, th Thresholds) (Alert, bool) {
	o := st.Outage
	if st.Mode != breaker.ModeAuto || o == nil {
		return Alert{}, false
	}
	sev := th.Severity(o.Duration)
	if sev == SeverityNone {
		return Alert{}, false
	}
	a := Alert{Severity: sev, Name: st.Name, State: st.State, Since: o.Since, Duration: o.Duration,
		Trip: o.Trip, Reason: st.Reason, Trips: o.Trips, Refused: o.Refused,
		ProbesPassedOnError: o.ProbesPassedOnError,
		Recovering:          o.Recovering(), ClosedAt: o.ClosedAt, SettlesAt: o.SettlesAt}
	if a.Trip.Reason == "" {
		a.Trip.Reason = a.Reason
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
	text(" has been failing for " + a.Duration.Round(time.Second).String())
	// Why it opened leads, with the evidence of the rule that tripped;
	// what the outage has been since follows, never in its place.
	text(" (" + cause(a.Trip))
	if s := tally(a.Trips, a.Refused); s != "" {
		text("; " + s)
	}
	switch {
	case a.Recovering:
		text("; closed at " + utcClock(a.ClosedAt) + ", settles at " + utcClock(a.SettlesAt) + " if it stays closed")
	case a.State == breaker.HalfOpen:
		text("; probing now")
	case a.Reason != "" && a.Reason != a.Trip.Reason:
		text("; now " + string(a.Reason))
	}
	text(")")
	if d := diagnosis(a.Trips, a.ProbesPassedOnError); d != "" {
		text("; " + d)
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
// write it, with the evidence of the rule that tripped
// ([breaker.Trip.String]): "opened on error_ratio: 9 of 18 calls
// failed, 9 of them timeouts", "opened on slow_ratio: 88 of 169 calls
// slower than 200ms (0 failed)", "opened on forced_open".
func cause(t breaker.Trip) string {
	return "opened on " + t.String()
}

// tally says what an outage has cost so far: "tripped 4 times, 830 calls
// refused"; the trip that began it is not news, so one trip is not said.
func tally(trips int, refused uint64) string {
	var parts []string
	if trips > 1 {
		parts = append(parts, "tripped "+strconv.Itoa(trips)+" times")
	}
	switch {
	case refused == 1:
		parts = append(parts, "1 call refused")
	case refused > 1:
		parts = append(parts, strconv.FormatUint(refused, 10)+" calls refused")
	}
	return strings.Join(parts, ", ")
}

// diagnosis tells the two kinds of outage that trip a breaker more than
// once apart: probes that pass on errors (the downstream answers, with
// errors, and StrictProbes is off), and a downstream that recovers and
// fails again. An outage tripped once needs none.
func diagnosis(trips, passedOnError int) string {
	switch {
	case trips < 2:
		return ""
	case passedOnError > 0:
		return strconv.Itoa(passedOnError) + " of its probes passed on errors (the downstream answers, but with errors), " +
			"so the breaker closes and trips again: Policy.StrictProbes would keep it open until the downstream answers without errors"
	}
	return "the downstream recovers and fails again"
}

// utcClock writes an instant of an alert's message in UTC, "05:18:07
// UTC": the message reaches people in other time zones.
func utcClock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }
