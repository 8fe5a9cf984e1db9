package breaker

import (
	"context"
	"log/slog"
	"math"
	"time"
)

// logGroup is the key of the slog group of a breaker's attributes.
const logGroup = "breaker"

// WithLogger logs every transition of the breaker (or of every breaker of
// a group) as one record, Warn for an opening and Info otherwise, every
// probe's result, and every change of the adaptive timeout; ordinary calls
// are not logged. The attributes are in one group, breaker. Records are
// written outside the breaker's lock, in the order of the transitions. A
// nil l logs nothing. docs/observability.md shows the records.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			return
		}
		o.logger = l
		o.hooks = append(o.hooks, func(e Event) { logEvent(l, e) })
	}
}

// transitionMessage names the transition, such as "breaker opened".
func transitionMessage(to State) string {
	switch to {
	case Closed:
		return "breaker closed"
	case Open:
		return "breaker opened"
	case HalfOpen:
		return "breaker half-open"
	}
	return "breaker " + to.String()
}

func logEvent(l *slog.Logger, e Event) {
	if e.Timeout != nil {
		logTimeout(l, e)
		return
	}
	level := slog.LevelInfo
	if e.To == Open && e.Mode != ModeShadow {
		level = slog.LevelWarn
	}
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs,
		slog.String("name", e.Name),
		slog.String("state", e.To.String()),
		slog.String("from", e.From.String()),
		slog.String("reason", string(e.Reason)),
	)
	// The outage's cause leads, with the evidence of its rule: the slow
	// calls for the slow rule, the run for the consecutive rule.
	if o := e.Outage; o != nil && o.Trip.Reason != e.Reason {
		attrs = append(attrs, slog.String("trip_reason", string(o.Trip.Reason)))
	}
	attrs = append(attrs,
		slog.Float64("ratio", math.Round(e.Snapshot.ErrorRatio()*100)/100),
		slog.Uint64("counted", e.Snapshot.Counted),
		slog.Uint64("failures", e.Snapshot.Failures),
		slog.Uint64("timeouts", e.Snapshot.Timeouts),
	)
	if e.Snapshot.Slow > 0 {
		attrs = append(attrs, slog.Uint64("slow", e.Snapshot.Slow),
			slog.Float64("slow_ratio", math.Round(e.Snapshot.SlowRatio()*100)/100))
	}
	if o := e.Outage; o != nil && o.Trip.Run > 0 && e.To == Open {
		attrs = append(attrs, slog.Uint64("run", o.Trip.Run))
	}
	if e.To == Open && e.Cooldown > 0 {
		// A string, so that both handlers write "30s".
		attrs = append(attrs, slog.String("cooldown", e.Cooldown.String()))
	}
	if e.Doublings > 0 {
		attrs = append(attrs, slog.Int("doublings", e.Doublings))
	}
	if e.Mode != ModeAuto {
		attrs = append(attrs, slog.String("mode", e.Mode.String()))
	}
	if o := e.Outage; o != nil && !o.Since.Equal(e.Time) {
		// The outage so far: at a close, what it cost; it is over only
		// once the breaker stays closed until SettlesAt.
		attrs = append(attrs,
			slog.Time("outage_since", o.Since),
			slog.String("outage_for", o.Duration.Round(time.Millisecond).String()),
			slog.Int("trips", o.Trips),
			slog.Uint64("refused", o.Refused))
		if e.To == Closed {
			attrs = append(attrs, slog.Time("settles_at", o.SettlesAt))
		}
	}
	l.LogAttrs(context.Background(), level, transitionMessage(e.To),
		slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}

// logTimeout records a change of the adaptive timeout, at Info.
func logTimeout(l *slog.Logger, e Event) {
	c := e.Timeout
	attrs := []slog.Attr{
		slog.String("name", e.Name),
		slog.String("state", e.To.String()),
		slog.String("reason", string(e.Reason)),
		// Strings, as the cooldown.
		slog.String("old", c.Old.String()),
		slog.String("new", c.New.String()),
		slog.Float64("quantile", c.Quantile),
		slog.String("latency", c.Latency.String()),
		slog.Uint64("samples", c.Samples),
	}
	if e.Mode != ModeAuto {
		attrs = append(attrs, slog.String("mode", e.Mode.String()))
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, "timeout changed",
		slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}

// probeMessage is the message of a probe record, by verdict.
func probeMessage(verdict string) string {
	switch verdict {
	case "pass":
		return "probe passed"
	case "fail":
		return "probe failed"
	case "none":
		return "probe not judged"
	case "stale":
		return "probe after its episode"
	}
	return "probe " + verdict
}

// logProbe records one probe's result: verdict "pass", "fail", "none"
// (slot freed) or "stale" (episode over).
func (b *Breaker) logProbe(ctx context.Context, o Outcome, verdict string) {
	l := b.opt.logger
	if l == nil {
		return
	}
	l.LogAttrs(ctx, slog.LevelInfo, probeMessage(verdict), slog.Attr{Key: logGroup, Value: slog.GroupValue(
		slog.String("name", b.name),
		slog.Bool("probe", true),
		slog.String("outcome", o.String()),
		slog.String("verdict", verdict))})
}
