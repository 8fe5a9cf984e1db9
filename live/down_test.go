package live_test

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debugHarness is a follow harness whose group logs at Debug and above.
func debugHarness(t *testing.T) (*followHarness, *testutil.LogBuffer) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	h := newFollowHarness(t, breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(logs,
		&slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))))
	return h, logs
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// lines returns the records logged since the last call.
type logCursor struct {
	logs *testutil.LogBuffer
	seen int
}

func (c *logCursor) lines() []string {
	s := c.logs.String()
	out := strings.Split(strings.TrimSpace(s[c.seen:]), "\n")
	c.seen = len(s)
	if len(out) == 1 && out[0] == "" {
		return nil
	}
	return out
}

// The version in force put back after the source was gone or unreadable
// is logged at Info, as the source back with nothing changed, with what
// it was; it used to be logged at Debug ("breaker policy unchanged"), so
// that at a service's usual level the operator saw the WARN of the
// deleted file and nothing when it came back. A plain re-delivery of the
// version in force stays at Debug.
func TestFollow_TheVersionInForcePutBackAfterTheSourceWasDownIsLoggedAtInfo(t *testing.T) {
	h, logs := debugHarness(t)
	cur := &logCursor{logs: logs}
	h.doc("v1", goodDoc)
	cur.lines()

	h.send(live.Document{Gone: true})
	assert.Equal(t, live.Unchanged, h.doc("v1", goodDoc).Result)
	assert.Equal(t, []string{
		`level=WARN msg="breaker policy gone" breaker.origin=test:policies breaker.in_force=v1`,
		`level=INFO msg="breaker policy source back, unchanged" breaker.origin=test:policies breaker.version=v1 breaker.in_force=v1 breaker.after=gone`,
	}, cur.lines())

	h.send(live.Document{Err: errors.New("connection refused")})
	h.doc("v1", goodDoc)
	assert.Equal(t, []string{
		`level=WARN msg="breaker policy unreadable" breaker.origin=test:policies breaker.in_force=v1 breaker.error="connection refused"`,
		`level=INFO msg="breaker policy source back, unchanged" breaker.origin=test:policies breaker.version=v1 breaker.in_force=v1 breaker.after=unreadable`,
	}, cur.lines())

	// A refused edit, the file deleted, then the version in force put
	// back: the record names both what it ends.
	h.doc("v2", badDoc)
	h.send(live.Document{Gone: true})
	cur.lines()
	h.doc("v1", goodDoc)
	assert.Equal(t, []string{
		`level=INFO msg="breaker policy source back, unchanged" breaker.origin=test:policies breaker.version=v1 breaker.in_force=v1 breaker.after=gone breaker.rejected=v2`,
	}, cur.lines())

	// Delivered again with nothing before it to end: Debug.
	h.doc("v1", goodDoc)
	assert.Equal(t, []string{
		`level=DEBUG msg="breaker policy unchanged" breaker.origin=test:policies breaker.version=v1 breaker.in_force=v1`,
	}, cur.lines())
}

// A source that stays gone is logged at Warn once, when it goes; the same
// state delivered again while it stays down is logged at Debug (and still
// counted, and kept in Status.Down), so that a source that repeats itself
// does not flood the log. A different error is news, at Warn.
func TestFollow_ASourceThatStaysDownIsLoggedAtWarnOnce(t *testing.T) {
	h, logs := debugHarness(t)
	cur := &logCursor{logs: logs}
	h.doc("v1", goodDoc)
	cur.lines()

	for i := 0; i < 3; i++ {
		h.send(live.Document{Gone: true})
	}
	assert.Equal(t, []string{
		`level=WARN msg="breaker policy gone" breaker.origin=test:policies breaker.in_force=v1`,
		`level=DEBUG msg="breaker policy still gone" breaker.origin=test:policies breaker.in_force=v1`,
		`level=DEBUG msg="breaker policy still gone" breaker.origin=test:policies breaker.in_force=v1`,
	}, cur.lines())

	h.send(live.Document{Err: errors.New("connection refused")})
	h.send(live.Document{Err: errors.New("connection refused")})
	h.send(live.Document{Err: errors.New("permission denied")})
	h.send(live.Document{Gone: true})
	assert.Equal(t, []string{
		`level=WARN msg="breaker policy unreadable" breaker.origin=test:policies breaker.in_force=v1 breaker.error="connection refused"`,
		`level=DEBUG msg="breaker policy still unreadable" breaker.origin=test:policies breaker.in_force=v1 breaker.error="connection refused"`,
		`level=WARN msg="breaker policy unreadable" breaker.origin=test:policies breaker.in_force=v1 breaker.error="permission denied"`,
		`level=WARN msg="breaker policy gone" breaker.origin=test:policies breaker.in_force=v1`,
	}, cur.lines())
	st := h.f.Status()
	assert.Equal(t, live.Reloads{Applied: 1, Gone: 4, Unreadable: 3}, st.Reloads)
	require.NotNil(t, st.Down)
	assert.Equal(t, live.Gone, st.Down.Result)
	assert.Equal(t, "v1", h.g.PolicyLabel().Version, "the version in force keeps running")
}

// A followed file deleted and left so for many looks is one WARN, at the
// start; put back as it was, it is one INFO saying the source is back,
// where it was a DEBUG record below a service's level. (At Info, as a
// service logs.)
func TestFileSource_AFileDeletedAndPutBackIsOneWarnThenOneInfo(t *testing.T) {
	h := newFileHarness(t, fileV2)
	v := h.next().Version
	cur := &logCursor{logs: h.logs}
	cur.lines()
	require.NoError(t, os.Remove(h.path))
	for i := 0; i < 10; i++ {
		h.tick()
	}
	assert.Equal(t, live.Gone, h.next().Result)
	h.none()
	assert.Equal(t, []string{
		`level=WARN msg="breaker policy gone" breaker.origin=file:` + h.path + ` breaker.in_force=` + v,
	}, cur.lines())
	require.NotNil(t, h.f.Status().Down)

	h.write(fileV2)
	h.tick()
	assert.Equal(t, live.Unchanged, h.next().Result)
	assert.Equal(t, []string{
		`level=INFO msg="breaker policy source back, unchanged" breaker.origin=file:` + h.path +
			` breaker.version=` + v + ` breaker.in_force=` + v + ` breaker.after=gone`,
	}, cur.lines())
	assert.Nil(t, h.f.Status().Down)
}
