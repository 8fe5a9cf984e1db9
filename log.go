package breaker

import (
	"context"
	"log/slog"
	"math"
)

// WithLogger logs every transition of the breaker (or of every breaker of
// a group) as one record, and every probe's result as a record of its own,
// so probes can be told apart from ordinary calls, which are not logged. A
// transition to Open is logged at Warn, everything else at Info. With
// slog's text handler a trip reads:
//
//	level=WARN msg=breaker breaker=open name=orders.Create reason=err_ratio ratio=0.61 counted=44 failures=27 timeouts=12 cooldown=30s from=closed
//
// and a probe:
//
//	level=INFO msg="breaker probe" breaker_probe=1 name=orders.Create outcome=success verdict=pass
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

func logEvent(l *slog.Logger, e Event) {
	level := slog.LevelInfo
	if e.To == Open && e.Mode != ModeShadow {
		level = slog.LevelWarn
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("breaker", e.To.String()),
		slog.String("name", e.Name),
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
		attrs = append(attrs, slog.Duration("cooldown", e.Cooldown))
	}
	attrs = append(attrs, slog.String("from", e.From.String()))
	if e.Doublings > 0 {
		// The attribute keeps its earlier key.
		attrs = append(attrs, slog.Int("level", e.Doublings))
	}
	if e.Mode != ModeAuto {
		attrs = append(attrs, slog.String("mode", e.Mode.String()))
	}
	l.LogAttrs(context.Background(), level, "breaker", attrs...)
}

// logProbe records one probe's result. verdict is "pass", "fail", "none"
// (an ignored or excused probe that freed its slot) or "stale" (its
// episode had already ended).
func (b *Breaker) logProbe(ctx context.Context, o Outcome, verdict string) {
	l := b.opt.logger
	if l == nil {
		return
	}
	l.LogAttrs(ctx, slog.LevelInfo, "breaker probe",
		slog.Int("breaker_probe", 1),
		slog.String("name", b.name),
		slog.String("outcome", o.String()),
		slog.String("verdict", verdict))
}
