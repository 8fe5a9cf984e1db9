package ops

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keepShots, when set, is a directory where TestStatusPage_RendersInChromium
// leaves its screenshots, to look at them.
var keepShots = flag.String("status.screenshots", "", "keep the status page's screenshots in this directory")

// needChromium returns the path of chromium. Without it the test is
// skipped, saying what to install, except under CI=true (set by .ci/run,
// which installs it), where a missing browser fails the test.
func needChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not on PATH, and CI=true: install Debian's chromium package (.ci/run does)")
	}
	t.Skip("skipped: chromium is not on PATH; install it (Debian: apt-get install chromium) to run this test")
	return ""
}

// headless runs chromium without a display on url with the extra
// arguments (--screenshot=..., --dump-dom) and returns its standard
// output. The browser gets a profile of its own and nothing that reaches
// beyond the loopback server.
func headless(t *testing.T, bin, url string, width, height int, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(),
		"--window-size=" + strconv.Itoa(width) + "," + strconv.Itoa(height),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Helper processes of the browser may hold its output open after it
	// exits; do not wait for them for ever.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// The page in a real browser, on a laptop's screen and a phone's: the
// screenshots are made, and the DOM the browser built shows the breakers
// open after their downstreams failed, one closed but still in its
// outage (recovering, with when it settles), the P3 alerts, the rejected
// push and the banner of a policy source that is gone. (The screenshot in
// the repository's docs/status-page.png is this test's laptop.png, kept
// with -args -status.screenshots=DIR and reduced to 256 colours by
// pngquant 256.)
func TestStatusPage_RendersInChromium(t *testing.T) {
	bin := needChromium(t)
	gh := newGroupHarness(t, breaker.GroupConfig{})
	src := make(docSource)
	done := make(chan live.Change)
	f, err := live.Follow(context.Background(), gh.g, src, live.OnChange(func(c live.Change) { done <- c }))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	const origin = "file:/etc/shop/breakers.json"
	src <- live.Document{Origin: origin, Version: "sha256:5d41402abc4b2a76",
		Data: []byte(`{"overrides": {"payment.Charge": {"warmup": "30s"}, "inventory.GetStock": {"max_open_for": "30s"}}}`)}
	require.Equal(t, live.Applied, (<-done).Result)
	page := gh.statusPage(StatusConfig{Title: "checkout: breakers", Follower: f})
	at := func(d time.Duration) { gh.clk.Set(gh.t0.Add(d)) }

	// t0: payment times out half the time and trips; its probes time
	// out at 30s and 90s, so its cooldown doubles to 1m, then 2m.
	gh.calls("payment.Charge", 10, nil)
	gh.calls("payment.Charge", 10, context.DeadlineExceeded)
	// t0: catalog fails outright and trips; at 30s its probes pass and
	// it closes: recovering, until it has stayed closed for 2m.
	gh.calls("catalog.List", 20, errBoom)
	at(30 * time.Second)
	gh.calls("payment.Charge", 1, context.DeadlineExceeded)
	gh.calls("catalog.List", 3, nil)
	// 40s: pricing fails outright and trips; its cooldown ends at 70s.
	at(40 * time.Second)
	gh.calls("pricing.GetPrice", 20, errBoom)
	// 80s: one inventory instance fails and trips; its override keeps
	// its cooldown at 30s.
	at(80 * time.Second)
	gh.calls("inventory.GetStock@10.0.0.7", 8, nil)
	gh.calls("inventory.GetStock@10.0.0.7", 4, context.DeadlineExceeded)
	gh.calls("inventory.GetStock@10.0.0.7", 8, errBoom)
	at(90 * time.Second)
	gh.calls("payment.Charge", 1, context.DeadlineExceeded)
	// 92s: a bad push is refused; 93s: the file is deleted.
	at(92 * time.Second)
	src <- live.Document{Origin: origin, Version: "sha256:7f83b1657ff1fc53", Data: []byte(`{"default": {"min_requests": -1}}`)}
	require.Equal(t, live.Rejected, (<-done).Result)
	at(93 * time.Second)
	src <- live.Document{Origin: origin, Gone: true}
	require.Equal(t, live.Gone, (<-done).Result)
	at(94 * time.Second)
	gh.calls("orders.Create", 30, nil)
	gh.calls("orders.Create", 2, errBoom)
	at(95 * time.Second)

	srv := httptest.NewServer(page) // on 127.0.0.1
	defer srv.Close()

	dir := *keepShots
	if dir == "" {
		dir = t.TempDir()
	}
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 1400}, {"phone", 390, 844}} {
		shot := filepath.Join(dir, size.name+".png")
		headless(t, bin, srv.URL, size.width, size.height, "--screenshot="+shot)
		png, err := os.ReadFile(shot)
		require.NoError(t, err, "%s: no screenshot", size.name)
		require.Greater(t, len(png), 1000, size.name)
		assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), png[:8], "%s: not a PNG", size.name)
	}

	dom := string(headless(t, bin, srv.URL, 1280, 1100, "--dump-dom"))
	assert.Contains(t, dom, `data-breaker="payment.Charge" data-state="open"`)
	assert.Contains(t, dom, `data-breaker="inventory.GetStock@10.0.0.7" data-state="open"`)
	assert.Contains(t, dom, `data-breaker="pricing.GetPrice" data-state="half_open"`)
	assert.Contains(t, dom, `<article class="card state-closed recovering" data-breaker="catalog.List" data-state="closed" data-outage-since="2026-03-04T05:06:07Z">`)
	assert.Contains(t, dom, `data-breaker="orders.Create" data-state="closed">`)
	assert.Contains(t, dom, `<p class="banner" id="source-down" role="alert">`)
	txt := text(dom)
	for _, want := range []string{
		"5 breakers 2 open 1 half-open 1 recovering",
		"Policy source gone: file:/etc/shop/breakers.json no longer exists (last reported 05:07:40). " +
			"The breakers keep running on version sha256:5d41402abc4b2a76; no change to their policy can reach them until the source is back.",
		"version sha256:7f83b1657ff1fc53 was rejected: not live (default.min_requests: must not be negative, got -1);",
		"overrides: inventory.GetStock (max_open_for 30s), payment.Charge (warmup 30s)",
		"P3 record P3: breaker catalog.List has been failing for 1m35s (opened on error_ratio: 20 of 20 calls failed, 0 of them timeouts; " +
			"closed at 05:06:37 UTC, settles at 05:08:37 UTC if it stays closed); check the health of catalog.List",
		"P3: breaker payment.Charge has been failing for 1m35s (opened on error_ratio: 10 of 20 calls failed, 10 of them timeouts; now probe_failed); check the health of payment.Charge",
		"payment.Charge open failing for 1m35s , since 05:06:07",
		"opened on error_ratio: 10 of 20 calls failed, 10 of them timeouts; reopened on probe_failed",
		"Next probe at 05:09:37 (in 1m55s), at the end of a cooldown of 2m0s ; the policy's cooldown is 30s, doubling to 2m0s, each drawn within ±20% (jitter).",
		"This page's own grading of this process's breakers",
		"catalog.List closed recovering failing for 1m35s , since 05:06:07",
		"Recovering: closed at 05:06:37, after its probes passed; the outage settles at 05:08:37 (in 55s) if it stays closed, and a trip before then is part of it.",
		"inventory.GetStock @10.0.0.7 open failing for 15s , since 05:07:27",
		"opened on error_ratio: 12 of 20 calls failed, 4 of them timeouts",
		"Next probe at 05:07:57 (in 15s), at the end of a cooldown of 30s ; the policy's cooldown is 30s, drawn within ±20% (jitter).",
		"05:07:37 half-open → open probe_failed , cooldown 2m0s",
	} {
		assert.Contains(t, txt, want)
	}
	assert.NotContains(t, txt, "doubling to 30s", "a fixed cooldown does not double")
	// The recovering card comes after the open and half-open ones, before
	// the closed one.
	assert.Less(t, strings.Index(dom, `data-breaker="pricing.GetPrice"`), strings.Index(dom, `data-breaker="catalog.List"`))
	assert.Less(t, strings.Index(dom, `data-breaker="catalog.List"`), strings.Index(dom, `data-breaker="orders.Create"`))
}

// A key that poses as another, and keys that differ only in bytes that
// are not UTF-8, in a real browser: the DOM it builds holds the escapes,
// set apart, and none of the characters themselves, so the poser's card
// cannot read as the real breaker's name.
func TestStatusPage_ShowsEscapedKeysInChromium(t *testing.T) {
	bin := needChromium(t)
	gh := newGroupHarness(t, breaker.GroupConfig{})
	page := gh.statusPage(StatusConfig{})
	gh.calls("inventory.GetStock@10.0.0.7", 5, nil)
	gh.calls("inventory.GetStock@\u202e7.0.0.01", 20, errBoom)
	gh.calls("orders.Create@\xff", 1, nil)
	gh.calls("orders.Create@\xfe", 1, nil)
	gh.clk.Add(time.Minute)
	srv := httptest.NewServer(page)
	defer srv.Close()

	dir := *keepShots
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "escaped.png")
	headless(t, bin, srv.URL, 1280, 960, "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	require.NoError(t, err, "no screenshot")
	assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), png[:8], "not a PNG")

	dom := string(headless(t, bin, srv.URL, 1280, 960, "--dump-dom"))
	assert.NotContains(t, dom, "\u202e")
	assert.NotContains(t, dom, "\ufffd", "a byte that is not UTF-8 reached the browser")
	assert.Contains(t, dom, `<span class="target">@"<span class="esc">\u202e</span>7.0.0.01"</span>`)
	assert.Contains(t, dom, `<span class="target">@"<span class="esc">\xff</span>"</span>`)
	assert.Contains(t, dom, `<span class="target">@"<span class="esc">\xfe</span>"</span>`)
	assert.Contains(t, dom, `<span class="target">@10.0.0.7</span>`)
	txt := text(dom)
	assert.Contains(t, txt, `P3: breaker "inventory.GetStock@ \u202e 7.0.0.01" has been failing for 1m0s`)
}
