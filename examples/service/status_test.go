package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pageText is a page with its tags and style taken out and its spaces
// squeezed, as a person reads it.
func pageText(page string) string {
	page = regexp.MustCompile(`(?s)<style>.*?</style>|<[^>]*>`).ReplaceAllString(page, " ")
	return strings.Join(strings.Fields(page), " ")
}

// chromium runs the headless browser on url with args (--screenshot=...,
// --dump-dom) and returns its standard output.
func chromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// /status after a fault: inventory fails, its breaker opens, and the
// page, in a real browser, shows it open with its next probe.
func TestService_StatusPageInChromium(t *testing.T) {
	in := start(t)
	for i := 0; i < 3; i++ {
		in.product()
	}
	in.fault("inventory=error")
	// Seven failures on top of three successes: 7/10 trips it.
	for i := 0; i < 7; i++ {
		code, body := in.get("/product?sku=42")
		require.Equal(t, http.StatusBadGateway, code, body)
	}
	code, html := in.get("/product?sku=42")
	require.Equal(t, http.StatusServiceUnavailable, code, html)
	in.clk.Add(5 * time.Second)

	code, html = in.get("/status")
	require.Equal(t, http.StatusOK, code)
	txt := pageText(html)
	for _, want := range []string{
		"service: breakers",
		"2 breakers 1 open 0 half-open",
		"inventory.GetStock open failing for 5s , since 03:04:05",
		"opened on error_ratio: 7 of 10 calls failed, 0 of them timeouts",
		"Since then: 1 call refused.",
		"(in 10s), at the end of a cooldown of 15s ; the policy's cooldown is 15s, doubling to 1m0s, each drawn within ±20% (jitter).",
		"closed → open error_ratio , cooldown 15s",
		"pricing.GetPrice closed",
		"overrides: inventory.GetStock (call_timeout 200ms), pricing.GetPrice (call_timeout 300ms)",
	} {
		assert.Contains(t, txt, want)
	}

	bin := needTool(t, "chromium", "chromium")
	shot := filepath.Join(t.TempDir(), "status.png")
	chromium(t, bin, in.base+"/status", "--window-size=1100,860", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	require.NoError(t, err, "no screenshot")
	assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), png[:8], "not a PNG")
	dom := string(chromium(t, bin, in.base+"/status", "--window-size=1100,860", "--dump-dom"))
	assert.Contains(t, dom, `data-breaker="inventory.GetStock" data-state="open"`)
	assert.Contains(t, pageText(dom), "opened on error_ratio: 7 of 10 calls failed")
}
