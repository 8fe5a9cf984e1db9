package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/jsondoc"
)

// Result is what became of one document a [Source] delivered.
type Result uint8

const (
	// Applied: the document was valid and is in force.
	Applied Result = iota + 1
	// Rejected: the document was invalid; the policy in force stays, and
	// the record lists every problem by path.
	Rejected
	// Gone: the document no longer exists at its origin (a deleted file
	// or key); the policy in force stays.
	Gone
	// Unreadable: the source could not read the document; the policy in
	// force stays.
	Unreadable
	// Unchanged: the document was the version in force, delivered again:
	// the same origin, version and content (a file put back as it was
	// after a refused edit, say). Nothing is applied, and the version in
	// force keeps its record: when it was applied and what it changed.
	Unchanged
)

var results = [...]string{Applied: "applied", Rejected: "rejected", Gone: "gone",
	Unreadable: "unreadable", Unchanged: "unchanged"}

func (r Result) String() string {
	if int(r) < len(results) && results[r] != "" {
		return results[r]
	}
	return "result(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText writes the result's name.
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a result's name.
func (r *Result) UnmarshalText(b []byte) error {
	for i, s := range results {
		if s != "" && s == string(b) {
			*r = Result(i)
			return nil
		}
	}
	return fmt.Errorf("live: unknown policy result %s", jsondoc.QuoteKey(string(b)))
}

// logGroup is the group the records' attributes go under, as the
// group's own records do.
const logGroup = "breaker"

// A Change is the record of one document a followed source delivered
// (see [Follow]): what it was, and what became of it. Every document ends
// in exactly one record, which goes to the follower's subscribers, to
// the group's logger ([breaker.Group.Logger]), and into the counts of
// [Follower.Status]. With slog's text handler (which quotes a key
// holding a quote):
//
//	level=INFO msg="breaker policy applied" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.changes.default.min_requests="20 → 10"
//	level=ERROR msg="breaker policy rejected" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:7f83b1657ff1fc53 breaker.in_force=sha256:5d41402abc4b2a76 "breaker.problems.overrides[\"payment.Charge\"].max_open_for"="must be at least open_for (30s), got 10s"
//	level=WARN msg="breaker policy gone" breaker.origin=file:/etc/app/breakers.json breaker.in_force=sha256:5d41402abc4b2a76
//
// A rejection is logged at Error, an applied document at Info, and a
// document gone or unreadable at Warn when the source goes down (the same
// state delivered again while it stays down, at Debug, as "breaker policy
// still gone"). The version in force delivered again is logged at Info
// when it ends a spell of the source down, or of a refused document (the
// source is back, and nothing changed), and at Debug otherwise (a source
// may deliver the same document again):
//
//	level=INFO msg="breaker policy source back, unchanged" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.in_force=sha256:5d41402abc4b2a76 breaker.after=gone
//	level=INFO msg="breaker policy put back, unchanged" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.in_force=sha256:5d41402abc4b2a76 breaker.after=rejected breaker.rejected=sha256:7f83b1657ff1fc53
//	level=DEBUG msg="breaker policy unchanged" breaker.origin=file:/etc/app/breakers.json breaker.version=sha256:5d41402abc4b2a76 breaker.in_force=sha256:5d41402abc4b2a76
type Change struct {
	Origin  string `json:"origin"`
	Version string `json:"version"`
	Result  Result `json:"result"`
	// Time is when the document was dealt with, on the group's clock.
	Time time.Time `json:"time"`
	// InForce is the version in force afterwards: Version if the
	// document was applied, the one before otherwise.
	InForce string `json:"in_force"`
	// Changes lists, for an applied document, every field whose value
	// changed, key by key; it is empty if the document says what the
	// policy in force said.
	Changes []FieldChange `json:"changes,omitempty"`
	// Problems lists, for a rejected document, every problem by path.
	Problems []breaker.FieldError `json:"problems,omitempty"`
	// Err is the source's error, for an unreadable document.
	Err string `json:"error,omitempty"`
}

// FieldChange is one field of one key whose value a document changed.
// The value of a key without an override of its own is the default's, so
// adding or removing an override shows as the fields in which it differs
// from the default.
type FieldChange struct {
	// Key is "default" or an override's key; Path is the field's path in
	// the document, such as overrides["payment.Charge"].open_for, and
	// Field its name in a policy, such as open_for, or for a field of a
	// nested object its path there, such as adaptive_timeout.max.
	Key   string `json:"key"`
	Path  string `json:"path"`
	Field string `json:"field"`
	// From and To are the values before and after, as the document
	// writes them ("30s", 0.5, 20). A field of a candidate has a Path
	// that starts with "candidate.". A candidate that comes lists the
	// fields in which it differs from the policy in force, From being
	// the value in force; one that goes lists the fields in which it
	// differed, To being "".
	From string `json:"from"`
	To   string `json:"to"`
}

// Reloads counts the documents a follower's source delivered, by what
// became of them.
type Reloads struct {
	Applied    uint64 `json:"applied"`
	Rejected   uint64 `json:"rejected"`
	Gone       uint64 `json:"gone"`
	Unreadable uint64 `json:"unreadable"`
	Unchanged  uint64 `json:"unchanged"`
}

// Status is what a follower has done. Which document is in force, from
// where and since when, is the group's to say
// ([breaker.Group.PolicyLabel]); while the follower runs, it is the
// version the follower applied last.
type Status struct {
	// Following is the origin of the source while the follower runs
	// (see [Follower.Origin]), and empty once it has stopped.
	Following string `json:"following,omitempty"`
	// Reloads counts the documents delivered, by result.
	Reloads Reloads `json:"reloads"`
	// Last is the record of the last document delivered, whatever became
	// of it: a rejected or gone document shows here while the version in
	// force stays. Nil before the first.
	Last *Change `json:"last,omitempty"`
	// Applied is the record of the last document applied, with what it
	// changed; a document delivered since that changed nothing
	// ([Unchanged]) leaves it. Nil before the first.
	Applied *Change `json:"applied,omitempty"`
	// Down is the record of the last gone or unreadable delivery while
	// the source has delivered no readable document since; nil while the
	// source delivers. The version in force keeps running meanwhile.
	Down *Change `json:"down,omitempty"`
	// Rejected is the record of the last document refused while no
	// valid document has been delivered since; nil otherwise. A gone or
	// unreadable source does not clear it: only a valid document (applied,
	// or the version in force put back) does.
	Rejected *Change `json:"rejected,omitempty"`
}

// Status returns what the follower has done so far; it may be called
// after it has stopped. It takes no lock a call needs.
func (f *Follower) Status() Status {
	f.mu.Lock()
	st := Status{Reloads: f.reloads, Last: copyChange(f.last), Applied: copyChange(f.applied),
		Down: copyChange(f.down), Rejected: copyChange(f.rejected)}
	f.mu.Unlock()
	if !f.over.Load() {
		st.Following = f.Origin()
	}
	return st
}

// copyChange copies a record, so that a reader cannot change the
// follower's.
func copyChange(c *Change) *Change {
	if c == nil {
		return nil
	}
	d := *c
	d.Changes = append([]FieldChange(nil), c.Changes...)
	d.Problems = append([]breaker.FieldError(nil), c.Problems...)
	return &d
}

// apply deals with one delivered document and returns its record, after
// it has gone to the subscribers and the log. The follower holds the
// group's policies, so what it reads of them stays true until it applies.
func (f *Follower) apply(doc Document) Change {
	g := f.g
	rec := Change{Origin: doc.Origin, Version: doc.Version}
	switch {
	case doc.Err != nil:
		rec.Result = Unreadable
		rec.Err = doc.Err.Error()
	case doc.Gone:
		rec.Result = Gone
	default:
		old, label := g.Policies(), g.PolicyLabel()
		gp, err := breaker.ParseGroupPolicy(doc.Data)
		if err == nil && doc.Origin == label.Origin && doc.Version == label.Version && samePolicies(old, gp) {
			// Nothing to apply, and nothing the record of the version in
			// force should lose.
			rec.Result = Unchanged
			break
		}
		if err == nil {
			err = f.hold.Apply(gp, doc.Origin, doc.Version)
		}
		if err != nil {
			rec.Result = Rejected
			rec.Problems = documentProblems(err)
			break
		}
		rec.Result = Applied
		rec.Changes = diffPolicies(old, g.Policies())
	}
	rec.Time = g.Now()
	rec.InForce = g.PolicyLabel().Version

	f.mu.Lock()
	before := prior{down: f.down, rejected: f.rejected}
	switch rec.Result {
	case Applied:
		f.reloads.Applied++
		f.applied = copyChange(&rec)
		f.down, f.rejected = nil, nil
	case Rejected:
		f.reloads.Rejected++
		f.down, f.rejected = nil, copyChange(&rec)
	case Gone:
		f.reloads.Gone++
		f.down = copyChange(&rec)
	case Unreadable:
		f.reloads.Unreadable++
		f.down = copyChange(&rec)
	case Unchanged:
		f.reloads.Unchanged++
		f.down, f.rejected = nil, nil
	}
	f.last = copyChange(&rec)
	f.mu.Unlock()

	logChange(g.Logger(), rec, before)
	f.dispatch(rec)
	return rec
}

// documentProblems lists the problems of a refused document.
func documentProblems(err error) []breaker.FieldError {
	var pe *breaker.PolicyError
	if errors.As(err, &pe) {
		return append([]breaker.FieldError(nil), pe.Problems...)
	}
	return []breaker.FieldError{{Field: "(document)", Problem: err.Error()}}
}

// prior is what the follower knew before a record: the source down, a
// document refused (see [Status.Down], [Status.Rejected]).
type prior struct{ down, rejected *Change }

// logChange logs one record. A document that is the version in force is
// logged at Info when it ends a spell of the source gone or unreadable,
// or of a refused document (the source, or the version in force, is
// back), and at Debug otherwise; a source that stays gone, or keeps
// failing with the same error, is logged at Warn once, at the start, and
// at Debug after that.
func logChange(l *slog.Logger, rec Change, before prior) {
	attrs := []slog.Attr{slog.String("origin", rec.Origin)}
	if rec.Version != "" {
		attrs = append(attrs, slog.String("version", rec.Version))
	}
	level, msg := slog.LevelInfo, "breaker policy applied"
	switch rec.Result {
	case Applied:
		ch := make([]slog.Attr, 0, len(rec.Changes))
		for _, c := range rec.Changes {
			ch = append(ch, slog.String(c.Path, c.From+" → "+c.To))
		}
		if len(ch) == 0 {
			attrs = append(attrs, slog.String("changes", "none"))
		} else {
			attrs = append(attrs, slog.Attr{Key: "changes", Value: slog.GroupValue(ch...)})
		}
	case Rejected:
		level, msg = slog.LevelError, "breaker policy rejected"
		attrs = append(attrs, slog.String("in_force", rec.InForce))
		pr := make([]slog.Attr, 0, len(rec.Problems))
		for _, p := range rec.Problems {
			pr = append(pr, slog.String(p.Field, p.Problem))
		}
		attrs = append(attrs, slog.Attr{Key: "problems", Value: slog.GroupValue(pr...)})
	case Gone:
		level, msg = slog.LevelWarn, "breaker policy gone"
		if before.down != nil && before.down.Result == Gone {
			level, msg = slog.LevelDebug, "breaker policy still gone"
		}
		attrs = append(attrs, slog.String("in_force", rec.InForce))
	case Unreadable:
		level, msg = slog.LevelWarn, "breaker policy unreadable"
		if before.down != nil && before.down.Result == Unreadable && before.down.Err == rec.Err {
			level, msg = slog.LevelDebug, "breaker policy still unreadable"
		}
		attrs = append(attrs, slog.String("in_force", rec.InForce), slog.String("error", rec.Err))
	case Unchanged:
		level, msg = slog.LevelDebug, "breaker policy unchanged"
		attrs = append(attrs, slog.String("in_force", rec.InForce))
		switch {
		case before.down != nil:
			level, msg = slog.LevelInfo, "breaker policy source back, unchanged"
			attrs = append(attrs, slog.String("after", before.down.Result.String()))
		case before.rejected != nil:
			level, msg = slog.LevelInfo, "breaker policy put back, unchanged"
			attrs = append(attrs, slog.String("after", Rejected.String()))
		}
		if before.rejected != nil {
			attrs = append(attrs, slog.String("rejected", before.rejected.Version))
		}
	}
	l.LogAttrs(context.Background(), level, msg, slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}
