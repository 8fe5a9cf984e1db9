package replay

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

func states(run *RunResult, sec int) string {
	var sb strings.Builder
	at := time.Duration(sec+1)*time.Second - 1
	for i := range run.Calls {
		c := &run.Calls[i]
		if !c.Breaker {
			continue
		}
		switch c.StateAt(at) {
		case breaker.Open:
			sb.WriteByte('O')
		case breaker.HalfOpen:
			sb.WriteByte('h')
		default:
			sb.WriteByte('.')
		}
	}
	return sb.String()
}

// clock formats an instant of the scenario as m:ss.s.
func clock(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	m := int(d / time.Minute)
	s := float64(d%time.Minute) / float64(time.Second)
	return fmt.Sprintf("%d:%04.1f", m, s)
}

func clockSec(sec int) string { return fmt.Sprintf("%d:%02d", sec/60, sec%60) }

// span formats a length of time with one decimal: 850ms, 4.0s, 1m19.3s.
func span(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(100 * time.Millisecond)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	sec := (d % time.Minute).Seconds()
	if h > 0 {
		return fmt.Sprintf("%dh%dm%.1fs", h, m, sec)
	}
	return fmt.Sprintf("%dm%.1fs", m, sec)
}

// amplificationNote defines the one amplification the reports print.
const amplificationNote = "* goodput amplification = baseline goodput / the run's goodput, in the run's worst second of goodput"

func amplification(a float64) string {
	if math.IsInf(a, 1) {
		return "inf (nothing answered)"
	}
	return fmt.Sprintf("%.2fx", a)
}

// amplificationShort is amplification for a table of spreads.
func amplificationShort(a float64) string {
	if math.IsInf(a, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.1fx", a)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func trunc(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

func arrivals(a Arrivals) string {
	if a == "" {
		return string(Poisson)
	}
	return string(a)
}

func dist(d Dist) string {
	if d == "" {
		return string(Exponential)
	}
	return string(d)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func minOf(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > width {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		lines = append(lines, line)
	}
	return lines
}
