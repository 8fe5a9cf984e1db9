package replay

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/govkit/breaker"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteText_Seeds000(t *testing.T) {
	t.Parallel()
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
		"full service back after the fault",
		"orders pool full (s)",
		"breakers, with breaker run",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, regexp.MustCompile(`1:0\d\.\d  open      error_ratio: \d+ of \d+ calls failed, \d+ of them timeouts; cooldown \d+\.\ds  \(\+\d\.\ds into the fault\)`), out)
	assert.Regexp(t, regexp.MustCompile(`closed    probes_passed  \(\+\d+\.\ds after the fault\)`), out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^0:00-0:59  steady: `), out, "quiet seconds before the fault fold into one line")
	assert.Regexp(t, regexp.MustCompile(`(?m)^1:17 +\d+ \| +1\d\d +\d+ \| +\d+ +\d+ \| \.O$`), out, "the worst second of the collapse, with the breaker open")

	var full bytes.Buffer
	require.NoError(t, rep.WriteText(&full, TextOptions{Full: true}))
	assert.NotContains(t, full.String(), "steady:")
	assert.Equal(t, int(rep.Scenario.Duration/time.Second), len(regexp.MustCompile(`(?m)^\d:\d\d +\d+ \|`).FindAllString(full.String(), -1)), "one row per second")
}

// summaryRow returns the cells of the summary row named name.
func summaryRow(t *testing.T, out, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `   +(.*?)   +(.*)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "summary row %q", name)
	return m[1:]
}

// The fallback answers every request while the breaker is open: goodput
// stays near the baseline, full answers drop to nothing. The summary
// shows the two apart.
func TestWriteText_FullAndDegradedApart(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	with := rep.Run(WithBreaker)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()

	full := summaryRow(t, out, "entry full answers, worst second")
	assert.Regexp(t, `^\d+ -> 0/s at 1:[01]\d$`, full[1], "with the breaker open, no full answer")
	good := summaryRow(t, out, "entry goodput (full + degraded), worst second")
	assert.Regexp(t, `^\d+ -> [89]\d\d/s at 1:\d\d$`, good[1], "yet the fallback keeps the goodput up")
	assert.Equal(t, 1.0, with.FullWorstDrop)
	assert.Less(t, with.WorstDrop, 0.3)
	assert.Equal(t, []string{thousands(int64(sum(rep.Run(NoBreaker).Entry.Degraded))), thousands(int64(sum(with.Entry.Degraded)))},
		summaryRow(t, out, "degraded answers (fallback)"))
}

// The breaker closed 19.3 s after the fault; before that every answer was
// degraded, so full service cannot have been back at +0s.
func TestWriteText_FullServiceBackWhenTheBreakerCloses(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	with := rep.Run(WithBreaker)
	closed, ok := call(t, with, "orders->inventory").ClosedAt()
	require.True(t, ok)
	require.True(t, with.Recovered)
	assert.GreaterOrEqual(t, with.Recovery, closed-rep.FaultEnd, "not before the breaker closes")
	assert.LessOrEqual(t, with.Recovery, closed-rep.FaultEnd+2*time.Second, "and soon after")
	assert.InDelta(t, 19, with.Recovery.Seconds(), 1.5)

	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	cells := summaryRow(t, buf.String(), "full service back after the fault")
	assert.Equal(t, "+"+span(with.Recovery), cells[1])
	assert.Contains(t, buf.String(), "full service back: full answers within 5% of the baseline for 5 s")
}

// The report prints one amplification, of goodput, under the goodput
// row, and defines it: it printed the full answers' (32.35x for seeds000)
// where the docs quoted the goodput's (7.5x) under the same name.
func TestWriteText_AmplificationDefined(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	no := rep.Run(NoBreaker)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, "amplification *"), "one amplification")
	assert.Regexp(t, `(?m)^entry goodput \(full \+ degraded\), worst second.*\n  drop vs baseline .*\n  goodput amplification \* +`+regexp.QuoteMeta(amplification(no.Amplification))+` `, out)
	assert.Contains(t, out, "\n"+amplificationNote+"\n")
	assert.Equal(t, "* goodput amplification = baseline goodput / the run's goodput, in the run's worst second of goodput", amplificationNote)
	sec := int(no.WorstAt / time.Second)
	assert.InDelta(t, float64(rep.Run(Baseline).Entry.Good[sec])/float64(no.Entry.Good[sec]), no.Amplification, 1e-12)
}

// "requests lost" counts requests, and agrees with the failed / timed out
// split under it; the worst second is of full answers, as named.
func TestWriteText_LostAndWorstSecondAgree(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()
	assert.NotContains(t, out, "goodput lost")
	for i, run := range rep.faulted() {
		lost := summaryRow(t, out, "requests lost (error or no answer in time)")[i]
		split := summaryRow(t, out, "  failed / timed out")[i]
		f, to := sum(run.Entry.Failed), sum(run.Entry.TimedOut)
		assert.Equal(t, thousands(int64(f+to)), lost, run.Label)
		assert.Equal(t, thousands(int64(f))+" / "+thousands(int64(to)), split, run.Label)
		assert.Equal(t, fmt.Sprintf("-%.1f%%", run.FullWorstDrop*100), summaryRow(t, out, "  drop vs baseline")[i], run.Label)
	}
	assert.Equal(t, "8", summaryRow(t, out, "requests lost (error or no answer in time)")[1])
}

func TestWriteText_Candidate(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	for _, label := range []string{"baseline", "no breaker (worst second: goodput -87%, full answers -97%)",
		"with breaker (worst second: goodput -18%, full answers -100%)", "fault injected",
		"degraded answers (fallback), part of the goodput",
		"breaker orders → inventory, with breaker run: opened 1×", "breaker gateway → orders, with breaker run: never opened",
		"half-open (probing)"} {
		assert.Contains(t, out, label)
	}
	assert.Equal(t, 2, strings.Count(out, `fill="#262626"`), "the one open span of the inventory breaker, and the legend's swatch")
	assert.NotContains(t, out, "NaN")
	assert.NotContains(t, out, "Inf")
}

// titleTexts returns the chart's title lines: its text elements in the
// title's font size, unescaped.
func titleTexts(t *testing.T, svg []byte) []string {
	t.Helper()
	var out []string
	dec := xml.NewDecoder(bytes.NewReader(svg))
	in := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			in = false
			for _, a := range tok.Attr {
				in = in || (tok.Name.Local == "text" && a.Name.Local == "font-size" && a.Value == fmt.Sprint(titleSize))
			}
		case xml.CharData:
			if in {
				out = append(out, string(tok))
			}
		case xml.EndElement:
			in = false
		}
	}
}

// The chart's title names the scenario. A long name ran past the chart's
// right edge, cut there; the title now fits the chart's width: on one
// line when it can, the name on a line of its own when it cannot, and a
// name too long for a line shortened with "…".
func TestWriteSVG_LongScenarioNameFitsTheTitle(t *testing.T) {
	t.Parallel()
	chart := func(name string) []byte {
		m := minimalDoc(t)
		m["name"] = name
		m["duration"] = "12s"
		data, err := json.Marshal(m)
		require.NoError(t, err)
		s, err := ParseScenario(data)
		require.NoError(t, err)
		rep, err := Run(s)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, rep.WriteSVG(&buf))
		return buf.Bytes()
	}
	width := float64(chartWidth - plotLeft - plotRight)
	fits := func(lines []string) {
		for _, l := range lines {
			assert.LessOrEqual(t, boldWidth(l, titleSize), width, "%q fits the chart", l)
		}
	}

	short := titleTexts(t, chart("seeds000"))
	assert.Equal(t, []string{"seeds000: " + chartTitle}, short, "a short name keeps the title on one line")

	name := "checkout-pricing-partial-outage-with-retries-and-a-slow-ledger"
	long := chart(name)
	lines := titleTexts(t, long)
	assert.Equal(t, []string{name + ":", chartTitle}, lines, "the name on a line of its own, whole")
	fits(lines)
	assert.Contains(t, string(long), `y="74" font-size="13"`, "the subtitle moves down a line")

	huge := strings.Repeat("very-long-scenario-name-", 12)
	lines = titleTexts(t, chart(huge))
	require.Len(t, lines, 2)
	fits(lines)
	assert.True(t, strings.HasSuffix(lines[0], "…:"), "a name too long for a line is shortened, visibly: %q", lines[0])
	assert.True(t, strings.HasPrefix(huge, strings.TrimSuffix(lines[0], "…:")))
	assert.Greater(t, len([]rune(lines[0])), 60, "and keeps most of a line")
}

// Both faulted runs of seeds000 answer some requests from the fallback:
// each gets a shaded band of degraded answers in each of the two panels,
// lying between its full answers and its goodput.
func TestWriteSVG_DegradedBand(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "seeds000")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteSVG(&buf))
	shape := svgShape(t, buf.Bytes())
	assert.Equal(t, 2*2, shape["polygon"], "no breaker and with breaker, in both panels")
	assert.Equal(t, 4, strings.Count(buf.String(), `fill-opacity="0.25" stroke="none"`))

	// The same report with every degraded answer counted as full (a copy:
	// the shipped report is shared between tests).
	plain := *rep
	plain.Runs = nil
	for _, run := range rep.Runs {
		cp := *run
		cp.Entry.Degraded = make([]int, len(run.Entry.Degraded))
		plain.Runs = append(plain.Runs, &cp)
	}
	buf.Reset()
	require.NoError(t, plain.WriteSVG(&buf))
	assert.Zero(t, svgShape(t, buf.Bytes())["polygon"], "no fallback answer, no band")
	assert.NotContains(t, buf.String(), "degraded answers (fallback)")
}

func TestWriteSVG_NoZoomWhenTheFaultSpansTheRun(t *testing.T) {
	t.Parallel()
	rep := shippedReport(t, "flapping")
	var buf bytes.Buffer
	require.NoError(t, rep.WriteSVG(&buf))
	shape := svgShape(t, buf.Bytes())
	assert.Equal(t, len(rep.Runs), shape["polyline"])
	assert.NotContains(t, buf.String(), "zoom on")
	assert.Equal(t, len(rep.Scenario.FaultWindows()), strings.Count(buf.String(), `opacity="0.75"`), "one shaded rectangle per fault window")
}

// A policy that differs from the default only in its throttle is named
// by its throttle's fields. Scenario: the report printed "default policy
// with " and nothing after it, as if the candidate were the default.
func TestDescribePolicy_NamesTheThrottle(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.ErrorRatio = 0.8
	p.Throttle = breaker.Throttle{Enabled: true, K: 1.5, MinRequests: 10}
	assert.Equal(t, "default policy with error_ratio=0.8 throttle.enabled=true throttle.k=1.5 throttle.min_requests=10", describePolicy(p))
}
