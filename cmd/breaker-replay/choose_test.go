package main

import (
	"strings"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -choose prints a Markdown table per scenario with a row per
// protection. A protection whose policy the breaker refuses (the
// throttle ones, until the breaker has Policy.Throttle) is reported on
// stderr with its policy, its row says it did not run, and the exit
// status is exitError; the others' rows are printed all the same.
func TestChoose_OneScenario(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-choose", "-scenario", "partial-outage", "-seeds", "1")
	assert.Contains(t, stdout, replay.ComparisonLegend)
	assert.Contains(t, stdout, "### partial-outage\n")
	assert.Contains(t, stdout, "| protection | goodput kept | worst second | fallbacks | load (req/s) | back after (s) | openings |\n")
	assert.Regexp(t, `\n\| none \| 60\.3% \| 33\.0% \| 0 \| 199 \| \+0 \| 0 \|\n`, stdout)
	assert.Regexp(t, `\n\| breaker \| 1\.9% \| 0\.0% \| 0 \| 14 \| \+40 \| 2 \|\n`, stdout)
	assert.Contains(t, stderr, "compared 4 protections on 1 scenarios over 1 seeds in ")
	refused := 0
	for _, p := range replay.Protections() {
		if p.Overlay == "" {
			continue
		}
		if _, err := breaker.ParsePolicy([]byte(p.Overlay)); err != nil {
			refused++
			assert.Contains(t, stdout, "| "+p.Name+" | not run: policy refused (below) |")
			assert.Contains(t, stderr, "breaker-replay: replay: protection "+p.Name+": policy "+p.Overlay+" on checkout->pricing: ")
		} else {
			assert.Regexp(t, `\n\| `+p.Name+` \| [0-9.]+%`, stdout)
		}
	}
	if refused > 0 {
		assert.Equal(t, exitError, code)
	} else {
		assert.Equal(t, exitOK, code, stderr)
	}
}

// -protections picks the protections by name; the two that need no
// throttle run today and exit cleanly.
func TestChoose_Protections(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-choose", "-scenario", "partial-outage", "-seeds", "1", "-protections", "breaker, none")
	require.Equal(t, exitOK, code, stderr)
	i, j := strings.Index(stdout, "| breaker |"), strings.Index(stdout, "| none |")
	assert.True(t, i > 0 && j > i, "rows in the order given:\n%s", stdout)
	assert.NotContains(t, stdout, "throttle")

	code, _, stderr = runCmd(t, "-choose", "-protections", "breaker,circuit")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `-protections: no protection "circuit" (have none, breaker, throttle, both)`)

	code, _, stderr = runCmd(t, "-choose", "-seeds", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-seeds: must be in [1, 1000], got 0")
}

// A protection named twice is refused, naming it: the table would hold
// the same rows twice. Regression: "none,none" compared "2 protections".
func TestChoose_AProtectionNamedTwiceIsRefused(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-choose", "-seeds", "1", "-protections", "none, none")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, `-protections: "none" is named twice`)
	assert.Empty(t, stdout)
}
