package replay

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// Chart geometry, in SVG user units (pixels at 100%).
const (
	chartWidth  = 960
	plotLeft    = 72
	plotRight   = 24
	legendTop   = 76 // baseline of the first legend line
	legendLine  = 22
	fullHeight  = 300 // the one panel, when there is no zoom
	pairHeight  = 200 // each of the two panels, with a zoom
	panelGap    = 62  // axis labels of one panel and the title of the next
	axisGap     = 40  // from a panel's bottom to the first band row
	bandHeight  = 14
	bandRow     = 34 // band plus the label above it
	chartBottom = 44
)

// zoomShare is the largest share of the run the action (faults and breaker
// transitions) may cover for the chart to add a zoomed panel: a 20 s fault
// in a 5 minute run is 57 pixels wide at full scale.
const zoomShare = 0.4

// Colours. Runs are told apart by hue and, for the baseline, by dashes;
// breaker states by lightness, so the band still reads in greyscale.
var runColor = map[RunKind]string{
	Baseline:     "#8c8c8c",
	NoBreaker:    "#d62728",
	WithBreaker:  "#1f63b4",
	CandidateRun: "#8e44ad",
}

// Runs often coincide (before the fault, or where a breaker never opened);
// each later line is narrower, so the earlier ones show along its edges
// instead of vanishing under it.
var lineWidth = map[RunKind]float64{
	Baseline:     1.5,
	NoBreaker:    4.5,
	WithBreaker:  2.75,
	CandidateRun: 1.5,
}

var stateColor = map[breaker.State]string{
	breaker.Closed:   "#d7e8d0",
	breaker.HalfOpen: "#f2b705",
	breaker.Open:     "#262626",
}

const faultColor = "#f4c7c3"

// degradedOpacity is how strongly a run's degraded answers are shaded, in
// its own colour, between its full answers and its goodput; the legend's
// swatch uses degradedSwatch.
const (
	degradedOpacity = 0.25
	degradedSwatch  = "#404040"
)

// WriteSVG draws the entry's goodput per second for every run with the
// fault windows shaded, and one band per guarded call and run showing the
// breaker's state over time. When the fault and the breakers' activity
// take up a small part of the run, a second panel zooms in on them. The
// SVG is self-contained (no scripts, no external fonts) and the same for
// the same report.
func (r *Report) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	newChart(r).write(bw)
	return bw.Flush()
}

type chart struct {
	r       *Report
	yMax    float64
	clipped bool
	// degraded says whether some run answered with a fallback.
	degraded bool
	plotW    float64
	legend   [][]legendItem
	// title is the title's lines; head is how much lower than on a
	// one-line title everything below it is drawn.
	title   []string
	head    int
	panels  []panel
	bands   []band
	bandTop int
	height  int
}

// panel is one plot of goodput over [from, to).
type panel struct {
	from, to time.Duration
	top      int
	height   int
	title    string
}

type band struct {
	run  *RunResult
	call *CallResult
}

func newChart(r *Report) *chart {
	base := r.Run(Baseline)
	c := &chart{r: r, plotW: chartWidth - plotLeft - plotRight}
	// Scale to the baseline rather than to every run: when a backlog
	// drains after a fault, the burst of late answers can reach twice the
	// normal rate, and fitting it would flatten the part that matters.
	peak := float64(maxOf(base.Entry.Good))
	limit := peak * 1.25
	for _, run := range r.Runs {
		if m := float64(maxOf(run.Entry.Good)); m > limit {
			c.clipped = true
		} else {
			peak = max(peak, m)
		}
	}
	c.yMax = niceCeil(max(peak*1.1, 1))
	for _, run := range r.Runs {
		if run.Kind < WithBreaker {
			continue
		}
		for i := range run.Calls {
			if run.Calls[i].Breaker {
				c.bands = append(c.bands, band{run: run, call: &run.Calls[i]})
			}
		}
	}
	for _, run := range r.Runs {
		c.degraded = c.degraded || sum(run.Entry.Degraded) > 0
	}
	c.title = titleLines(r.Scenario.Name, c.plotW)
	c.head = (len(c.title) - 1) * titleLine
	c.legend = c.legendLines()
	top := c.head + legendTop + len(c.legend)*legendLine + 2
	d := r.Scenario.Duration
	if from, to, ok := c.zoom(); ok {
		c.panels = []panel{
			{from: 0, to: d, top: top, height: pairHeight},
			{from: from, to: to, top: top + pairHeight + panelGap, height: pairHeight,
				title: fmt.Sprintf("zoom on %s-%s", clockSec(int(from/time.Second)), clockSec(int(to/time.Second)))},
		}
	} else {
		c.panels = []panel{{from: 0, to: d, top: top, height: fullHeight}}
	}
	last := c.panels[len(c.panels)-1]
	c.bandTop = last.top + last.height + axisGap
	c.height = c.bandTop + len(c.bands)*bandRow + chartBottom
	return c
}

// zoom returns the span worth a closer look: from a little before the
// first fault to a little after the last fault ended or the last breaker
// changed state, whichever is later.
func (c *chart) zoom() (from, to time.Duration, ok bool) {
	r := c.r
	if r.FaultEnd == 0 {
		return 0, 0, false
	}
	end := r.FaultEnd
	for _, run := range r.Runs {
		for i := range run.Calls {
			if n := len(run.Calls[i].Transitions); n > 0 {
				end = max(end, run.Calls[i].Transitions[n-1].At)
			}
		}
	}
	d := r.Scenario.Duration
	from = max(0, (r.FaultStart - 10*time.Second).Truncate(5*time.Second))
	to = min(d, (end + 20*time.Second).Truncate(5*time.Second))
	return from, to, to-from < time.Duration(zoomShare*float64(d))
}

func (c *chart) x(p panel, t time.Duration) float64 {
	return plotLeft + c.plotW*float64(t-p.from)/float64(p.to-p.from)
}

func (c *chart) y(p panel, v float64) float64 {
	return float64(p.top) + float64(p.height)*(1-v/c.yMax)
}

func (c *chart) write(w *bufio.Writer) {
	s := c.r.Scenario
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		chartWidth, c.height, chartWidth, c.height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	for i, line := range c.title {
		fmt.Fprintf(w, `<text x="%d" y="%d" font-size="%d" font-weight="bold" fill="#1a1a1a">%s</text>`+"\n",
			plotLeft, 28+i*titleLine, titleSize, esc(line))
	}
	var faults []string
	for _, f := range s.Faults {
		faults = append(faults, f.Summary())
	}
	sub := fmt.Sprintf("%s req/s at %s · fault: %s", trimFloat(s.Entry.Rate), s.Entry.Tier, strings.Join(faults, "; "))
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="13" fill="#404040">%s</text>`+"\n", plotLeft, 50+c.head, esc(trunc(sub, 130)))
	c.writeLegend(w)
	for i, p := range c.panels {
		c.writePanel(w, i, p)
	}
	if len(c.panels) == 2 {
		// Mark on the full panel the span the zoom shows.
		full, zoom := c.panels[0], c.panels[1]
		x0, x1 := c.x(full, zoom.from), c.x(full, zoom.to)
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="none" stroke="#555" stroke-width="1" stroke-dasharray="3 3"/>`+"\n",
			x0, full.top, x1-x0, full.height)
	}
	c.writeBands(w, c.panels[len(c.panels)-1])
	fmt.Fprintln(w, `</svg>`)
}

type legendItem struct {
	swatch func(x, y float64) string
	label  string
}

func (it legendItem) width() float64 { return 26 + textWidth(it.label, 13) + 22 }

// legendLines lays the legend out in lines that fit the plot's width.
func (c *chart) legendLines() [][]legendItem {
	var items []legendItem
	for _, run := range c.r.Runs {
		label := run.Label
		if run.Kind != Baseline {
			label += fmt.Sprintf(" (worst second: goodput -%.0f%%, full answers -%.0f%%)", run.WorstDrop*100, run.FullWorstDrop*100)
		}
		color, dash := runColor[run.Kind], ""
		if run.Kind == Baseline {
			dash = ` stroke-dasharray="6 4"`
		}
		items = append(items, legendItem{label: label, swatch: func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`, x, y, x+20, y, color, dash)
		}})
	}
	if c.degraded {
		items = append(items, legendItem{label: "degraded answers (fallback), part of the goodput", swatch: func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="20" height="12" fill="%s" fill-opacity="%.2f"/>`, x, y-6, degradedSwatch, degradedOpacity)
		}})
	}
	if len(c.r.Scenario.Faults) > 0 {
		items = append(items, legendItem{label: "fault injected", swatch: func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="20" height="12" fill="%s"/>`, x, y-6, faultColor)
		}})
	}
	var lines [][]legendItem
	var line []legendItem
	used := 0.0
	for _, it := range items {
		if len(line) > 0 && used+it.width() > c.plotW {
			lines = append(lines, line)
			line, used = nil, 0
		}
		line = append(line, it)
		used += it.width()
	}
	return append(lines, line)
}

func (c *chart) writeLegend(w *bufio.Writer) {
	for i, line := range c.legend {
		x, y := float64(plotLeft), float64(c.head+legendTop+i*legendLine)
		for _, it := range line {
			fmt.Fprintln(w, it.swatch(x, y))
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="13" fill="#1a1a1a">%s</text>`+"\n", x+26, y+4.5, esc(it.label))
			x += it.width()
		}
	}
}

func (c *chart) writePanel(w *bufio.Writer, i int, p panel) {
	clip := fmt.Sprintf("plot%d", i)
	fmt.Fprintf(w, `<defs><clipPath id="%s"><rect x="%d" y="%d" width="%.1f" height="%d"/></clipPath></defs>`+"\n",
		clip, plotLeft, p.top, c.plotW, p.height)
	if p.title != "" {
		fmt.Fprintf(w, `<text x="%d" y="%d" font-size="13" font-weight="bold" fill="#1a1a1a">%s</text>`+"\n", plotLeft, p.top-8, esc(p.title))
	}
	// Fault windows.
	for k, win := range c.r.Scenario.FaultWindows() {
		if win.End <= p.from || win.Start >= p.to {
			continue
		}
		x0, x1 := c.x(p, max(win.Start, p.from)), c.x(p, min(win.End, p.to))
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.75"/>`+"\n",
			x0, p.top, max(x1-x0, 1), p.height, faultColor)
		if k == 0 {
			fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="12" fill="#a33">fault</text>`+"\n", x0+3, p.top+14)
		}
	}
	// Grid and y labels.
	step := niceStep(c.yMax, p.height/50)
	for v := 0.0; v <= c.yMax+step/1e6; v += step {
		y := c.y(p, v)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3" stroke-width="1"/>`+"\n", plotLeft, y, plotLeft+c.plotW, y)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" font-size="12" fill="#404040" text-anchor="end">%s</text>`+"\n", plotLeft-8, y+4, trimFloat(v))
	}
	fmt.Fprintf(w, `<text transform="translate(18 %d) rotate(-90)" font-size="12" fill="#404040" text-anchor="middle">requests/s</text>`+"\n", p.top+p.height/2)
	// Time axis.
	bottom := p.top + p.height
	tick := timeStep(p.to - p.from)
	for t := p.from.Truncate(tick); t <= p.to; t += tick {
		if t < p.from {
			continue
		}
		x := c.x(p, t)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#808080" stroke-width="1"/>`+"\n", x, bottom, x, bottom+5)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="12" fill="#404040" text-anchor="middle">%s</text>`+"\n", x, bottom+19, clockSec(int(t/time.Second)))
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#808080" stroke-width="1"/>`+"\n", plotLeft, bottom, plotLeft+c.plotW, bottom)
	fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="12" fill="#404040" text-anchor="end">time (m:ss)</text>`+"\n", plotLeft+c.plotW, bottom+34)
	if c.clipped {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="11" fill="#606060" text-anchor="end">bursts of late answers above %s/s are cut off</text>`+"\n",
			plotLeft+c.plotW-4, p.top+14, trimFloat(c.yMax))
	}
	// Under each run's line, its degraded answers: a light band from its
	// full answers up to its goodput.
	for _, run := range c.r.Runs {
		if sum(run.Entry.Degraded) == 0 {
			continue
		}
		var top, bottom []string
		for sec, v := range run.Entry.Good {
			t := time.Duration(sec)*time.Second + time.Second/2
			if t < p.from-time.Second || t > p.to+time.Second {
				continue
			}
			x := c.x(p, t)
			full := float64(v - run.Entry.Degraded[sec])
			top = append(top, fmt.Sprintf("%.1f,%.1f", x, c.y(p, math.Min(float64(v), c.yMax*1.02))))
			bottom = append(bottom, fmt.Sprintf("%.1f,%.1f", x, c.y(p, math.Min(full, c.yMax*1.02))))
		}
		for i, j := 0, len(bottom)-1; i < j; i, j = i+1, j-1 {
			bottom[i], bottom[j] = bottom[j], bottom[i]
		}
		fmt.Fprintf(w, `<polygon clip-path="url(#%s)" fill="%s" fill-opacity="%.2f" stroke="none" points="%s"/>`+"\n",
			clip, runColor[run.Kind], degradedOpacity, strings.Join(append(top, bottom...), " "))
	}
	// One line per run, a point in the middle of each second.
	for _, run := range c.r.Runs {
		var pts strings.Builder
		for sec, v := range run.Entry.Good {
			t := time.Duration(sec)*time.Second + time.Second/2
			if t < p.from-time.Second || t > p.to+time.Second {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", c.x(p, t), c.y(p, math.Min(float64(v), c.yMax*1.02)))
		}
		dash := ""
		if run.Kind == Baseline {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(w, `<polyline clip-path="url(#%s)" fill="none" stroke="%s" stroke-width="%.2f" stroke-linejoin="round"%s points="%s"/>`+"\n",
			clip, runColor[run.Kind], lineWidth[run.Kind], dash, strings.TrimSpace(pts.String()))
	}
}

// writeBands draws each guarded call's breaker state under panel p, on p's
// time scale.
func (c *chart) writeBands(w *bufio.Writer, p panel) {
	if len(c.bands) == 0 {
		return
	}
	if p.from > 0 || p.to < c.r.Scenario.Duration {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="11" fill="#606060" text-anchor="end">breaker states on the zoom's time scale</text>`+"\n",
			plotLeft+c.plotW, c.bandTop+11)
	}
	for i, b := range c.bands {
		y := c.bandTop + i*bandRow
		label := fmt.Sprintf("breaker %s, %s run", strings.Replace(b.call.Name, "->", " → ", 1), b.run.Label)
		if n := b.call.Opens(); n > 0 {
			label += fmt.Sprintf(": opened %d×", n)
		} else {
			label += ": never opened"
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" font-size="12" fill="%s">%s</text>`+"\n", plotLeft, y+11, runColor[b.run.Kind], esc(label))
		by := y + 15
		// Closed is the background; open and half-open spans go on top.
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", plotLeft, by, c.plotW, bandHeight, stateColor[breaker.Closed])
		fill := func(st breaker.State, from, to time.Duration) {
			from, to = max(from, p.from), min(to, p.to)
			if st == breaker.Closed || to <= from {
				return
			}
			x0, x1 := c.x(p, from), c.x(p, to)
			fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, by, max(x1-x0, 1.5), bandHeight, stateColor[st])
		}
		cur, since := breaker.Closed, time.Duration(0)
		for _, t := range b.call.Transitions {
			fill(cur, since, t.At)
			cur, since = t.To, t.At
		}
		fill(cur, since, p.to)
	}
	// State legend, right-aligned under the bands.
	y := c.bandTop + len(c.bands)*bandRow + 14
	x := plotLeft + c.plotW
	for _, st := range []breaker.State{breaker.HalfOpen, breaker.Open, breaker.Closed} {
		label := st.String()
		if st == breaker.HalfOpen {
			label = "half-open (probing)"
		}
		x -= textWidth(label, 12)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="12" fill="#404040">%s</text>`+"\n", x, y+10, esc(label))
		x -= 22
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="16" height="12" fill="%s" stroke="#999" stroke-width="0.5"/>`+"\n", x, y, stateColor[st])
		x -= 18
	}
}

// textWidth estimates the rendered width of s; the chart only needs it to
// space legend items, so an average glyph width is close enough.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * 0.58
}

// titleSize is the font size of the chart's title, titleLine the
// distance between its lines.
const (
	titleSize = 18
	titleLine = 24
)

// chartTitle is what the title says after the scenario's name.
const chartTitle = "entry goodput per second (shaded: the part degraded by a fallback)"

// titleLines lays the chart's title out in lines of at most width: the
// scenario's name and chartTitle on one line if they fit, else the name
// on a line of its own, shortened with "…" if it alone is too wide, so
// that the title is never cut at the chart's edge.
func titleLines(name string, width float64) []string {
	fits := func(s string) bool { return boldWidth(s, titleSize) <= width }
	if one := name + ": " + chartTitle; fits(one) {
		return []string{one}
	}
	head := name + ":"
	if !fits(head) {
		r := []rune(name)
		n := max(int(width/(boldWidth("x", titleSize)))-2, 1)
		for n > 1 && !fits(string(r[:min(n, len(r))])+"…:") {
			n--
		}
		head = string(r[:min(n, len(r))]) + "…:"
	}
	return []string{head, chartTitle}
}

// boldWidth estimates the width of s in bold at size: textWidth's
// estimate, which fits a bold title of lower-case words, with a margin
// for wider letters.
func boldWidth(s string, size float64) float64 { return textWidth(s, size) * 1.05 }

// niceCeil rounds v up to a round number a grid divides well.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// niceStep picks a grid step that divides max into at most n parts.
func niceStep(max float64, n int) float64 {
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func timeStep(d time.Duration) time.Duration {
	for _, s := range []time.Duration{
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	} {
		if d/s <= 12 {
			return s
		}
	}
	return 15 * time.Minute
}

var svgEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func esc(s string) string { return svgEscaper.Replace(s) }
