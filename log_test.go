package breaker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isProbeRecord tells whether r is a probe's record: its breaker group
// carries probe=true.
func isProbeRecord(r slog.Record) bool {
	probe := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != logGroup || a.Value.Kind() != slog.KindGroup {
			return true
		}
		for _, g := range a.Value.Group() {
			if g.Key == "probe" && g.Value.Kind() == slog.KindBool && g.Value.Bool() {
				probe = true
			}
		}
		return false
	})
	return probe
}

// jsonRecords decodes one JSON object per line.
func jsonRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m), line)
		recs = append(recs, m)
	}
	return recs
}

// behaviour.md §6 Observability: every attribute of the breaker is in the
// group "breaker", so no key of the record collides with the handler's own
// (a cooldown level logged as "level" used to sit beside the record's
// level, and pipelines that keep the last key lost the severity).
func TestLogger_JSONRecordsKeepTheBreakerInOneGroup(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	h := newHarness(t, policy(func(p *Policy) {
		p.OpenFor = 30 * time.Second
		p.MaxOpenFor = 5 * time.Minute
	}), WithLogger(l))
	h.calls(5, nil)
	h.calls(10, context.DeadlineExceeded)
	h.calls(5, errBoom) // trips
	h.at(30 * time.Second)
	// A timed-out probe fails the episode (a failure would pass it, as
	// StrictProbes is off): the breaker reopens with its cooldown doubled.
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(Open)

	recs := jsonRecords(t, buf.String())
	require.Len(t, recs, 4, buf.String())
	for i, r := range recs {
		for k := range r {
			assert.Contains(t, []string{"time", "level", "msg", "breaker"}, k, "record %d has a top-level key %q", i, k)
		}
		assert.Contains(t, r, "time")
		delete(r, "time")
	}
	group := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	n := func(s string) json.Number { return json.Number(s) }
	assert.Equal(t, map[string]any{"level": "WARN", "msg": "breaker opened", "breaker": group(
		"name", "inventory.GetStock", "state", "open", "from", "closed", "reason", "error_ratio",
		"ratio", n("0.75"), "counted", n("20"), "failures", n("15"), "timeouts", n("10"),
		"cooldown", "30s")}, recs[0])
	assert.Equal(t, map[string]any{"level": "INFO", "msg": "breaker half-open", "breaker": group(
		"name", "inventory.GetStock", "state", "half_open", "from", "open", "reason", "cooldown_elapsed",
		"trip_reason", "error_ratio",
		"ratio", n("0.75"), "counted", n("20"), "failures", n("15"), "timeouts", n("10"),
		"outage_since", "2026-01-02T03:04:05Z", "outage_for", "30s", "trips", n("1"), "refused", n("0"))}, recs[1])
	assert.Equal(t, map[string]any{"level": "INFO", "msg": "probe failed", "breaker": group(
		"name", "inventory.GetStock", "probe", true, "outcome", "timeout", "verdict", "fail")}, recs[2])
	assert.Equal(t, map[string]any{"level": "WARN", "msg": "breaker opened", "breaker": group(
		"name", "inventory.GetStock", "state", "open", "from", "half_open", "reason", "probe_failed",
		"trip_reason", "error_ratio",
		"ratio", n("0.75"), "counted", n("20"), "failures", n("15"), "timeouts", n("10"),
		"cooldown", "1m0s", "doublings", n("1"),
		"outage_since", "2026-01-02T03:04:05Z", "outage_for", "30s", "trips", n("1"), "refused", n("0"))}, recs[3])
}

// The text handler writes the same group as dotted keys; a shadow breaker's
// opening is Info and says its mode.
func TestLogger_TextRecordsUseDottedKeys(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	h := newHarness(t, DefaultPolicy(), WithLogger(l))
	require.NoError(t, h.b.SetMode(ModeShadow))
	h.calls(20, errBoom)
	assert.Equal(t, `level=INFO msg="breaker opened" breaker.name=inventory.GetStock breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=1 breaker.counted=20 breaker.failures=20 breaker.timeouts=0 breaker.cooldown=30s breaker.mode=shadow`,
		strings.TrimSpace(buf.String()))
}

// No record repeats a key, which log pipelines that keep the last of two
// equal keys would lose: here a breaker reopens after a failed probe, so
// its transition record carries the cooldown's doublings beside its level.
// Regression (0c9a3bc): the doublings went out as "level", hiding the severity.
func TestLogger_RecordsHaveNoDuplicateKeys(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness(t, DefaultPolicy(), WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	h.trip()
	h.at(30 * time.Second)
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(Open)
	require.Equal(t, 1, h.eventLog()[2].Doublings)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4, buf.String())
	for _, line := range lines {
		dec := json.NewDecoder(strings.NewReader(line))
		_, err := dec.Token() // {
		require.NoError(t, err)
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			require.NoError(t, err)
			key := k.(string)
			assert.False(t, seen[key], "key %q twice in %s", key, line)
			seen[key] = true
			var v json.RawMessage
			require.NoError(t, dec.Decode(&v))
		}
	}
}

// probePanicHandler is a log handler that panics on a probe record.
type probePanicHandler struct{ slog.Handler }

func (h probePanicHandler) Handle(ctx context.Context, r slog.Record) error {
	if isProbeRecord(r) {
		panic("handler bug")
	}
	return nil
}
func (h probePanicHandler) Enabled(context.Context, slog.Level) bool { return true }

// A log handler that panics strands no event: here it panics on the record
// of each probe, the last of which closes the breaker; the panic goes on to
// the caller, and the close event is delivered all the same.
// Regression (c92ab56): the close event stayed queued until a later transition.
func TestLogger_APanickingHandlerDoesNotStrandTheNextEvent(t *testing.T) {
	h := newHarness(t, DefaultPolicy(), WithLogger(slog.New(probePanicHandler{slog.NewTextHandler(io.Discard, nil)})))
	h.trip()
	h.at(30 * time.Second)
	for i := 0; i < 3; i++ {
		assert.PanicsWithValue(t, "handler bug", func() { _ = h.call(nil) })
	}
	h.requireState(Closed)
	assert.Equal(t, []string{"closed>open:error_ratio", "open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}, h.transitions())
}

// behaviour.md §6: an opening's record leads with the evidence of the
// rule that tripped: the failures for the ratio rule, the slow calls and
// their ratio for the slow rule, the run for the consecutive rule.
// Regression: a slow trip's record read "ratio=0 … slow=88", as if
// nothing had failed.
func TestLogger_AnOpeningCarriesTheEvidenceOfItsRule(t *testing.T) {
	opening := func(t *testing.T, p Policy, drive func(h *harness)) string {
		t.Helper()
		buf := &lockedBuffer{}
		h := newHarness(t, p, WithLogger(slogTo(buf)))
		drive(h)
		h.requireState(Open)
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, `msg="breaker opened"`) {
				return line
			}
		}
		t.Fatalf("no opening in %q", buf.String())
		return ""
	}
	ratio := opening(t, DefaultPolicy(), func(h *harness) {
		h.calls(10, nil)
		h.calls(5, context.DeadlineExceeded)
		h.calls(5, errBoom)
	})
	assert.Contains(t, ratio, "breaker.reason=error_ratio breaker.ratio=0.5 breaker.counted=20 breaker.failures=10 breaker.timeouts=5")

	slow := opening(t, policy(func(p *Policy) { p.SlowCall, p.SlowRatio, p.MinRequests = 200*time.Millisecond, 0.5, 10 }), func(h *harness) {
		for range 10 {
			_ = h.b.Do(context.Background(), func(context.Context) error { h.add(400 * time.Millisecond); return nil })
		}
	})
	assert.Contains(t, slow, "breaker.reason=slow_ratio")
	assert.Contains(t, slow, "breaker.slow=10 breaker.slow_ratio=1")

	run := opening(t, policy(func(p *Policy) { p.ConsecutiveFailures = 5 }), func(h *harness) {
		h.calls(3, nil)
		h.calls(5, errBoom)
	})
	assert.Contains(t, run, "breaker.reason=consecutive_failures")
	assert.Contains(t, run, "breaker.run=5")
}
