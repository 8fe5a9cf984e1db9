package breaker

import (
	"context"
	"log/slog"
	"math"
)

// logGroup is the key of the slog group that holds a breaker's attributes
// in its log records.
const logGroup = "breaker"

// WithLogger logs every transition of the breaker (or of every breaker of
// a group) as one record, and every probe's result as a record of its own,
// so probes can be told apart from ordinary calls, which are not logged. A
// transition to Open is logged at Warn, everything else at Info. A change
// of the adaptive timeout (Policy.AdaptiveTimeout) is a record too,
// "timeout changed", with the old and new deadlines, the quantile and its
// value, and the number of calls it came from.
//
// The breaker's attributes are in one group, breaker, so that none of them
// can collide with the handler's own keys (time, level, msg) or with the
// logger's own attributes (unless one of them is itself named breaker).
// With slog's text handler a trip reads:
//
//	level=WARN msg="breaker opened" breaker.name=orders.Create breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=0.61 breaker.counted=44 breaker.failures=27 breaker.timeouts=12 breaker.cooldown=30s
//
// and a probe:
//
//	level=INFO msg="probe passed" breaker.name=orders.Create breaker.probe=true breaker.outcome=success breaker.verdict=pass
//
// The JSON handler writes the same attributes as one object,
// "breaker":{"name":"orders.Create","state":"open",...}, with the cooldown
// as a string such as "30s".
//
// Records are written outside the breaker's lock, in the order of the
// transitions. A nil l logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			return
		}
		o.logger = l
		o.hooks = append(o.hooks, func(e Event) { logEvent(l, e) })
	}
}

// transitionMessage is the message of a transition record: it names the
// transition, so a reader need not open the attributes to see what
// happened.
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
	attrs := make([]slog.Attr, 0, 13)
	attrs = append(attrs,
		slog.String("name", e.Name),
		slog.String("state", e.To.String()),
		slog.String("from", e.From.String()),
		slog.String("reason", string(e.Reason)),
		slog.Float64("ratio", math.Round(e.Snapshot.ErrorRatio()*100)/100),
		slog.Uint64("counted", e.Snapshot.Counted),
		slog.Uint64("failures", e.Snapshot.Failures),
		slog.Uint64("timeouts", e.Snapshot.Timeouts),
	)
	if e.Snapshot.Slow > 0 {
		attrs = append(attrs, slog.Uint64("slow", e.Snapshot.Slow))
	}
	if e.To == Open && e.Cooldown > 0 {
		// A string, not slog.Duration: the JSON handler would write
		// nanoseconds, the text handler "30s"; both now write "30s".
		attrs = append(attrs, slog.String("cooldown", e.Cooldown.String()))
	}
	if e.Doublings > 0 {
		attrs = append(attrs, slog.Int("doublings", e.Doublings))
	}
	if e.Mode != ModeAuto {
		attrs = append(attrs, slog.String("mode", e.Mode.String()))
	}
	l.LogAttrs(context.Background(), level, transitionMessage(e.To),
		slog.Attr{Key: logGroup, Value: slog.GroupValue(attrs...)})
}

// logTimeout records a change of the adaptive timeout, at Info:
//
//	level=INFO msg="timeout changed" breaker.name=orders.Create breaker.state=closed breaker.reason=timeout_adapted breaker.old=1s breaker.new=240ms breaker.quantile=0.99 breaker.latency=120ms breaker.samples=5400
func logTimeout(l *slog.Logger, e Event) {
	c := e.Timeout
	attrs := []slog.Attr{
		slog.String("name", e.Name),
		slog.String("state", e.To.String()),
		slog.String("reason", string(e.Reason)),
		// Strings, as the cooldown is, so both handlers write "240ms".
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

// logProbe records one probe's result. verdict is "pass", "fail", "none"
// (an ignored or excused probe that freed its slot) or "stale" (its
// episode had already ended).
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
