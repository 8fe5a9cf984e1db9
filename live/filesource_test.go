package live_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	fileV1 = `{"default": {"min_requests": 10}}`
	fileV2 = `{"default": {"min_requests": 10}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
)

// fileHarness is a group following a file, driven by ticks the test
// sends; tick waits until the source has looked, so that a look that
// delivers nothing can be waited for too.
type fileHarness struct {
	t     *testing.T
	dir   string
	path  string
	g     *breaker.Group
	f     *live.Follower
	ticks chan time.Time
	done  chan struct{}
	rec   chan live.Change
	logs  *testutil.LogBuffer
}

func newFileHarness(t *testing.T, initial string) *fileHarness {
	t.Helper()
	h := &fileHarness{t: t, dir: t.TempDir(), ticks: make(chan time.Time), done: make(chan struct{}), rec: make(chan live.Change, 16), logs: &testutil.LogBuffer{}}
	h.path = filepath.Join(h.dir, "breakers.json")
	if initial != "" {
		h.write(initial)
	}
	var err error
	h.g, err = breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.TextLogger(h.logs)))
	require.NoError(t, err)
	src, err := live.NewFileSource(h.path, live.FileConfig{Tick: func(time.Duration) (<-chan time.Time, func()) {
		return h.ticks, func() {}
	}})
	require.NoError(t, err)
	live.SetChecked(src, func() { h.done <- struct{}{} })
	h.f, err = live.Follow(context.Background(), h.g, src, live.OnChange(func(c live.Change) { h.rec <- c }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.f.Close()) })
	return h
}

// write replaces the file in place.
func (h *fileHarness) write(content string) {
	h.t.Helper()
	require.NoError(h.t, os.WriteFile(h.path, []byte(content), 0o644))
}

// tick makes the source look at the file once, and waits until it has.
func (h *fileHarness) tick() {
	h.t.Helper()
	h.ticks <- time.Time{}
	<-h.done
}

func (h *fileHarness) next() live.Change {
	h.t.Helper()
	select {
	case c := <-h.rec:
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no policy record")
		return live.Change{}
	}
}

func (h *fileHarness) none() {
	h.t.Helper()
	select {
	case c := <-h.rec:
		h.t.Fatalf("unexpected record %+v", c)
	default:
	}
}

func (h *fileHarness) openFor(key string) time.Duration {
	return mustGet(h.t, h.g, key).Policy().OpenFor
}

// promptly bounds what must happen at once, such as Close returning,
// generously: far above a loaded machine's scheduling delays, far below
// a goroutine stuck for good.
const promptly = 5 * time.Second

func nextRecord(t *testing.T, rec <-chan live.Change) live.Change {
	t.Helper()
	select {
	case c := <-rec:
		return c
	case <-time.After(promptly):
		t.Fatal("no policy record")
		return live.Change{}
	}
}

// within fails the test if do does not return within promptly; it never
// waits for it longer.
func within(t *testing.T, what string, do func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); do() }()
	select {
	case <-done:
	case <-time.After(promptly):
		t.Fatalf("%s did not return within %v", what, promptly)
	}
}

// A huge file (here a sparse one of 1 TiB) is read no further than the
// limit, and refused at once. Every look read and hashed the whole file,
// which took minutes each time, and the follower could not stop
// meanwhile.
func TestFileSource_AHugeFileIsReadOnlyToTheLimit(t *testing.T) {
	h := newFileHarness(t, fileV1)
	v := h.next().Version
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString(fileV2)
	require.NoError(t, err)
	if err := f.Truncate(1 << 40); err != nil {
		f.Close()
		t.Skipf("no sparse file of 1 TiB here: %v", err)
	}
	require.NoError(t, f.Close())
	// Not complete JSON (NUL bytes follow the document): held back one
	// look, refused at the next.
	within(t, "a look at a 1 TiB file", h.tick)
	h.none()
	within(t, "a second look at a 1 TiB file", h.tick)
	c := nextRecord(t, h.rec)
	assert.Equal(t, live.Rejected, c.Result)
	assert.Equal(t, v, c.InForce)
	require.NotEmpty(t, c.Problems)
	assert.Contains(t, c.Problems[0].Problem, "more than 1048576 bytes")
}

func TestFileSource_DeliversTheFileAtStartWithItsOriginAndHash(t *testing.T) {
	h := newFileHarness(t, fileV1)
	c := h.next()
	assert.Equal(t, live.Applied, c.Result)
	assert.Equal(t, "file:"+h.path, c.Origin)
	assert.Regexp(t, `^sha256:[0-9a-f]{16}$`, c.Version)
	assert.Equal(t, 10, mustGet(t, h.g, "orders.Create").Policy().MinRequests)
	h.tick()
	h.none() // unchanged: nothing delivered
	assert.Equal(t, "file:"+h.path, h.f.Status().Following)
	label := h.g.PolicyLabel()
	assert.Equal(t, "file:"+h.path, label.Origin)
	assert.Equal(t, c.Version, label.Version)
}

// An editor writes a new file and renames it over the old one.
func TestFileSource_FollowsAFileRenamedOverTheOld(t *testing.T) {
	h := newFileHarness(t, fileV1)
	v1 := h.next().Version
	tmp := filepath.Join(h.dir, ".breakers.json.swp")
	require.NoError(t, os.WriteFile(tmp, []byte(fileV2), 0o644))
	require.NoError(t, os.Rename(tmp, h.path))
	h.tick()
	c := h.next()
	assert.Equal(t, live.Applied, c.Result)
	assert.NotEqual(t, v1, c.Version)
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"))
}

// A Kubernetes ConfigMap volume: breakers.json -> ..data/breakers.json,
// ..data -> ..2026_01_02_03_04_05.1, and an update swaps ..data to a new
// directory with one rename.
func TestFileSource_FollowsAConfigMapDataSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mkVersion := func(name, content string) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "breakers.json"), []byte(content), 0o644))
	}
	mkVersion("..2026_01_02_03_04_05.1", fileV1)
	require.NoError(t, os.Symlink("..2026_01_02_03_04_05.1", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "breakers.json"), filepath.Join(dir, "breakers.json")))

	h := &fileHarness{t: t, dir: dir, path: filepath.Join(dir, "breakers.json"), ticks: make(chan time.Time), done: make(chan struct{}), rec: make(chan live.Change, 16)}
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	h.g = g
	src, err := live.NewFileSource(h.path, live.FileConfig{Tick: func(time.Duration) (<-chan time.Time, func()) { return h.ticks, func() {} }})
	require.NoError(t, err)
	live.SetChecked(src, func() { h.done <- struct{}{} })
	f, err := live.Follow(context.Background(), g, src, live.OnChange(func(c live.Change) { h.rec <- c }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	assert.Equal(t, live.Applied, h.next().Result)

	// What the kubelet does: a new directory, a new link, renamed over
	// ..data, the old directory removed.
	mkVersion("..2026_01_02_03_09_05.2", fileV2)
	require.NoError(t, os.Symlink("..2026_01_02_03_09_05.2", filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_01_02_03_04_05.1")))
	h.tick()
	c := h.next()
	assert.Equal(t, live.Applied, c.Result)
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"))
}

// A file missing at one look is being replaced: nothing is reported.
func TestFileSource_AFileBrieflyMissingIsNotReported(t *testing.T) {
	h := newFileHarness(t, fileV1)
	h.next()
	require.NoError(t, os.Remove(h.path))
	h.tick()
	h.none()
	h.write(fileV1)
	h.tick()
	h.none() // back as it was
	require.NoError(t, os.Remove(h.path))
	h.tick()
	h.write(fileV2)
	h.tick()
	c := h.next()
	assert.Equal(t, live.Applied, c.Result, "the new content, never gone")
	assert.Equal(t, live.Reloads{Applied: 2}, h.f.Status().Reloads)
}

// A writer caught in the middle: incomplete JSON is held back one look.
func TestFileSource_AHalfWrittenFileIsNotReportedUntilItStaysSo(t *testing.T) {
	h := newFileHarness(t, fileV1)
	h.next()
	h.write(fileV2[:30])
	h.tick()
	h.none()
	h.write(fileV2)
	h.tick()
	c := h.next()
	assert.Equal(t, live.Applied, c.Result)
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"))

	// A document that stays broken is a bad document, and is said so.
	h.write(fileV1[:20])
	h.tick()
	h.none()
	h.tick()
	c = h.next()
	assert.Equal(t, live.Rejected, c.Result)
	assert.Contains(t, c.Problems[0].Problem, "the document ends early at byte 20")
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"), "kept")
}

// A deleted file keeps the last good policy, and the group says so.
func TestFileSource_ADeletedFileKeepsTheLastGoodPolicy(t *testing.T) {
	h := newFileHarness(t, fileV2)
	v := h.next().Version
	require.NoError(t, os.Remove(h.path))
	h.tick()
	h.tick()
	c := h.next()
	assert.Equal(t, live.Gone, c.Result)
	assert.Equal(t, v, c.InForce)
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"))
	h.tick()
	h.none() // said once
	assert.Contains(t, h.logs.String(), `level=WARN msg="breaker policy gone" breaker.origin=file:`+h.path+" breaker.in_force="+v)

	h.write(fileV2)
	h.tick()
	c = h.next()
	assert.Equal(t, live.Unchanged, c.Result, "back as it was: delivered again, and the version in force")
	assert.Equal(t, v, c.Version)
	assert.Empty(t, c.Changes)
}

func TestFileSource_AMissingFileAtStartIsReportedAtOnce(t *testing.T) {
	h := newFileHarness(t, "")
	c := h.next()
	assert.Equal(t, live.Gone, c.Result)
	assert.Equal(t, "", c.InForce)
	assert.Equal(t, breaker.OriginCode, h.g.PolicyLabel().Origin, "the code's policy stays")
	h.write(fileV1)
	h.tick()
	assert.Equal(t, live.Applied, h.next().Result)
}

func TestFileSource_AnUnreadableFileIsReportedOnce(t *testing.T) {
	h := newFileHarness(t, fileV1)
	h.next()
	require.NoError(t, os.Remove(h.path))
	require.NoError(t, os.Mkdir(h.path, 0o755)) // a directory in its place
	h.tick()
	c := h.next()
	assert.Equal(t, live.Unreadable, c.Result)
	assert.Contains(t, c.Err, "is a directory")
	h.tick()
	h.none()
	assert.Equal(t, 10, mustGet(t, h.g, "x").Policy().MinRequests)
}

func TestFileSource_ChecksEverySecondByDefaultOnTheGivenClock(t *testing.T) {
	_, err := live.NewFileSource("", live.FileConfig{})
	assert.Error(t, err)
	_, err = live.NewFileSource("x.json", live.FileConfig{Interval: -1})
	assert.Error(t, err)

	dir := t.TempDir()
	path := filepath.Join(dir, "breakers.json")
	require.NoError(t, os.WriteFile(path, []byte(fileV1), 0o644))
	clk := clock.NewMock()
	var interval time.Duration
	src, err := live.NewFileSource(path, live.FileConfig{Tick: func(d time.Duration) (<-chan time.Time, func()) {
		interval = d
		tk := clk.Ticker(d)
		return tk.C, tk.Stop
	}})
	require.NoError(t, err)
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithClock(clk), breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	rec := make(chan live.Change, 4)
	f, err := live.Follow(context.Background(), g, src, live.OnChange(func(c live.Change) { rec <- c }))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.Equal(t, live.Applied, (<-rec).Result)
	assert.Equal(t, time.Second, interval)

	require.NoError(t, os.WriteFile(path, []byte(fileV2), 0o644))
	deadline := time.Now().Add(10 * time.Second)
	for f.Status().Reloads.Applied < 2 && time.Now().Before(deadline) {
		clk.Add(time.Second) // the mock's ticker may drop a tick the source has not taken yet
	}
	c := <-rec
	assert.Equal(t, live.Applied, c.Result)
	assert.True(t, strings.HasPrefix(c.Origin, "file:"))
}

// A file over the size limit is read only that far, and refused.
func TestFileSource_AFileOverTheLimitIsRefused(t *testing.T) {
	h := newFileHarness(t, fileV2)
	v := h.next().Version
	// A valid document followed by white space: what is read is complete
	// JSON, delivered at once, and refused for its size.
	h.write(fileV1 + strings.Repeat(" ", breaker.MaxPolicyDocumentSize))
	h.tick()
	c := h.next()
	assert.Equal(t, live.Rejected, c.Result)
	assert.Equal(t, v, c.InForce)
	require.NotEmpty(t, c.Problems)
	assert.Contains(t, c.Problems[0].Problem, "more than 1048576 bytes")
	assert.Equal(t, 45*time.Second, h.openFor("payment.Charge"))

	// Cut inside the document, what is read is not complete JSON: held
	// back one look, then refused.
	h.write(`{"default": {"min_requests": 10}, "overrides": {"x": {"probes": 2` + strings.Repeat(" ", breaker.MaxPolicyDocumentSize) + `}}}`)
	h.tick()
	h.none()
	h.tick()
	c = h.next()
	assert.Equal(t, live.Rejected, c.Result)
	assert.Contains(t, c.Problems[0].Problem, "more than 1048576 bytes")
}
