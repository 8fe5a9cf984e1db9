package ops

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
)

// Defaults of [StatusConfig].
const (
	DefaultStatusRefresh     = 5 * time.Second
	DefaultStatusTransitions = 50
	DefaultStatusTitle       = "Circuit breakers"
)

// StatusConfig configures a [StatusPage].
type StatusConfig struct {
	// Thresholds grade the alerts the page shows. The zero value means
	// [DefaultThresholds].
	Thresholds Thresholds `json:"thresholds"`
	// Refresh is how often the browser reloads the page. Zero means
	// DefaultStatusRefresh; a negative value turns reloading off.
	Refresh time.Duration `json:"refresh"`
	// Title heads the page; empty means DefaultStatusTitle. A service
	// with several groups names each.
	Title string `json:"title"`
	// Transitions is how many of the group's latest transitions the page
	// keeps to show; zero means DefaultStatusTransitions.
	Transitions int `json:"transitions"`
	// Follower, if not nil, is the follower the group's policy comes
	// from ([live.Follow]): the page says when a document its source
	// delivered was refused, and why, until a valid one comes, and shows
	// a banner while the source is gone or unreadable.
	Follower *live.Follower `json:"-"`
}

// A StatusPage is an [http.Handler] that shows a group's breakers as one
// HTML page, for a person with a browser: each breaker's state, its
// outage ([breaker.Outage]: failing since when and for how long, the
// trip's evidence, what it has cost, and, for a breaker closed in an
// outage that has not settled, when it settles), the window against the
// policy's threshold, the cooldown and the next probe, its latest
// transitions with their reasons, and the alerts by severity; with a
// follower, a rejected policy document until a valid one comes, and a
// banner while the policy source is gone or unreadable. The page reloads itself, fits a laptop and a phone,
// and needs nothing but itself: no script, no external style sheet, font
// or image.
//
// The page keeps the group's latest transitions, with their times, by
// subscribing to the group ([breaker.Group.Subscribe]): create it when
// the group is made, and it shows every transition since. A card lists
// those of its own breaker: one made again under a key whose breaker was
// dropped starts with none. The counts of all transitions, by reason,
// come from the breakers themselves ([breaker.Breaker.Transitions]).
// Close ends the subscription.
//
// It serves GET and HEAD on any path it is mounted at. It shows what the
// group holds: mount it where only operators reach it, as with /metrics.
//
// A StatusPage is safe for concurrent use by multiple goroutines.
type StatusPage struct {
	g           *breaker.Group
	cfg         StatusConfig
	unsubscribe func()

	mu     sync.Mutex
	recent []seen // ring of the latest cfg.Transitions
	next   int    // where the next event goes once the ring is full
}

// seen is a transition the page recorded, with its breaker: a key's
// breaker may be dropped and made again, and a card lists the
// transitions of its own breaker only. The ring holds at most
// cfg.Transitions of them, so it keeps few dropped breakers alive.
type seen struct {
	b *breaker.Breaker
	e breaker.Event
}

// NewStatusPage returns the status page of g. It returns an error if g is
// nil, or the thresholds are invalid, or Transitions is negative.
func NewStatusPage(g *breaker.Group, cfg StatusConfig) (*StatusPage, error) {
	if g == nil {
		return nil, errors.New("ops: NewStatusPage: nil group")
	}
	if err := cfg.Thresholds.Validate(); err != nil {
		return nil, err
	}
	if cfg.Transitions < 0 {
		return nil, fmt.Errorf("ops: StatusConfig.Transitions %d is negative", cfg.Transitions)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultStatusRefresh
	}
	if cfg.Title == "" {
		cfg.Title = DefaultStatusTitle
	}
	if cfg.Transitions == 0 {
		cfg.Transitions = DefaultStatusTransitions
	}
	cfg.Thresholds = cfg.Thresholds.orDefault()
	p := &StatusPage{g: g, cfg: cfg}
	p.unsubscribe = g.Subscribe(p.see)
	return p, nil
}

// Close stops the page from recording transitions. It still serves what
// it has. Close always returns nil.
func (p *StatusPage) Close() error {
	p.unsubscribe()
	return nil
}

// see records one transition. It runs on the goroutine that made the
// transition, so it does no more than append.
func (p *StatusPage) see(b *breaker.Breaker, e breaker.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.recent) < p.cfg.Transitions {
		p.recent = append(p.recent, seen{b, e})
		return
	}
	p.recent[p.next] = seen{b, e}
	p.next = (p.next + 1) % len(p.recent)
}

// latest returns the recorded transitions, newest first.
func (p *StatusPage) latest() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]seen, 0, len(p.recent))
	for i := range p.recent {
		out = append(out, p.recent[(p.next+len(p.recent)-1-i)%len(p.recent)])
	}
	return out
}

// ServeHTTP renders the page.
func (p *StatusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	if err := statusTemplate.Execute(&b, p.view()); err != nil {
		http.Error(w, "ops: status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method == http.MethodGet {
		_, _ = w.Write(b.Bytes()) // the client has gone if this fails
	}
}

// How many of its latest transitions each breaker's card lists.
const cardTransitions = 5

// view gathers what the page shows, at one instant of the group's clock.
func (p *StatusPage) view() statusView {
	snap := Snapshot(p.g, p.cfg.Thresholds, p.cfg.Follower)
	now := snap.Time
	v := statusView{
		Title:   p.cfg.Title,
		Now:     now,
		Refresh: int((p.cfg.Refresh + time.Second - 1) / time.Second),
		Policy:  policyInForce(p.g, snap.Policy),
		Th:      p.cfg.Thresholds,
	}
	type held struct {
		b      *breaker.Breaker
		counts []breaker.TransitionCount
	}
	current := map[string]held{}
	p.g.Range(func(key string, b *breaker.Breaker) bool {
		current[key] = held{b, b.Transitions()}
		return true
	})
	latest := p.latest()
	for _, st := range snap.Breakers {
		c := cardOf(st, now)
		h := current[st.Name]
		c.Counts = h.counts
		for _, s := range latest {
			if s.b == h.b && len(c.Recent) < cardTransitions {
				c.Recent = append(c.Recent, transitionOf(s.e, now))
			}
		}
		switch {
		case st.State == breaker.Open:
			v.Open++
		case st.State == breaker.HalfOpen:
			v.HalfOpen++
		case c.Recovering:
			v.Recovering++
		}
		if c.ThrottlePct > 0 {
			v.Throttling++
		}
		v.Breakers = append(v.Breakers, c)
	}
	// Trouble first: open, then half-open, then recovering, then closed;
	// by name within.
	sort.SliceStable(v.Breakers, func(i, j int) bool { return rank(v.Breakers[i]) < rank(v.Breakers[j]) })
	for _, sev := range []Severity{SeverityP1, SeverityP2, SeverityP3} {
		g := alertGroup{Severity: sev, Action: severityAction[sev]}
		for _, a := range snap.Alerts {
			if a.Severity == sev {
				g.Alerts = append(g.Alerts, a)
			}
		}
		if len(g.Alerts) > 0 {
			v.Alerts = append(v.Alerts, g)
		}
	}
	for _, s := range latest {
		if len(v.Recent) == 20 {
			break
		}
		v.Recent = append(v.Recent, transitionOf(s.e, now))
	}
	return v
}

// rank orders the cards: open, then half-open, then closed in an
// outage (recovering), then closed.
func rank(c card) int {
	switch {
	case c.State == breaker.Open:
		return 0
	case c.State == breaker.HalfOpen:
		return 1
	case c.Recovering:
		return 2
	}
	return 3
}

var severityAction = map[Severity]string{
	SeverityP1: "escalate", SeverityP2: "page", SeverityP3: "record",
}

type statusView struct {
	Title    string
	Now      time.Time
	Refresh  int // seconds; 0 or less: no reload
	Policy   policyView
	Th       Thresholds
	Open     int
	HalfOpen int
	// Recovering counts the closed breakers whose outage has not
	// settled yet.
	Recovering int
	// Throttling counts the closed breakers whose throttle refuses calls
	// now (a refusal probability above 0).
	Throttling int
	Alerts     []alertGroup
	Breakers   []card
	Recent     []transition
}

type alertGroup struct {
	Severity Severity
	Action   string
	Alerts   []Alert
}

// card is one breaker as the page shows it.
type card struct {
	breaker.Status
	Method, Target string
	// Window: the error ratio and the threshold in percent, for the bar.
	RatioPct, ThresholdPct float64
	Judged                 bool // the window holds MinRequests calls
	// ThrottlePct is the throttle's refusal probability in percent, above
	// 0 only while a closed breaker's throttle refuses calls.
	ThrottlePct float64
	NextProbe   time.Duration
	// Recovering: closed in an outage that has not settled; SettlesIn is
	// how long until it settles if the breaker stays closed.
	Recovering bool
	SettlesIn  time.Duration
	Counts     []breaker.TransitionCount
	Recent     []transition
}

func cardOf(st breaker.Status, now time.Time) card {
	c := card{Status: st}
	if o := st.Outage; o != nil && o.Recovering() {
		c.Recovering = true
		c.SettlesIn = max(0, o.SettlesAt.Sub(now))
	}
	c.Method, c.Target = breaker.SplitKey(st.Name)
	c.RatioPct = 100 * st.ErrorRatio
	c.ThresholdPct = 100 * st.Policy.ErrorRatio
	c.Judged = st.Window.Counted >= uint64(st.Policy.MinRequests)
	if st.State == breaker.Closed {
		c.ThrottlePct = 100 * st.ThrottleProbability
	}
	if st.Until != nil {
		c.NextProbe = max(0, st.Until.Sub(now))
	}
	return c
}

// transition is one event as a line of the page. Trip is the evidence
// of a trip from closed, empty for the other transitions.
type transition struct {
	breaker.Event
	Ago  time.Duration
	Trip string
}

func transitionOf(e breaker.Event, now time.Time) transition {
	t := transition{Event: e, Ago: max(0, now.Sub(e.Time))}
	if trip, ok := tripOf(e); ok {
		t.Trip = trip.String()
	}
	return t
}

// tripOf is the trip an event records, if it is a trip from closed by a
// rule: the outage's own for the trip that began it, with all its
// evidence; for a later trip in the outage, its rule and window (the run
// of a consecutive-failures trip is kept only for the first).
func tripOf(e breaker.Event) (breaker.Trip, bool) {
	if e.From != breaker.Closed || e.To != breaker.Open || e.Reason == breaker.ReasonForcedOpen {
		return breaker.Trip{}, false
	}
	o := e.Outage
	if o != nil && o.Since.Equal(e.Time) && o.Trip.Reason == e.Reason {
		return o.Trip, true
	}
	t := breaker.Trip{Reason: e.Reason, Window: e.Snapshot}
	if o != nil {
		t.SlowCall = o.Trip.SlowCall
	}
	return t, true
}

// policyView is the page's policy line.
type policyView struct {
	// Origin and Version identify the policy document in force (Version
	// is empty for a policy set by code), applied at AppliedAt.
	Origin    string
	Version   string
	AppliedAt time.Time
	// Rejected is the version of the last document refused while no
	// valid one has been delivered since, a gone or unreadable source
	// notwithstanding: the page says it is not live, and why (Problems).
	Rejected string
	Problems []breaker.FieldError
	// Down is the record of the source's last gone or unreadable
	// delivery while it has delivered nothing readable since: the page
	// shows a banner until it is back.
	Down      *live.Change
	Default   breaker.Policy
	Overrides []override
	// Unused are the override keys no breaker has used yet: a typo, or
	// a downstream not called yet.
	Unused []string
}

// override is an override key of the policy line, with what it sets:
// the fields in which its policy differs from the default.
type override struct {
	Key  string
	Sets []fieldValue
}

// policyInForce is what the page says of the policy in force: where it
// comes from and its version (from ps, the snapshot's), the group's
// default policy and the keys it overrides, with what each sets.
func policyInForce(g *breaker.Group, ps PolicySnapshot) policyView {
	gp := g.Policies()
	v := policyView{Default: gp.Default, Origin: ps.Origin, Version: ps.Version, AppliedAt: ps.AppliedAt,
		Unused: ps.UnusedOverrides, Down: ps.Down}
	if r := ps.Rejected; r != nil {
		v.Rejected = r.Version
		if v.Rejected == "" {
			v.Rejected = "(no version)"
		}
		v.Problems = r.Problems
	}
	if v.Default == (breaker.Policy{}) {
		v.Default = breaker.DefaultPolicy()
	}
	for k, p := range gp.Overrides {
		v.Overrides = append(v.Overrides, override{Key: k, Sets: policyDiff(v.Default, p)})
	}
	sort.Slice(v.Overrides, func(i, j int) bool { return v.Overrides[i].Key < v.Overrides[j].Key })
	return v
}

// fieldValue is one field of a policy as a document writes it:
// open_for 45s, adaptive_timeout.max 2s.
type fieldValue struct{ Field, Value string }

// policyDiff lists the fields of p that differ from base, in the order
// of the policy's JSON, nested fields by their path.
func policyDiff(base, p breaker.Policy) []fieldValue {
	if base == p {
		return nil
	}
	a, b := policyFields(base), policyFields(p)
	var out []fieldValue
	for i := range b {
		if i >= len(a) || a[i] != b[i] {
			out = append(out, b[i])
		}
	}
	return out
}

// policyFields lists the fields of p as its JSON writes them.
func policyFields(p breaker.Policy) []fieldValue {
	data, err := json.Marshal(p)
	if err != nil {
		return nil // a NaN or an infinity, which no valid policy holds
	}
	var out []fieldValue
	objectFields(data, "", &out)
	return out
}

// objectFields appends the members of the JSON object data to out, in
// their order, each named with prefix, a nested object's by its path.
func objectFields(data []byte, prefix string, out *[]fieldValue) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return
		}
		name, _ := k.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return
		}
		if len(raw) > 0 && raw[0] == '{' {
			objectFields(raw, prefix+name+".", out)
			continue
		}
		val := string(raw)
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		}
		*out = append(*out, fieldValue{prefix + name, val})
	}
}

// cooldownOf says what the policy's cooldown is: "30s, doubling to 2m0s,
// each drawn within ±20% (jitter)"; a cooldown that does not double
// (MaxOpenFor = OpenFor) says no doubling, and no jitter says none.
func cooldownOf(p breaker.Policy) string {
	s := durText(p.OpenFor)
	if p.MaxOpenFor > p.OpenFor {
		s += ", doubling to " + durText(p.MaxOpenFor)
	}
	if p.Jitter > 0 {
		each := "each "
		if p.MaxOpenFor <= p.OpenFor {
			each = ""
		}
		s += ", " + each + "drawn within ±" + strconv.FormatFloat(100*p.Jitter, 'f', -1, 64) + "% (jitter)"
	}
	return s
}

// durText writes a duration to the second, or to the millisecond under a
// second: 2m5s, 450ms.
func durText(d time.Duration) string {
	if d > 0 && d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

//go:embed status.html
var statusHTML string

//go:embed status.css
var statusCSS string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"css": func() template.CSS { return template.CSS(statusCSS) },
	// Text that came with a request or a document (keys, origins,
	// versions) goes through printable in attributes and show in the
	// page's text, so that it reads as what it holds (see Printable).
	"printable": Printable,
	"show":      printableHTML,
	"message": func(a Alert) template.HTML {
		var b strings.Builder
		writeMessage(a, func(t string) { b.WriteString(template.HTMLEscapeString(t)) },
			func(k string) { b.WriteString(string(printableHTML(k))) })
		return template.HTML(b.String())
	},
	"dur":      durText,
	"cooldown": cooldownOf,
	"tally":    tally,
	"diagnose": diagnosis,
	"isGone":   func(r live.Result) bool { return r == live.Gone },
	"clock":    func(t time.Time) string { return t.Format("15:04:05") },
	"pct":      func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) + "%" },
	// share writes a probability in percent above 0 as at least "<1%",
	// so that a throttle that refuses few calls does not read as none.
	"share": func(pct float64) string {
		if pct > 0 && pct < 0.5 {
			return "<1%"
		}
		return strconv.FormatFloat(pct, 'f', 0, 64) + "%"
	},
	// width keeps a bar's width within its track.
	"width": func(pct float64) string {
		return strconv.FormatFloat(min(max(pct, 0), 100), 'f', 1, 64) + "%"
	},
	"lower":    strings.ToLower,
	"cause":    cause,
	"mul100":   func(f float64) float64 { return 100 * f },
	"isOpen":   func(s breaker.State) bool { return s == breaker.Open },
	"isHalf":   func(s breaker.State) bool { return s == breaker.HalfOpen },
	"isClosed": func(s breaker.State) bool { return s == breaker.Closed },
	"isAuto":   func(m breaker.Mode) bool { return m == breaker.ModeAuto },
	"stateName": func(s breaker.State) string {
		return strings.ReplaceAll(s.String(), "_", "-")
	},
}).Parse(statusHTML))
