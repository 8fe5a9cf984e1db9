package replay

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteText_Seeds000(t *testing.T) {
	rep := shippedReport(t, "seeds000")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()

	for _, want := range []string{
		"scenario  seeds000",
		"inventory: 40% errors, 20% slow (+5s) for 20s from 1:00.0",
		"with breaker: default policy on gateway->orders, orders->inventory",
		"drop vs baseline",
		"amplification",
		"recovered after the fault",
		"orders pool full (s)",
		"breakers, with breaker run",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, regexp.MustCompile(`1:0\d\.\d  open      err_ratio: \d+/\d+ failed, \d+ timeouts; cooldown \d+\.\ds  \(\+\d\.\ds into the fault\)`), out)
	assert.Regexp(t, regexp.MustCompile(`closed    probes_passed  \(\+\d+\.\ds after the fault\)`), out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^0:00-0:59  steady: `), out, "quiet seconds before the fault fold into one line")
	assert.Regexp(t, regexp.MustCompile(`(?m)^1:14 +\d+ \| +0 +0 \| +\d+ +\d+ \| \.O$`), out, "a second of the collapse, with the breaker open")

	var full bytes.Buffer
	require.NoError(t, rep.WriteText(&full, TextOptions{Full: true}))
	assert.NotContains(t, full.String(), "steady:")
	assert.Equal(t, 300, len(regexp.MustCompile(`(?m)^\d:\d\d +\d+ \|`).FindAllString(full.String(), -1)), "one row per second")
}

func TestWriteText_Candidate(t *testing.T) {
	rep := shippedReport(t, "cold-start")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()
	assert.Contains(t, out, "no warmup: default policy with warmup=0s on orders->inventory")
	assert.Contains(t, out, "breakers, no warmup run")
	assert.Contains(t, out, "never opened")
}

// svgShape parses an SVG and counts its elements by name.
func svgShape(t *testing.T, data []byte) map[string]int {
	t.Helper()
	counts := map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	return counts
}

func TestWriteSVG_Seeds000(t *testing.T) {
	rep := shippedReport(t, "seeds000")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteSVG(&buf))
	out := buf.String()
	shape := svgShape(t, buf.Bytes())
	assert.Equal(t, 1, shape["svg"])
	// A 20 s fault in 5 minutes gets a zoomed panel: each run is drawn
	// twice.
	assert.Equal(t, 2*len(rep.Runs), shape["polyline"])
	assert.Contains(t, out, "zoom on 0:50-")
	for _, label := range []string{"baseline", "no breaker (worst -100%)", "with breaker (worst -", "fault injected",
		"breaker orders → inventory, with breaker run: opened 1×", "breaker gateway → orders, with breaker run: never opened",
		"half-open (probing)"} {
		assert.Contains(t, out, label)
	}
	assert.Equal(t, 2, strings.Count(out, `fill="#262626"`), "the one open span of the inventory breaker, and the legend's swatch")
	assert.NotContains(t, out, "NaN")
	assert.NotContains(t, out, "Inf")
}

func TestWriteSVG_NoZoomWhenTheFaultSpansTheRun(t *testing.T) {
	rep := shippedReport(t, "flapping")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteSVG(&buf))
	shape := svgShape(t, buf.Bytes())
	assert.Equal(t, len(rep.Runs), shape["polyline"])
	assert.NotContains(t, buf.String(), "zoom on")
	assert.Equal(t, 9, strings.Count(buf.String(), `opacity="0.75"`), "one shaded rectangle per fault window")
}
