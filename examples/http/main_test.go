package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The scenario at 0.3 times its length (6 seconds): inventory's breaker
// opens while the server is bad, refuses calls that the fallback answers,
// probes, and is closed at the end; pricing's never opens.
func TestRunShowsOpenProbeClose(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, defaults().scaled(0.3)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)

	lastOpen := strings.LastIndex(text, "inventory  closed -> open (error_ratio")
	if i := strings.LastIndex(text, "inventory  half_open -> open"); i > lastOpen {
		lastOpen = i
	}
	if lastOpen < 0 {
		t.Fatal("inventory's breaker never opened")
	}
	if !strings.Contains(text, "inventory  open -> half_open (cooldown_elapsed)") {
		t.Error("inventory's breaker never went half-open")
	}
	if i := strings.LastIndex(text, "inventory  half_open -> closed (probes_passed)"); i < lastOpen {
		t.Error("inventory's breaker did not close after it last opened")
	}
	// A tick in which inventory was open, refusing calls that the
	// fallback answered.
	open := regexp.MustCompile(`(?m)^\s*\S+\s+inventory\s+\d+\s+\d+\s+\d+\s+([1-9]\d*)\s+([1-9]\d*)\s+\d+\s+open$`)
	if !open.MatchString(text) {
		t.Error("no tick shows inventory open with calls rejected and served by the fallback")
	}
	if !regexp.MustCompile(`(?m)^\s*\S+\s+inventory\s+(\d+\s+){6}closed$`).MatchString(text) {
		t.Error("no tick shows inventory closed")
	}
	if !strings.Contains(text, "inventory: final state closed") {
		t.Error("inventory did not end closed")
	}
	if !regexp.MustCompile(`inventory: final state closed; \d+ calls answered, (\d+) refused \((\d+) of them served by the fallback\)`).MatchString(text) {
		t.Error("inventory's summary is missing")
	}
	if m := regexp.MustCompile(`inventory: final state closed; \d+ calls answered, (\d+) refused \((\d+) of them`).FindStringSubmatch(text); m == nil || m[2] == "0" {
		t.Error("no fallback was counted on the breaker (breaker.FallbackResult)")
	}
	if !regexp.MustCompile(`pricing: final state closed; \d+ calls answered, 0 refused \(0 of them served by the fallback\), 0 opens`).MatchString(text) {
		t.Error("pricing, which stayed healthy, was refused or opened")
	}
	if strings.Contains(text, "pricing    closed -> open") {
		t.Error("pricing's breaker opened")
	}
}
