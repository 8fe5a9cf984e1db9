package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minimal is a valid scenario that each error case below breaks in one
// place.
const minimal = `{
  "name": "t",
  "duration": "30s",
  "entry": {"tier": "front", "rate": 50, "timeout": "1s"},
  "tiers": [
    {"name": "front", "workers": 10, "service": {"mean": "5ms"},
     "calls": [{"to": "back", "timeout": "200ms"}]},
    {"name": "back", "workers": 10, "service": {"dist": "lognormal", "mean": "10ms", "p99": "40ms"}}
  ],
  "faults": [{"tier": "back", "start": "10s", "duration": "5s", "error_rate": 0.5}]
}`

type doc = map[string]any

func minimalDoc(t *testing.T) doc {
	t.Helper()
	var m doc
	require.NoError(t, json.Unmarshal([]byte(minimal), &m))
	return m
}

func at(m doc, path ...any) doc {
	var cur any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(doc)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(doc)
}

func TestParseScenario_Minimal(t *testing.T) {
	s, err := ParseScenario([]byte(minimal))
	require.NoError(t, err)

	assert.Equal(t, uint64(1), s.Seed, "seed default")
	assert.Equal(t, Poisson, s.Entry.Arrivals, "arrivals default")
	assert.Equal(t, Unbounded, s.Tiers[0].Queue, "queue default")
	assert.Equal(t, Exponential, s.Tiers[0].Service.Dist, "dist default")
	assert.Equal(t, 1.0, s.Tiers[0].Calls[0].Probability, "probability default")
	assert.False(t, s.Tiers[0].Calls[0].NoBreaker, "calls have a breaker by default")
	assert.Nil(t, s.Tiers[0].Calls[0].Policy, "a call without a policy uses the scenario's")
	assert.Equal(t, breaker.DefaultPolicy(), s.Policy, "policy default")
	assert.Nil(t, s.Candidate)
	assert.Equal(t, []Window{{Start: 10 * time.Second, End: 15 * time.Second, Tier: "back"}}, s.FaultWindows())
}

func TestParseScenario_PoliciesOverlay(t *testing.T) {
	m := minimalDoc(t)
	m["policy"] = doc{"open_for": "10s", "max_open_for": "40s"}
	at(m, "tiers", 0, "calls", 0)["policy"] = doc{"min_requests": 50}
	m["candidate"] = doc{"policy": doc{"warmup": "0s"}}
	data, _ := json.Marshal(m)
	s, err := ParseScenario(data)
	require.NoError(t, err)

	want := breaker.DefaultPolicy()
	want.OpenFor, want.MaxOpenFor = 10*time.Second, 40*time.Second
	assert.Equal(t, want, s.Policy, "the scenario's policy is laid over the default")

	call := want
	call.MinRequests = 50
	require.NotNil(t, s.Tiers[0].Calls[0].Policy)
	assert.Equal(t, call, *s.Tiers[0].Calls[0].Policy, "a call's policy is laid over the scenario's")

	cand := call
	cand.Warmup = 0
	require.NotNil(t, s.Candidate)
	assert.JSONEq(t, `{"warmup": "0s"}`, s.Candidate.Overlay, "the candidate's policy is kept as the change it is")
	assert.Equal(t, "", s.Candidate.Label)
	specs := s.specs()
	require.Len(t, specs, 4)
	assert.Equal(t, "candidate", specs[3].label, "label default")
	require.NotNil(t, specs[3].policies[0])
	assert.Equal(t, cand, *specs[3].policies[0], "the candidate is laid over the call's own policy")
}

// pricingScenario is a chain of two guarded calls, checkout->pricing with
// a policy of its own and checkout->stock on the scenario's.
const pricingScenario = `{
  "name": "pricing",
  "duration": "30s",
  "entry": {"tier": "checkout", "rate": 50, "timeout": "1s"},
  "policy": {"min_requests": 30},
  "tiers": [
    {"name": "checkout", "workers": 10, "service": {"mean": "5ms"},
     "calls": [
       {"to": "pricing", "timeout": "500ms",
        "policy": {"call_timeout": "250ms", "open_for": "20s", "max_open_for": "1m", "probes": 5}},
       {"to": "stock", "timeout": "500ms"}]},
    {"name": "pricing", "workers": 10, "service": {"mean": "10ms"}},
    {"name": "stock", "workers": 10, "service": {"mean": "10ms"}}
  ]%s
}`

// candidatePolicies parses pricingScenario with the candidate given and
// returns the candidate run's policy of each call, by name.
func candidatePolicies(t *testing.T, candidate string) map[string]breaker.Policy {
	t.Helper()
	s, err := ParseScenario([]byte(fmt.Sprintf(pricingScenario, `, "candidate": `+candidate)))
	require.NoError(t, err)
	specs := s.specs()
	require.Len(t, specs, 4)
	out := map[string]breaker.Policy{}
	for e, ref := range s.calls() {
		require.NotNil(t, specs[3].policies[e], ref.name)
		out[ref.name] = *specs[3].policies[e]
	}
	return out
}

// A candidate's policy is a change laid over the policy each call runs
// under. It was laid over the scenario's policy: {"window": "10s"} on
// pricing ran pricing without its own call_timeout, open_for,
// max_open_for and probes, and said nothing.
func TestCandidate_IsLaidOverEachCallsOwnPolicy(t *testing.T) {
	got := candidatePolicies(t, `{"policy": {"window": "10s"}}`)

	pricing := breaker.DefaultPolicy()
	pricing.MinRequests = 30
	pricing.CallTimeout, pricing.OpenFor, pricing.MaxOpenFor, pricing.Probes = 250*time.Millisecond, 20*time.Second, time.Minute, 5
	pricing.Window = 10 * time.Second
	assert.Equal(t, pricing, got["checkout->pricing"], "pricing keeps its own policy, with the window changed")

	stock := breaker.DefaultPolicy()
	stock.MinRequests = 30
	stock.Window = 10 * time.Second
	assert.Equal(t, stock, got["checkout->stock"], "stock keeps the scenario's policy, with the window changed")

	// The same change given as a Candidate in Go.
	s, err := ParseScenario([]byte(fmt.Sprintf(pricingScenario, "")))
	require.NoError(t, err)
	s.Candidate = &Candidate{Overlay: `{"window": "10s"}`, Calls: []string{"checkout->pricing"}}
	require.NoError(t, s.Validate())
	specs := s.specs()
	assert.Equal(t, pricing, *specs[3].policies[0])
	assert.Equal(t, *specs[2].policies[1], *specs[3].policies[1], "a call the candidate does not name keeps its policy")
}

// A candidate may be a group policy document, the one a breaker.Group
// and breaker-check read: each call runs the override named by the call,
// or else by the tier it calls, or else the document's default.
func TestCandidate_GroupPolicyDocument(t *testing.T) {
	got := candidatePolicies(t, `{"policies": {
	  "default": {"error_ratio": 0.3},
	  "overrides": {"pricing": {"probes": 7}}}}`)
	def := breaker.DefaultPolicy()
	def.ErrorRatio = 0.3
	pricing := def
	pricing.Probes = 7
	assert.Equal(t, pricing, got["checkout->pricing"], "the override named by the called tier, over the document's default")
	assert.Equal(t, def, got["checkout->stock"], "the document's default, not the scenario's policy")

	got = candidatePolicies(t, `{"policies": {"overrides": {"pricing": {"probes": 7}, "checkout->pricing": {"probes": 9}}}}`)
	assert.Equal(t, 9, got["checkout->pricing"].Probes, "the call's name before the tier's")

	// A service's document keyed by method, as breakerhttp and
	// breakergrpc key per method: the method's tier is the called tier.
	got = candidatePolicies(t, `{"policies": {"overrides": {"pricing.GetPrice": {"probes": 4}, "stock.Get@10.0.0.7": {"probes": 6}}}}`)
	assert.Equal(t, 4, got["checkout->pricing"].Probes, "a method of the called tier")
	assert.Equal(t, 6, got["checkout->stock"].Probes, "a per-target key of a method of the called tier")
	got = candidatePolicies(t, `{"policies": {"overrides": {"pricing.GetPrice": {"probes": 4}, "pricing.List": {"probes": 4}, "pricing": {"probes": 2}}}}`)
	assert.Equal(t, 2, got["checkout->pricing"].Probes, "the tier's name before its methods'")

	for _, c := range []struct{ candidate, field, problem string }{
		{`{"policies": {"overrides": {"payments": {"probes": 7}}}}`, `candidate.policies.overrides["payments"]`, "names no call, no called tier and no method of one (calls: checkout->pricing, checkout->stock)"},
		{`{"policies": {"overrides": {"checkout.Get": {"probes": 7}}}}`, `candidate.policies.overrides["checkout.Get"]`, "names no call, no called tier and no method of one"},
		{`{"policies": {"overrides": {"pricing.GetPrice": {"probes": 4}, "pricing.List": {"probes": 5}}}}`, `candidate.policies.overrides["pricing.List"]`, `a method of tier pricing, as "pricing.GetPrice" is, with another policy: a call of the scenario is one breaker; name the call ("checkout->pricing") or the tier`},
		{`{"policies": {"overrides": {"pricing": {"probes": 0}}}}`, `candidate.policies.overrides["pricing"].probes`, "must be in [1, 100]"},
		{`{"policies": {"defualt": {}}}`, `candidate.policies.defualt`, "unknown field"},
		{`{"policies": {}, "policy": {"probes": 2}}`, "candidate", "give one of policy"},
		{`{"policy": {"buckets": 7}}`, "candidate.policy.buckets", "must divide window"},
		{`{"policy": {"windw": "7s"}}`, "candidate.policy.windw", "unknown field"},
		{`{"policy": [1]}`, "candidate.policy", "want a JSON object"},
	} {
		_, err := ParseScenario([]byte(fmt.Sprintf(pricingScenario, `, "candidate": `+c.candidate)))
		var se *ScenarioError
		require.True(t, errors.As(err, &se), "%s: %v", c.candidate, err)
		found := false
		for _, p := range se.Problems {
			found = found || (p.Field == c.field && strings.Contains(p.Problem, c.problem))
		}
		assert.True(t, found, "%s: want %s: %s; got %v", c.candidate, c.field, c.problem, err)
	}
}

// A change that makes one call's policy invalid and not another's names
// the call it does so on.
func TestCandidate_OverlayInvalidOnOneCallNamesIt(t *testing.T) {
	// max_open_for 25s is below stock's open_for, the default 30s, and
	// above pricing's own 20s.
	_, err := ParseScenario([]byte(fmt.Sprintf(pricingScenario, `, "candidate": {"policy": {"max_open_for": "25s"}}`)))
	var se *ScenarioError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Len(t, se.Problems, 1, "%v", err)
	assert.Equal(t, "candidate.policy.max_open_for", se.Problems[0].Field)
	assert.Contains(t, se.Problems[0].Problem, "(laid over the policy of checkout->stock)")
}

// TestParseScenario_ErrorsNameTheField is the contract for bad input: every
// problem comes back as a ScenarioError whose field is the path of the
// field in the document.
func TestParseScenario_ErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(m doc)
		raw     string // used instead of the edited document when set
		field   string
		problem string
	}{
		{name: "not an object", raw: `[1, 2]`, field: "(document)", problem: "want a JSON object"},
		{name: "empty", raw: ``, field: "(document)", problem: "want a JSON object"},
		{name: "malformed", raw: "{\n  \"duration\": \"5m\",\n  \"seed\": }", field: "(document)", problem: "malformed JSON at line 3, column 11"},
		{name: "unknown field", edit: func(m doc) { m["durration"] = "5m" }, field: "durration", problem: "unknown field"},
		{name: "unknown nested field", edit: func(m doc) { at(m, "tiers", 1, "service")["meen"] = "1s" }, field: "tiers[1].service.meen", problem: "unknown field"},
		{name: "duration as number", edit: func(m doc) { m["duration"] = 300 }, field: "duration", problem: "want a duration string"},
		{name: "duration in words", edit: func(m doc) { m["duration"] = "5 minutes" }, field: "duration", problem: `got "5 minutes"`},
		{name: "duration missing", edit: func(m doc) { delete(m, "duration") }, field: "duration", problem: "must be positive"},
		{name: "duration too long", edit: func(m doc) { m["duration"] = "2h" }, field: "duration", problem: "at most 1h0m0s"},
		{name: "seed negative", edit: func(m doc) { m["seed"] = -1 }, field: "seed", problem: "non-negative integer"},
		{name: "seed fractional", edit: func(m doc) { m["seed"] = 1.5 }, field: "seed", problem: "non-negative integer"},
		{name: "name not a string", edit: func(m doc) { m["name"] = 7 }, field: "name", problem: "want a string"},
		{name: "entry missing", edit: func(m doc) { delete(m, "entry") }, field: "entry", problem: "required"},
		{name: "entry not an object", edit: func(m doc) { m["entry"] = "front" }, field: "entry", problem: "want a JSON object"},
		{name: "entry tier unknown", edit: func(m doc) { at(m, "entry")["tier"] = "frnt" }, field: "entry.tier", problem: `no tier is named "frnt" (tiers: front, back)`},
		{name: "rate zero", edit: func(m doc) { at(m, "entry")["rate"] = 0 }, field: "entry.rate", problem: "must be a positive number"},
		{name: "rate a string", edit: func(m doc) { at(m, "entry")["rate"] = "50" }, field: "entry.rate", problem: "want a number"},
		{name: "too many requests", edit: func(m doc) { m["duration"] = "1h"; at(m, "entry")["rate"] = 90000 }, field: "entry.rate", problem: "more than 20000000 requests"},
		{name: "arrivals unknown", edit: func(m doc) { at(m, "entry")["arrivals"] = "bursty" }, field: "entry.arrivals", problem: `must be "poisson" or "uniform"`},
		{name: "client timeout missing", edit: func(m doc) { delete(at(m, "entry"), "timeout") }, field: "entry.timeout", problem: "required"},
		{name: "no tiers", edit: func(m doc) { m["tiers"] = []any{} }, field: "tiers", problem: "at least one tier"},
		{name: "tiers not an array", edit: func(m doc) { m["tiers"] = doc{} }, field: "tiers", problem: "want a JSON array"},
		{name: "tier without name", edit: func(m doc) { delete(at(m, "tiers", 1), "name") }, field: "tiers[1].name", problem: "required"},
		{name: "tier name with arrow", edit: func(m doc) { at(m, "tiers", 1)["name"] = "a->b" }, field: "tiers[1].name", problem: `must not contain "->"`},
		// Names are shown in the reports and charts: one holding a
		// right-to-left override (U+202E) read reversed there, as another
		// name, and a control character made the chart XML no browser
		// reads.
		{name: "tier name that does not show", edit: func(m doc) { at(m, "tiers", 1)["name"] = "ba\u202eck" }, field: "tiers[1].name", problem: `must show as it is (no control, format or invisible characters), got "ba\u202eck"`},
		{name: "name that does not show", edit: func(m doc) { m["name"] = "overload\x01" }, field: "name", problem: `must show as it is`},
		{name: "label that does not show", edit: func(m doc) { m["candidate"] = doc{"label": "tuned\u200b"} }, field: "candidate.label", problem: `must show as it is`},
		{name: "duplicate tier", edit: func(m doc) { at(m, "tiers", 1)["name"] = "front" }, field: "tiers[1].name", problem: "already the name of tiers[0]"},
		{name: "no workers", edit: func(m doc) { at(m, "tiers", 0)["workers"] = 0 }, field: "tiers[0].workers", problem: "must be in [1, 100000], got 0"},
		{name: "workers fractional", edit: func(m doc) { at(m, "tiers", 0)["workers"] = 2.5 }, field: "tiers[0].workers", problem: "want an integer"},
		{name: "queue negative", edit: func(m doc) { at(m, "tiers", 0)["queue"] = -5 }, field: "tiers[0].queue", problem: "must be in [0, 10000000]"},
		{name: "dist unknown", edit: func(m doc) { at(m, "tiers", 0, "service")["dist"] = "normal" }, field: "tiers[0].service.dist", problem: `"exponential", "lognormal" or "constant"`},
		{name: "mean missing", edit: func(m doc) { delete(at(m, "tiers", 0, "service"), "mean") }, field: "tiers[0].service.mean", problem: "required"},
		{name: "mean negative", edit: func(m doc) { at(m, "tiers", 0, "service")["mean"] = "-5ms" }, field: "tiers[0].service.mean", problem: "must not be negative"},
		{name: "p99 below mean", edit: func(m doc) { at(m, "tiers", 1, "service")["p99"] = "5ms" }, field: "tiers[1].service.p99", problem: "must be above the mean"},
		{name: "p99 too far", edit: func(m doc) { at(m, "tiers", 1, "service")["p99"] = "1s" }, field: "tiers[1].service.p99", problem: "14.9 × mean"},
		{name: "p99 not lognormal", edit: func(m doc) { at(m, "tiers", 0, "service")["p99"] = "20ms" }, field: "tiers[0].service.p99", problem: "lognormal distribution only"},
		{name: "call to nowhere", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["to"] = "bak" }, field: "tiers[0].calls[0].to", problem: `no tier is named "bak"`},
		{name: "call to itself", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["to"] = "front" }, field: "tiers[0].calls[0].to", problem: "cannot call itself"},
		{name: "call twice", edit: func(m doc) {
			tier := at(m, "tiers", 0)
			tier["calls"] = append(tier["calls"].([]any), doc{"to": "back", "timeout": "1s"})
		}, field: "tiers[0].calls[1].to", problem: "front already calls back in calls[0]"},
		{name: "cycle", edit: func(m doc) { at(m, "tiers", 1)["calls"] = []any{doc{"to": "front", "timeout": "1s"}} }, field: "tiers[1].calls[0].to", problem: "makes a cycle: front -> back -> front"},
		{name: "probability zero", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["probability"] = 0 }, field: "tiers[0].calls[0].probability", problem: "must be in (0, 1]"},
		{name: "probability above one", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["probability"] = 1.5 }, field: "tiers[0].calls[0].probability", problem: "got 1.5"},
		{name: "call timeout negative", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["timeout"] = "-1s" }, field: "tiers[0].calls[0].timeout", problem: "must not be negative"},
		{name: "deadlines unknown", edit: func(m doc) { at(m, "tiers", 0)["deadlines"] = "drop" }, field: "tiers[0].deadlines", problem: `must be "queue", "ignore" or "propagate"`},
		{name: "retry attempts one", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 1} }, field: "tiers[0].calls[0].retry.attempts", problem: "must be in [2, 10]"},
		{name: "retry budget above one", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 3, "budget": 2} }, field: "tiers[0].calls[0].retry.budget", problem: "must be in [0, 1]"},
		{name: "retry backoff not a duration", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 3, "backoff": 5} }, field: "tiers[0].calls[0].retry.backoff", problem: "want a duration string"},
		{name: "retry unknown field", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 3, "jitter": 0.1} }, field: "tiers[0].calls[0].retry.jitter", problem: "unknown field"},
		{name: "fallback not a bool", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["fallback"] = "yes" }, field: "tiers[0].calls[0].fallback", problem: "want true or false"},
		{name: "call policy invalid", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["policy"] = doc{"error_ratio": 1.5} }, field: "tiers[0].calls[0].policy.error_ratio", problem: "must be in (0, 1]"},
		{name: "call policy unknown field", edit: func(m doc) { at(m, "tiers", 0, "calls", 0)["policy"] = doc{"windw": "5s"} }, field: "tiers[0].calls[0].policy.windw", problem: "unknown field"},
		{name: "call policy without breaker", edit: func(m doc) {
			c := at(m, "tiers", 0, "calls", 0)
			c["breaker"] = false
			c["policy"] = doc{"min_requests": 5}
		}, field: "tiers[0].calls[0].policy", problem: `"breaker" is false`},
		{name: "scenario policy invalid", edit: func(m doc) { m["policy"] = doc{"max_open_for": "1s"} }, field: "policy.max_open_for", problem: "must be at least open_for"},
		{name: "scenario policy not an object", edit: func(m doc) { m["policy"] = "default" }, field: "policy", problem: "want a JSON object"},
		{name: "fault tier unknown", edit: func(m doc) { at(m, "faults", 0)["tier"] = "bak" }, field: "faults[0].tier", problem: `no tier is named "bak"`},
		{name: "fault after the end", edit: func(m doc) { at(m, "faults", 0)["start"] = "30s" }, field: "faults[0].start", problem: "must be in [0, duration (30s))"},
		{name: "fault without duration", edit: func(m doc) { delete(at(m, "faults", 0), "duration") }, field: "faults[0].duration", problem: "must be positive"},
		{name: "error rate above one", edit: func(m doc) { at(m, "faults", 0)["error_rate"] = 1.2 }, field: "faults[0].error_rate", problem: "must be in [0, 1]"},
		{name: "errors and slow above one", edit: func(m doc) {
			f := at(m, "faults", 0)
			f["slow_fraction"], f["slow_latency"] = 0.6, "1s"
		}, field: "faults[0].slow_fraction", problem: "error_rate + slow_fraction must be at most 1"},
		{name: "slow without latency", edit: func(m doc) { at(m, "faults", 0)["slow_fraction"] = 0.2 }, field: "faults[0].slow_latency", problem: "required"},
		{name: "latency without slow", edit: func(m doc) { at(m, "faults", 0)["slow_latency"] = "1s" }, field: "faults[0].slow_latency", problem: "slow_fraction is 0"},
		{name: "outage unknown", edit: func(m doc) { f := at(m, "faults", 0); delete(f, "error_rate"); f["outage"] = "down" }, field: "faults[0].outage", problem: `must be "hang" or "refuse"`},
		{name: "outage with errors", edit: func(m doc) { at(m, "faults", 0)["outage"] = "hang" }, field: "faults[0].outage", problem: "excludes error_rate"},
		{name: "fault that does nothing", edit: func(m doc) { delete(at(m, "faults", 0), "error_rate") }, field: "faults[0]", problem: "does nothing"},
		{name: "overlapping faults", edit: func(m doc) {
			m["faults"] = append(m["faults"].([]any), doc{"tier": "back", "start": "12s", "duration": "5s", "outage": "hang"})
		}, field: "faults[1]", problem: "overlaps faults[0] on tier back"},
		{name: "repeat overlapping itself", edit: func(m doc) { f := at(m, "faults", 0); f["repeat"], f["every"] = 3, "2s" }, field: "faults[0].every", problem: "must be at least duration (5s)"},
		{name: "every without repeat", edit: func(m doc) { at(m, "faults", 0)["every"] = "10s" }, field: "faults[0].every", problem: "set repeat"},
		{name: "repeat negative", edit: func(m doc) { at(m, "faults", 0)["repeat"] = -2 }, field: "faults[0].repeat", problem: "must be in [0, 10000]"},
		{name: "candidate call unknown", edit: func(m doc) { m["candidate"] = doc{"calls": []any{"front->bak"}} }, field: "candidate.calls[0]", problem: `no call is named "front->bak" (calls: front->back)`},
		{name: "candidate call not a string", edit: func(m doc) { m["candidate"] = doc{"calls": []any{3}} }, field: "candidate.calls[0]", problem: "want a call name"},
		{name: "candidate on unguarded call", edit: func(m doc) {
			at(m, "tiers", 0, "calls", 0)["breaker"] = false
			m["candidate"] = doc{"calls": []any{"front->back"}}
		}, field: "candidate.calls[0]", problem: "front->back has no breaker"},
		{name: "candidate policy invalid", edit: func(m doc) { m["candidate"] = doc{"policy": doc{"probes": 0}} }, field: "candidate.policy.probes", problem: "must be in [1, 100]"},
		{name: "candidate unknown field", edit: func(m doc) { m["candidate"] = doc{"lable": "x"} }, field: "candidate.lable", problem: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.raw)
			if tt.edit != nil {
				m := minimalDoc(t)
				tt.edit(m)
				var err error
				data, err = json.Marshal(m)
				require.NoError(t, err)
			}
			s, err := ParseScenario(data)
			require.Error(t, err)
			assert.Nil(t, s)
			var se *ScenarioError
			require.True(t, errors.As(err, &se), "error %T is not a *ScenarioError", err)
			for _, p := range se.Problems {
				if p.Field == tt.field && strings.Contains(p.Problem, tt.problem) {
					assert.Contains(t, err.Error(), tt.field+": ")
					return
				}
			}
			t.Errorf("no problem for field %q containing %q; got %v", tt.field, tt.problem, err)
		})
	}
}

func TestParseScenario_ReportsEveryProblem(t *testing.T) {
	m := minimalDoc(t)
	at(m, "tiers", 0)["workers"] = -1
	at(m, "entry")["rate"] = -3
	at(m, "faults", 0)["error_rate"] = 2
	m["colour"] = "blue"
	data, _ := json.Marshal(m)
	_, err := ParseScenario(data)
	var se *ScenarioError
	require.True(t, errors.As(err, &se))
	var fields []string
	for _, p := range se.Problems {
		fields = append(fields, p.Field)
	}
	// Unknown fields are found while decoding, before validation starts,
	// and a document with decoding problems is not validated: the rest of
	// it may not mean what it seems to.
	assert.Equal(t, []string{"colour"}, fields)

	delete(m, "colour")
	data, _ = json.Marshal(m)
	_, err = ParseScenario(data)
	require.True(t, errors.As(err, &se))
	fields = fields[:0]
	for _, p := range se.Problems {
		fields = append(fields, p.Field)
	}
	assert.ElementsMatch(t, []string{"tiers[0].workers", "entry.rate", "faults[0].error_rate"}, fields)
}

func TestScenario_ValidateGoValue(t *testing.T) {
	s := &Scenario{
		Name:     "go",
		Duration: 20 * time.Second,
		Entry:    Entry{Tier: "a", Rate: 20, Timeout: time.Second},
		Tiers: []Tier{
			{Name: "a", Workers: 4, Queue: Unbounded, Service: Service{Mean: 5 * time.Millisecond},
				Calls: []Call{{To: "b", Probability: 1, Timeout: 100 * time.Millisecond}}},
			{Name: "b", Workers: 4, Queue: 0, Service: Service{Dist: Constant, Mean: 5 * time.Millisecond}},
		},
	}
	require.NoError(t, s.Validate(), "zero Policy means the default, empty Arrivals and Dist mean the defaults")
	rep, err := Run(s)
	require.NoError(t, err)
	assert.Equal(t, breaker.DefaultPolicy(), call(t, rep.Run(WithBreaker), "a->b").Policy)

	s.Tiers[0].Calls[0].Probability = 0
	var se *ScenarioError
	require.True(t, errors.As(s.Validate(), &se), "a Go value follows the same rules")
	assert.Equal(t, "tiers[0].calls[0].probability", se.Problems[0].Field)
	_, err = Run(s)
	assert.Error(t, err, "Run refuses an invalid scenario")
}

func TestShippedScenarios(t *testing.T) {
	names := ScenarioNames()
	for _, want := range []string{"seeds000", "slow-only", "cold-start", "flapping", "low-traffic", "drift"} {
		assert.Contains(t, names, want)
	}
	assert.Contains(t, names, DefaultScenario)
	for _, name := range names {
		s, err := LoadScenario(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, s.Name, "a shipped scenario's name is its file's")
		assert.NotEmpty(t, s.Description, name)
		assert.NotEmpty(t, s.Faults, name)
	}
	_, err := LoadScenario("seeds-000")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "seeds000", "the error lists what there is")
	_, err = LoadScenario("../go")
	assert.Error(t, err)
}

func TestLoadScenario_ReturnsACopy(t *testing.T) {
	a, err := LoadScenario(DefaultScenario)
	require.NoError(t, err)
	a.Tiers[0].Workers = 1
	b, err := LoadScenario(DefaultScenario)
	require.NoError(t, err)
	assert.Equal(t, 200, b.Tiers[0].Workers)
}

func TestFault_Windows(t *testing.T) {
	s, err := LoadScenario("flapping")
	require.NoError(t, err)
	ws := s.FaultWindows()
	require.Len(t, ws, 9)
	assert.Equal(t, Window{Start: 30 * time.Second, End: 40 * time.Second, Tier: "pricing"}, ws[0])
	assert.Equal(t, Window{Start: 230 * time.Second, End: 240 * time.Second, Tier: "pricing"}, ws[8])
	assert.Equal(t, "pricing: outage (no answer), 10s every 25s ×9", s.Faults[0].Summary())
}

// FuzzParseScenario checks that no document makes the parser or, for the
// small scenarios it accepts, the simulation panic.
func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(minimal))
	for _, name := range ScenarioNames() {
		data, err := ScenarioJSON(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"tiers": [{"calls": [{"policy": null}]}], "faults": [null]}`))
	f.Add([]byte(`{"duration": "1s", "entry": {"tier": "a", "rate": 1e308, "timeout": "1s"}}`))
	f.Add([]byte(`{"duration": "5s", "entry": {"tier": "a", "rate": 200, "timeout": "100ms"},
	  "tiers": [{"name": "a", "workers": 2, "queue": 3, "deadlines": "propagate", "service": {"mean": "5ms"},
	    "calls": [{"to": "b", "retry": {"attempts": 3, "backoff": "1ms", "budget": 0.5}}]},
	    {"name": "b", "workers": 1, "deadlines": "ignore", "service": {"mean": "20ms"}}],
	  "faults": [{"tier": "b", "start": "1s", "duration": "2s", "outage": "hang"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScenario(data)
		if err != nil {
			var se *ScenarioError
			if !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("error %v is not a ScenarioError with problems", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed scenario does not validate: %v", err)
		}
		work := s.Entry.Rate * s.Duration.Seconds() * float64(len(s.Tiers))
		if work > 20000 {
			return
		}
		if _, err := Run(s); err != nil {
			t.Fatalf("valid scenario does not run: %v", err)
		}
	})
}

// layered is a chain of layers of width tiers each, every tier calling
// every tier of the next layer, with requests arriving at the first tier.
func layered(layers, width int, rate float64, d time.Duration) *Scenario {
	s := &Scenario{
		Name: "layered", Duration: d, Seed: 1,
		Entry: Entry{Tier: "l0t0", Rate: rate, Timeout: time.Second},
	}
	for l := range layers {
		for w := range width {
			t := Tier{Name: fmt.Sprintf("l%dt%d", l, w), Workers: 100, Queue: Unbounded, Service: Service{Mean: time.Millisecond}}
			if l+1 < layers {
				for v := range width {
					t.Calls = append(t.Calls, Call{To: fmt.Sprintf("l%dt%d", l+1, v), Probability: 1, Timeout: 100 * time.Millisecond})
				}
			}
			s.Tiers = append(s.Tiers, t)
		}
	}
	return s
}

// layeredDoc is layered's document.
func layeredDoc(layers, width int, rate float64, d string) doc {
	var tiers []any
	for l := range layers {
		for w := range width {
			var calls []any
			if l+1 < layers {
				for v := range width {
					calls = append(calls, doc{"to": fmt.Sprintf("l%dt%d", l+1, v), "timeout": "100ms"})
				}
			}
			tiers = append(tiers, doc{"name": fmt.Sprintf("l%dt%d", l, w), "workers": 100, "service": doc{"mean": "1ms"}, "calls": calls})
		}
	}
	return doc{"name": "layered", "duration": d, "entry": doc{"tier": "l0t0", "rate": rate, "timeout": "1s"}, "tiers": tiers}
}

// problemOf returns the problem err reports for field, failing the test
// if there is none.
func problemOf(t *testing.T, err error, field string) string {
	t.Helper()
	var se *ScenarioError
	require.ErrorAs(t, err, &se)
	for _, p := range se.Problems {
		if p.Field == field {
			return p.Problem
		}
	}
	t.Fatalf("no problem for %s in %v", field, err)
	return ""
}

// A scenario within every other limit asked for billions of calls: 15
// layers of 4 tiers, each calling the 4 of the next, make 357,913,940
// calls for each request, and 1 request a second for 10 s was still
// running after minutes. It is refused at once, with what it asks for and
// the bound.
func TestScenario_FanOutBeyondTheCallBoundIsRefused(t *testing.T) {
	data, err := json.Marshal(layeredDoc(15, 4, 1, "10s"))
	require.NoError(t, err)
	start := time.Now()
	_, err = ParseScenario(data)
	took := time.Since(start)
	assert.Equal(t, "a request at l0t0 can make 357913940 downstream calls (every call made, every retry tried), more than the 10000 one request may make",
		problemOf(t, err, "tiers[0].calls"))
	assert.Less(t, took, time.Second, "refused at once")
	_, err = Run(layered(15, 4, 1, 10*time.Second))
	assert.ErrorContains(t, err, "357913940 downstream calls")

	// Within the bound: 6 layers of 4 make 4+16+...+1024 = 1364 calls.
	require.NoError(t, layered(6, 4, 1, 10*time.Second).Validate())
}

// Every try of a call counts, and so does every call of the tier it
// reaches; a count too large for 64 bits is counted as at least 2^62.
func TestScenario_CallsPerRequestCountRetriesAndFanOut(t *testing.T) {
	s := pair(10, time.Second)
	s.Tiers = append(s.Tiers, Tier{Name: "store", Workers: 10, Queue: Unbounded, Service: Service{Mean: time.Millisecond}})
	s.Tiers[0].Calls[0].Retry = &Retry{Attempts: 3}
	s.Tiers[0].Calls = append(s.Tiers[0].Calls, Call{To: "store", Probability: 0.1})
	s.Tiers[1].Calls = []Call{{To: "store", Probability: 1}}
	require.NoError(t, s.Validate())
	index := map[string]int{"front": 0, "back": 1, "store": 2}
	// front: 3 tries of back (each with its call to store), and store.
	assert.Equal(t, []uint64{3*(1+1) + 1, 1, 0}, s.callsPerRequest(index))

	deep := layered(MaxTiers, 1, 1, time.Second)
	for i := range deep.Tiers[:MaxTiers-1] {
		deep.Tiers[i].Calls[0].Retry = &Retry{Attempts: MaxAttempts}
	}
	assert.Contains(t, problemOf(t, deep.Validate(), "tiers[0].calls"), "can make at least 4611686018427387904 downstream calls")
}

// The requests a run simulates at all tiers are bounded too: 5,000
// requests a second for an hour is within MaxRequests, but each of them
// reaching 5 tiers is 108 million requests.
func TestScenario_RequestsAtAllTiersAreBounded(t *testing.T) {
	s := layered(2, 5, 5000, time.Hour)
	s.Tiers = s.Tiers[1:] // one entry tier calling 5
	s.Entry.Tier = "l0t1"
	for i := range s.Tiers[0].Calls {
		s.Tiers[0].Calls[i].To = fmt.Sprintf("l1t%d", i)
	}
	assert.Equal(t, "5000 requests per second for 1h0m0s, each making up to 5 downstream calls, is 108000000 requests at all tiers, more than the 100000000 a run may simulate",
		problemOf(t, s.Validate(), "entry.rate"))
	s.Entry.Rate = 4000
	assert.NoError(t, s.Validate())
}

// The shipped scenarios are well within both bounds, and the bound holds
// in a run: no run simulates more requests than the entry's arrivals
// times one plus the calls each can make.
func TestScenario_ShippedScenariosAreWithinTheWorkBounds(t *testing.T) {
	for _, name := range ScenarioNames() {
		s, err := LoadScenario(name)
		require.NoError(t, err)
		index := map[string]int{}
		for i, tier := range s.Tiers {
			index[tier.Name] = i
		}
		calls := s.callsPerRequest(index)[index[s.Entry.Tier]]
		total := s.Entry.Rate * s.Duration.Seconds() * float64(1+calls)
		t.Logf("%-12s %d calls per request, %.0f requests at all tiers", name, calls, total)
		assert.LessOrEqual(t, calls, uint64(MaxCallsPerRequest/100), name)
		assert.LessOrEqual(t, total, float64(MaxTierRequests/10), name)
	}

	s := pair(200, 20*time.Second)
	s.Tiers[0].Calls[0].Retry = &Retry{Attempts: 3}
	s.Faults = []Fault{{Tier: "back", Start: 5 * time.Second, Duration: 10 * time.Second, ErrorRate: 0.8}}
	rep := run(t, s)
	for _, r := range rep.Runs {
		assert.LessOrEqual(t, r.Requests, int64(sum(r.Entry.Offered)*(1+3)), r.Label)
	}
	assert.Greater(t, rep.Run(NoBreaker).Requests, int64(sum(rep.Run(NoBreaker).Entry.Offered)*2), "the retries are taken")
}

// Every number of a scenario document is refused, naming its field, when
// it is negative, beyond its bound, or too large for its type. A fault's
// duration or period had no upper bound: one of 2562047h starting at 10s
// ended, in int64 nanoseconds, before it began.
func TestParseScenario_EveryNumberIsBounded(t *testing.T) {
	huge := json.Number("9223372036854775807")
	over := json.Number("1e400")
	const hours = "2562047h" // the longest duration that parses
	for _, c := range []struct {
		field string
		set   func(m doc, v any)
		bad   []any
	}{
		{"duration", func(m doc, v any) { m["duration"] = v }, []any{"-1s", "0s", "61m", hours}},
		{"seed", func(m doc, v any) { m["seed"] = v }, []any{-1, 1.5, json.Number("18446744073709551616"), over}},
		{"entry.rate", func(m doc, v any) { at(m, "entry")["rate"] = v }, []any{-1, 0, 100001, over, "NaN"}},
		{"entry.timeout", func(m doc, v any) { at(m, "entry")["timeout"] = v }, []any{"-1s", "0s", "11m", hours}},
		{"tiers[0].workers", func(m doc, v any) { at(m, "tiers", 0)["workers"] = v }, []any{-1, 0, 100001, huge, over, 2.5}},
		{"tiers[0].queue", func(m doc, v any) { at(m, "tiers", 0)["queue"] = v }, []any{-2, 10000001, huge, over}},
		{"tiers[0].service.mean", func(m doc, v any) { at(m, "tiers", 0, "service")["mean"] = v }, []any{"-5ms", "0s", "11m", hours}},
		{"tiers[1].service.p99", func(m doc, v any) { at(m, "tiers", 1, "service")["p99"] = v }, []any{"-1ms", "5ms", hours}},
		{"tiers[0].calls[0].probability", func(m doc, v any) { at(m, "tiers", 0, "calls", 0)["probability"] = v }, []any{-0.5, 0, 1.5, over}},
		{"tiers[0].calls[0].timeout", func(m doc, v any) { at(m, "tiers", 0, "calls", 0)["timeout"] = v }, []any{"-1s", "11m", hours}},
		{"tiers[0].calls[0].retry.attempts", func(m doc, v any) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": v} }, []any{-1, 1, 11, huge, over}},
		{"tiers[0].calls[0].retry.backoff", func(m doc, v any) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 2, "backoff": v} }, []any{"-1s", "11m", hours}},
		{"tiers[0].calls[0].retry.budget", func(m doc, v any) { at(m, "tiers", 0, "calls", 0)["retry"] = doc{"attempts": 2, "budget": v} }, []any{-0.1, 1.5, over}},
		{"faults[0].start", func(m doc, v any) { at(m, "faults", 0)["start"] = v }, []any{"-1s", "30s", hours}},
		{"faults[0].duration", func(m doc, v any) { at(m, "faults", 0)["duration"] = v }, []any{"-5s", "0s", "61m", hours}},
		{"faults[0].every", func(m doc, v any) { f := at(m, "faults", 0); f["repeat"], f["every"] = 2, v }, []any{"-1s", "1s", "61m", hours}},
		{"faults[0].repeat", func(m doc, v any) { f := at(m, "faults", 0); f["repeat"], f["every"] = v, "5s" }, []any{-1, 10001, huge, over}},
		{"faults[0].error_rate", func(m doc, v any) { at(m, "faults", 0)["error_rate"] = v }, []any{-0.1, 1.5, over}},
		{"faults[0].slow_fraction", func(m doc, v any) {
			f := at(m, "faults", 0)
			f["error_rate"], f["slow_fraction"], f["slow_latency"] = 0, v, "1s"
		}, []any{-0.1, 1.5, over}},
		{"faults[0].slow_latency", func(m doc, v any) { f := at(m, "faults", 0); f["slow_fraction"], f["slow_latency"] = 0.2, v }, []any{"-1s", "11m", hours}},
		{"faults[0].added_latency", func(m doc, v any) { at(m, "faults", 0)["added_latency"] = v }, []any{"-1s", "11m", hours}},
	} {
		for _, v := range c.bad {
			t.Run(fmt.Sprintf("%s=%v", c.field, v), func(t *testing.T) {
				m := minimalDoc(t)
				c.set(m, v)
				data, err := json.Marshal(m)
				require.NoError(t, err)
				_, err = ParseScenario(data)
				problemOf(t, err, c.field)
			})
		}
	}
}

// A Scenario built in Go is held to the same bounds, NaN and infinities
// included.
func TestScenario_ValidateRefusesBadNumbersInGoValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	const long = time.Duration(math.MaxInt64)
	for _, c := range []struct {
		field string
		edit  func(s *Scenario)
	}{
		{"duration", func(s *Scenario) { s.Duration = long }},
		{"duration", func(s *Scenario) { s.Duration = math.MinInt64 }},
		{"entry.rate", func(s *Scenario) { s.Entry.Rate = nan }},
		{"entry.rate", func(s *Scenario) { s.Entry.Rate = inf }},
		{"entry.rate", func(s *Scenario) { s.Entry.Rate = -inf }},
		{"entry.timeout", func(s *Scenario) { s.Entry.Timeout = long }},
		{"tiers[0].workers", func(s *Scenario) { s.Tiers[0].Workers = math.MaxInt }},
		{"tiers[0].queue", func(s *Scenario) { s.Tiers[0].Queue = math.MaxInt }},
		{"tiers[0].queue", func(s *Scenario) { s.Tiers[0].Queue = math.MinInt }},
		{"tiers[0].service.mean", func(s *Scenario) { s.Tiers[0].Service.Mean = long }},
		{"tiers[0].calls[0].probability", func(s *Scenario) { s.Tiers[0].Calls[0].Probability = nan }},
		{"tiers[0].calls[0].probability", func(s *Scenario) { s.Tiers[0].Calls[0].Probability = inf }},
		{"tiers[0].calls[0].timeout", func(s *Scenario) { s.Tiers[0].Calls[0].Timeout = long }},
		{"tiers[0].calls[0].retry.attempts", func(s *Scenario) { s.Tiers[0].Calls[0].Retry = &Retry{Attempts: math.MaxInt} }},
		{"tiers[0].calls[0].retry.backoff", func(s *Scenario) { s.Tiers[0].Calls[0].Retry = &Retry{Attempts: 2, Backoff: long} }},
		{"tiers[0].calls[0].retry.budget", func(s *Scenario) { s.Tiers[0].Calls[0].Retry = &Retry{Attempts: 2, Budget: nan} }},
		{"tiers[0].calls[0].retry.budget", func(s *Scenario) { s.Tiers[0].Calls[0].Retry = &Retry{Attempts: 2, Budget: inf} }},
		{"tiers[0].calls[0].policy.error_ratio", func(s *Scenario) { p := breaker.DefaultPolicy(); p.ErrorRatio = nan; s.Tiers[0].Calls[0].Policy = &p }},
		{"policy.jitter", func(s *Scenario) { s.Policy.Jitter = inf }},
		{"faults[0].start", func(s *Scenario) { s.Faults[0].Start = long }},
		{"faults[0].start", func(s *Scenario) { s.Faults[0].Start = math.MinInt64 }},
		{"faults[0].duration", func(s *Scenario) { s.Faults[0].Duration = long }},
		{"faults[0].every", func(s *Scenario) { s.Faults[0].Repeat, s.Faults[0].Every = 10, long/2 }},
		{"faults[0].repeat", func(s *Scenario) { s.Faults[0].Repeat, s.Faults[0].Every = math.MaxInt, time.Minute }},
		{"faults[0].error_rate", func(s *Scenario) { s.Faults[0].ErrorRate = nan }},
		{"faults[0].error_rate", func(s *Scenario) { s.Faults[0].ErrorRate = -inf }},
		{"faults[0].slow_fraction", func(s *Scenario) { s.Faults[0].SlowFraction, s.Faults[0].SlowLatency = nan, time.Second }},
		{"faults[0].slow_latency", func(s *Scenario) { s.Faults[0].SlowFraction, s.Faults[0].SlowLatency = 0.1, long }},
		{"faults[0].added_latency", func(s *Scenario) { s.Faults[0].AddedLatency = long }},
	} {
		s := pair(10, 30*time.Second)
		s.Faults = []Fault{{Tier: "back", Start: 10 * time.Second, Duration: 5 * time.Second, ErrorRate: 0.5}}
		require.NoError(t, s.Validate())
		c.edit(s)
		problemOf(t, s.Validate(), c.field)
	}
}

// The message of a ScenarioError lists a bounded number of problems: a
// document of a thousand bad tiers made a message that grew with it, with
// no place in a log line or a terminal, and so did the list of tier names
// a problem quotes. Problems keeps them all.
func TestScenarioError_MessageListsABoundedNumberOfProblems(t *testing.T) {
	m := minimalDoc(t)
	var tiers []any
	for i := range 1000 {
		tiers = append(tiers, doc{"name": fmt.Sprintf("t%d", i), "workers": 0, "service": doc{"mean": "1ms"}})
	}
	m["tiers"] = tiers
	data, err := json.Marshal(m)
	require.NoError(t, err)
	_, err = ParseScenario(data)
	var se *ScenarioError
	require.ErrorAs(t, err, &se)
	assert.Greater(t, len(se.Problems), 1000)
	msg := err.Error()
	assert.Less(t, len(msg), 4096)
	assert.Equal(t, 20, strings.Count(msg, "; "), "20 problems, then the count of the rest")
	assert.Contains(t, msg, fmt.Sprintf("; and %d more problems", len(se.Problems)-20))
}
