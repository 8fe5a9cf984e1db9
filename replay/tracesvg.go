package replay

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/ops"
)

// maxTracePanels bounds the keys WriteSVG draws: the ones with something
// to see come first.
const maxTracePanels = 20

// Geometry of a trace chart's panel, in SVG user units.
const (
	tracePanel  = 150 // plot height
	traceBands  = 2 * bandRow
	traceHeader = 84 // title, policy, accounting and legend of the panel
	traceFooter = 30 // axis labels
)

// WriteSVG draws, for each key on which a breaker refused or a call failed
// (at most 20, the busiest first, then the others as space allows), the
// recorded calls per second with those that failed and those refused in
// the recording and by the candidate, and two bands: when the recorded
// breaker refused calls, and the candidate's state. The SVG is
// self-contained and the same for the same report.
func (r *TraceReport) WriteSVG(w io.Writer) error {
	keys := r.chartKeys()
	height := 48 + len(keys)*(traceHeader+tracePanel+traceFooter+traceBands) + 16
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" font-size="16" font-weight="bold">Recorded calls replayed through a candidate policy</text>`+"\n", plotLeft)
	sub := fmt.Sprintf("%s calls from %s over %s, %d keys", thousands(int64(r.Calls)), r.Start.Format(time.RFC3339), span(r.Length), len(r.Keys))
	if n := len(r.Keys) - len(keys); n > 0 {
		sub += fmt.Sprintf(" (%d quiet or beyond the first %d not drawn)", n, maxTracePanels)
	}
	p(`<text x="%d" y="42" fill="#555">%s</text>`+"\n", plotLeft, esc(sub))
	top := 48
	for _, k := range keys {
		r.writeKeyPanel(p, k, top)
		top += traceHeader + tracePanel + traceFooter + traceBands
	}
	p("</svg>\n")
	return bw.Flush()
}

// chartKeys picks the keys to draw: those with failures or refusals, the
// most eventful first, then quiet ones while there is room.
func (r *TraceReport) chartKeys() []*KeyReport {
	var busy, quiet []*KeyReport
	for _, k := range r.Keys {
		if k.Failed+k.Refused+k.FailuresAvoided+k.SuccessesLost+k.IgnoredRefused+k.BothRefused > 0 {
			busy = append(busy, k)
		} else {
			quiet = append(quiet, k)
		}
	}
	events := func(k *KeyReport) int { return k.Failed + k.Refused + k.FailuresAvoided + k.SuccessesLost }
	for i := 1; i < len(busy); i++ { // insertion sort: stable, and few keys
		for j := i; j > 0 && events(busy[j]) > events(busy[j-1]); j-- {
			busy[j], busy[j-1] = busy[j-1], busy[j]
		}
	}
	out := append(busy, quiet...)
	if len(out) > maxTracePanels {
		out = out[:maxTracePanels]
	}
	return out
}

func (r *TraceReport) writeKeyPanel(p func(string, ...any), k *KeyReport, top int) {
	n := len(k.Seconds)
	plotW := float64(chartWidth - plotLeft - plotRight)
	x := func(sec float64) float64 { return float64(plotLeft) + plotW*sec/float64(max(n, 1)) }
	peak := 1
	for _, s := range k.Seconds {
		peak = max(peak, int(s.Calls))
	}
	y0 := float64(top + traceHeader + tracePanel)
	y := func(v int) float64 { return y0 - float64(tracePanel)*float64(v)/float64(peak) }

	p(`<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, top+18, esc(ops.Printable(k.Key)))
	p(`<text x="%d" y="%d" fill="#555">%s</text>`+"\n", plotLeft, top+36, esc(trunc("candidate: "+describePolicy(k.Policy), 140)))
	summary := fmt.Sprintf("recorded %s calls, %s refused%s; the candidate refuses %s%s: failures avoided %s, successes lost %s; unknown %s",
		thousands(int64(k.Calls)), thousands(int64(k.Refused)), byThrottle(k.Throttled, "the"),
		thousands(int64(k.FailuresAvoided+k.SuccessesLost+k.IgnoredRefused+k.BothRefused)), byThrottle(k.CandidateThrottled, "its"),
		thousands(int64(k.FailuresAvoided)), thousands(int64(k.SuccessesLost)), thousands(int64(k.Unknown)))
	p(`<text x="%d" y="%d" fill="#555">%s</text>`+"\n", plotLeft, top+52, esc(trunc(summary, 140)))

	series := []struct {
		label, color string
		width        float64
		get          func(TraceSecond) int
	}{
		{"calls/s", "#8c8c8c", 1.5, func(s TraceSecond) int { return int(s.Calls) }},
		{"failed or timed out", "#d62728", 2.5, func(s TraceSecond) int { return int(s.Failed) }},
		{"recorded: open, refused", "#262626", 2, func(s TraceSecond) int { return int(s.Refused - s.Throttled) }},
		{"recorded: throttled", throttleColor, 2, func(s TraceSecond) int { return int(s.Throttled) }},
		{"refused by the candidate", runColor[CandidateRun], 1.5, func(s TraceSecond) int { return int(s.CandidateRefused) }},
	}
	if !k.throttles() {
		series = append(series[:3], series[4])
		series[2].label = "refused in the recording"
	}
	lx := plotLeft
	for _, s := range series {
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%g"/>`, lx, top+72, lx+18, top+72, s.color, s.width)
		p(`<text x="%d" y="%d">%s</text>`+"\n", lx+22, top+76, esc(s.label))
		lx += 40 + 7*len(s.label)
	}
	p(`<line x1="%d" y1="%g" x2="%d" y2="%g" stroke="#ccc"/>`+"\n", plotLeft, y0, chartWidth-plotRight, y0)
	p(`<text x="%d" y="%g" text-anchor="end" fill="#555">%d</text>`+"\n", plotLeft-6, y(peak)+4, peak)
	p(`<text x="%d" y="%g" text-anchor="end" fill="#555">0</text>`+"\n", plotLeft-6, y0+4)
	for _, s := range series {
		var pts strings.Builder
		for sec, v := range k.Seconds {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(float64(sec)+0.5), y(s.get(v)))
		}
		p(`<polyline fill="none" stroke="%s" stroke-width="%g" points="%s"/>`+"\n", s.color, s.width, strings.TrimSpace(pts.String()))
	}
	// Time axis: a label every tenth of the trace, on whole seconds.
	step := max(1, n/10)
	for sec := 0; sec <= n; sec += step {
		p(`<text x="%.1f" y="%g" text-anchor="middle" fill="#555">%s</text>`+"\n", x(float64(sec)), y0+18, clockSec(sec))
	}

	// The two bands: recorded refusals, and the candidate's states.
	by := int(y0) + traceFooter
	// band writes a band's label and its closed background at by, with
	// the seconds throttled marked on it: label, or throttling if the
	// chart tells the throttle's refusals apart.
	band := func(label, throttling string, throttled func(TraceSecond) bool) {
		if k.throttles() {
			label = throttling
		}
		p(`<text x="%d" y="%d">%s</text>`+"\n", plotLeft, by+12, label)
		p(`<rect x="%d" y="%d" width="%g" height="%d" fill="%s"/>`+"\n", plotLeft, by+16, plotW, bandHeight, stateColor[breaker.Closed])
		throttledSeconds(p, k, throttled, x, by+16)
	}
	band("recorded breaker (black: refusing calls)",
		"recorded breaker (black: open, refusing calls; blue: closed, throttling)",
		func(s TraceSecond) bool { return s.Throttled > 0 })
	for _, s := range k.Recorded {
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x(s.From.Seconds()), by+16, max(x(s.To.Seconds())-x(s.From.Seconds()), 1), bandHeight, stateColor[breaker.Open])
	}
	by += bandRow
	band("candidate breaker (black: open, amber: half-open)",
		"candidate breaker (black: open, amber: half-open, blue: closed, throttling)",
		func(s TraceSecond) bool { return s.CandidateThrottled > 0 })
	for i, t := range k.Transitions {
		if t.To == breaker.Closed {
			continue
		}
		end := time.Duration(n) * time.Second
		if i+1 < len(k.Transitions) {
			end = k.Transitions[i+1].At
		}
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x(t.At.Seconds()), by+16, max(x(end.Seconds())-x(t.At.Seconds()), 1), bandHeight, stateColor[t.To])
	}
}

// throttleColor marks the throttle's refusals: a closed breaker refusing
// some calls.
const throttleColor = "#4a90c2"

// throttles says whether the recorded breaker or the candidate throttled
// calls of the key: the chart then tells the throttle's refusals apart.
func (k *KeyReport) throttles() bool { return k.Throttled+k.CandidateThrottled > 0 }

// throttledSeconds marks on a band, at y, the seconds in which a throttle
// refused calls (in), each run of them as one rectangle; the open spans
// drawn after it cover the seconds a breaker was open.
func throttledSeconds(p func(string, ...any), k *KeyReport, in func(TraceSecond) bool, x func(float64) float64, y int) {
	for sec := 0; sec < len(k.Seconds); sec++ {
		if !in(k.Seconds[sec]) {
			continue
		}
		end := sec + 1
		for end < len(k.Seconds) && in(k.Seconds[end]) {
			end++
		}
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x(float64(sec)), y, max(x(float64(end))-x(float64(sec)), 1), bandHeight, throttleColor)
		sec = end
	}
}
