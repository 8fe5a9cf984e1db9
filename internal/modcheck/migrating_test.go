package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
)

// sentinelRule is a sentinel-golang circuitbreaker.Rule as its JSON
// names it; decoding refuses any other name, so the page's example uses
// sentinel's own.
type sentinelRule struct {
	ID                           string  `json:"id"`
	Resource                     string  `json:"resource"`
	Strategy                     int     `json:"strategy"` // 0 slow-request ratio, 1 error ratio, 2 error count
	RetryTimeoutMs               uint32  `json:"retryTimeoutMs"`
	MinRequestAmount             uint64  `json:"minRequestAmount"`
	StatIntervalMs               uint32  `json:"statIntervalMs"`
	StatSlidingWindowBucketCount uint32  `json:"statSlidingWindowBucketCount"`
	MaxAllowedRtMs               uint64  `json:"maxAllowedRtMs"`
	Threshold                    float64 `json:"threshold"`
	ProbeNum                     uint64  `json:"probeNum"`
}

// fromSentinel applies docs/migrating.md's table to the rules of one
// resource. It fails the test where the page says the rules do not map:
// different windows, cooldowns or probe counts, or two rules of one
// strategy.
func fromSentinel(t *testing.T, rules []sentinelRule) breaker.Policy {
	t.Helper()
	require.NotEmpty(t, rules)
	ms := func(n uint64) time.Duration { return time.Duration(n) * time.Millisecond }
	first := rules[0]
	p := breaker.DefaultPolicy()
	p.Window = ms(uint64(first.StatIntervalMs))
	p.Buckets = max(int(first.StatSlidingWindowBucketCount), 1)
	p.OpenFor, p.MaxOpenFor, p.Jitter = ms(uint64(first.RetryTimeoutMs)), ms(uint64(first.RetryTimeoutMs)), 0
	p.Probes, p.StrictProbes = max(int(first.ProbeNum), 1), true
	p.MinRequests = 0
	p.ErrorRatio = 0 // unless an error-ratio rule sets it
	seen := map[int]bool{}
	for _, r := range rules {
		require.Equal(t, first.Resource, r.Resource)
		require.Equal(t, first.StatIntervalMs, r.StatIntervalMs, "%s: rules with different windows do not map onto one policy", r.Resource)
		require.Equal(t, first.StatSlidingWindowBucketCount, r.StatSlidingWindowBucketCount, "%s: one window, one bucket count", r.Resource)
		require.Equal(t, first.RetryTimeoutMs, r.RetryTimeoutMs, "%s: one cooldown", r.Resource)
		require.Equal(t, first.ProbeNum, r.ProbeNum, "%s: one probe count", r.Resource)
		require.False(t, seen[r.Strategy], "%s: two rules of strategy %d do not map onto one policy", r.Resource, r.Strategy)
		seen[r.Strategy] = true
		p.MinRequests = max(p.MinRequests, int(r.MinRequestAmount))
		switch r.Strategy {
		case 0:
			p.SlowCall, p.SlowRatio = ms(r.MaxAllowedRtMs), r.Threshold
		case 1:
			p.ErrorRatio = r.Threshold
		case 2:
			p.ErrorCount = int(r.Threshold)
		default:
			t.Fatalf("%s: unknown strategy %d", r.Resource, r.Strategy)
		}
	}
	require.NoError(t, p.Validate())
	return p
}

// TestMigrating_SentinelRulesBecomeOnePolicy: docs/migrating.md's two
// sentinel rules on one resource (a slow-request ratio and an error ratio
// over one window), put through the page's table, give exactly the
// policy document the page shows, and that document loads into a group.
func TestMigrating_SentinelRulesBecomeOnePolicy(t *testing.T) {
	section := pageSection(t, "docs/migrating.md", "## From sentinel-golang")
	var rulesDoc, policyDoc string
	for _, b := range section.blocks {
		text := strings.Join(b.lines, "\n")
		switch {
		case b.info == "json" && strings.Contains(text, "statIntervalMs"):
			require.Empty(t, rulesDoc, "one block of sentinel rules")
			rulesDoc = text
		case b.info == "json" && strings.Contains(text, `"overrides"`):
			require.Empty(t, policyDoc, "one policy document")
			policyDoc = text
		}
	}
	require.NotEmpty(t, rulesDoc, "the section shows sentinel rules as JSON")
	require.NotEmpty(t, policyDoc, "the section shows the policy document they become")

	var rules []sentinelRule
	dec := json.NewDecoder(strings.NewReader(rulesDoc))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rules), "the sentinel rules use sentinel's JSON names")
	byResource := map[string][]sentinelRule{}
	for _, r := range rules {
		byResource[r.Resource] = append(byResource[r.Resource], r)
	}
	require.Len(t, byResource, 1, "the example is the rules of one resource")
	strategies := map[int]bool{}
	for _, r := range rules {
		strategies[r.Strategy] = true
	}
	assert.Equal(t, map[int]bool{0: true, 1: true}, strategies, "the example pairs a slow-request ratio rule with an error ratio rule")

	doc, err := breaker.ParseGroupPolicy([]byte(policyDoc))
	require.NoError(t, err)
	var viaJSON breaker.GroupPolicy
	require.NoError(t, json.Unmarshal([]byte(policyDoc), &viaJSON))
	assert.Equal(t, doc, viaJSON, "ParseGroupPolicy and json.Unmarshal read the document alike")
	assert.Equal(t, breaker.DefaultPolicy(), doc.Default, `"default": {} keeps the defaults`)

	for resource, rs := range byResource {
		got, ok := doc.Overrides[resource]
		require.True(t, ok, "the document has an override for %s", resource)
		assert.Equal(t, fromSentinel(t, rs), got, "%s: the table applied to the sentinel rules gives the document's policy", resource)
	}
	// The fields, as the page states them.
	got := doc.Overrides["orders.Create"]
	assert.Equal(t, 10*time.Second, got.Window)
	assert.Equal(t, 10, got.Buckets)
	assert.Equal(t, 10, got.MinRequests)
	assert.Equal(t, 200*time.Millisecond, got.SlowCall)
	assert.Equal(t, 0.5, got.SlowRatio)
	assert.Equal(t, 0.3, got.ErrorRatio)
	assert.Equal(t, 5*time.Second, got.OpenFor)
	assert.Equal(t, got.OpenFor, got.MaxOpenFor, "a fixed cooldown, as sentinel's")
	assert.Zero(t, got.Jitter)
	assert.Equal(t, 3, got.Probes)
	assert.True(t, got.StrictProbes)

	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	require.NoError(t, g.LoadPolicies([]byte(policyDoc)))
}

// TestMigrating_DurationsAreStringsWithTheirUnit: the decision of
// docs/migrating.md's "Durations from a config centre". A number where a
// duration goes is refused with the message the page quotes, naming the
// field, and a sentinel millisecond count written with "ms" reads as
// that many milliseconds.
func TestMigrating_DurationsAreStringsWithTheirUnit(t *testing.T) {
	section := pageSection(t, "docs/migrating.md", "### Durations from a config centre")
	var quoted string
	for _, b := range section.blocks {
		if b.info == "" && len(b.lines) == 1 && strings.HasPrefix(b.lines[0], "breaker: ") {
			quoted = b.lines[0]
		}
	}
	require.NotEmpty(t, quoted, "the section quotes the refusal")

	_, err := breaker.ParsePolicy([]byte(`{"open_for": 5000}`))
	require.Error(t, err)
	assert.Equal(t, quoted, err.Error(), "the refusal the page quotes")

	for _, n := range []uint32{1, 200, 5000, 10000, 60000} {
		doc, err := json.Marshal(map[string]string{"open_for": strconv.FormatUint(uint64(n), 10) + "ms", "max_open_for": "24h"})
		require.NoError(t, err)
		p, err := breaker.ParsePolicy(doc)
		require.NoError(t, err, "%s", doc)
		assert.Equal(t, time.Duration(n)*time.Millisecond, p.OpenFor, "%s", doc)
	}
	var b bytes.Buffer
	require.NoError(t, json.NewEncoder(&b).Encode(struct{ D time.Duration }{5 * time.Second}))
	assert.Equal(t, "{\"D\":5000000000}\n", b.String(), "encoding/json writes a time.Duration as nanoseconds, as the page says")
}

// pageSection is the part of a page from the heading line given to the
// next heading of the same or a higher level.
func pageSection(t *testing.T, rel, heading string) page {
	t.Helper()
	p := readPage(t, rel)
	level := strings.Index(heading, " ")
	start, end := -1, len(p.prose)
	for i, line := range p.prose {
		if line == heading {
			start = i
			continue
		}
		if start >= 0 && strings.HasPrefix(line, "#") {
			if l := strings.Index(line, " "); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				end = i
				break
			}
		}
	}
	require.GreaterOrEqual(t, start, 0, "%s has a heading %q", rel, heading)
	var s page
	for _, b := range p.blocks {
		if b.line-1 > start && b.line-1 < end {
			s.blocks = append(s.blocks, b)
		}
	}
	s.prose = p.prose[start:end]
	return s
}
