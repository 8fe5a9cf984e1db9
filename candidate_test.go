package breaker

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In JSON a candidate is a change to the document around it: its default
// onto the document's, each key onto its own override.
func TestGroupPolicy_ACandidateIsReadAsAChangeToTheDocument(t *testing.T) {
	gp, err := ParseGroupPolicy([]byte(`{
		"default":   {"min_requests": 10},
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}, "orders.Create": {"probes": 5}},
		"candidate": {
			"default":   {"error_ratio": 0.4},
			"overrides": {"payment.Charge": {"error_ratio": 0.3}, "inventory.GetStock": {"call_timeout": "1s"}}
		}}`))
	require.NoError(t, err)
	require.NotNil(t, gp.Candidate)
	c := gp.Candidate
	want := func(edit func(*Policy)) Policy {
		p := DefaultPolicy()
		p.MinRequests = 10
		edit(&p)
		return p
	}
	assert.Equal(t, want(func(p *Policy) { p.ErrorRatio = 0.4 }), c.Default)
	assert.Equal(t, map[string]Policy{
		"payment.Charge": want(func(p *Policy) {
			p.OpenFor, p.MaxOpenFor, p.ErrorRatio = 45*time.Second, 3*time.Minute, 0.3
		}),
		"orders.Create":      want(func(p *Policy) { p.Probes, p.ErrorRatio = 5, 0.4 }),
		"inventory.GetStock": want(func(p *Policy) { p.CallTimeout, p.ErrorRatio = time.Second, 0.4 }),
	}, c.Overrides)
	assert.Nil(t, c.Candidate)

	// It round-trips through JSON, and promoting it gives the document
	// that publishes it.
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
	promoted, err := gp.Promote()
	require.NoError(t, err)
	assert.Equal(t, *c, promoted)
	_, err = promoted.Promote()
	assert.Error(t, err, "nothing to promote")

	// A candidate of the keys alone leaves the default alone.
	gp, err = ParseGroupPolicy([]byte(`{"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.3}}}}`))
	require.NoError(t, err)
	assert.Equal(t, DefaultPolicy(), gp.Candidate.Default)
}

func TestGroupPolicy_ABadCandidateIsRefusedByPath(t *testing.T) {
	_, err := ParseGroupPolicy([]byte(`{
		"overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}},
		"candidate": {
			"default":   {"error_ratio": 2},
			"overrides": {"payment.Charge": {"max_open_for": "10s", "windw": "1s"}, "": {}},
			"candidate": {},
			"default": {}
		}}`))
	require.Error(t, err)
	assert.Equal(t, []FieldError{
		{Field: "candidate.default", Problem: "duplicate key"},
		{Field: "candidate.overrides", Problem: "empty key"},
		{Field: `candidate.overrides["payment.Charge"].windw`, Problem: "unknown field"},
	}[:1], problemsOf(t, err)[:1])
	fields := map[string]bool{}
	for _, p := range problemsOf(t, err) {
		fields[p.Field] = true
	}
	for _, f := range []string{"candidate.default", "candidate.candidate", "candidate.overrides",
		`candidate.overrides["payment.Charge"].windw`} {
		assert.True(t, fields[f], "%s in %v", f, err)
	}

	_, err = ParseGroupPolicy([]byte(`{"candidate": {"overrides": {"payment.Charge": {"open_for": "3m"}}}}`))
	assert.EqualError(t, err, `breaker: invalid policy: candidate.overrides["payment.Charge"].max_open_for: must be at least open_for (3m0s), got 2m0s`)

	inner := GroupPolicy{Candidate: &GroupPolicy{Candidate: &GroupPolicy{}}}
	assert.EqualError(t, inner.Validate(), "breaker: invalid policy: candidate.candidate: a candidate has no candidate of its own")
}

// candidateDoc tries a lower error ratio on payment.Charge alone.
const candidateDoc = `{"default": {"min_requests": 10},
	"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`

func (h *docHarness) candidates() chan CandidateEvent {
	ch := make(chan CandidateEvent, 64)
	h.t.Cleanup(h.g.SubscribeCandidate(func(e CandidateEvent) { ch <- e }))
	return ch
}

func drain(ch chan CandidateEvent) []CandidateEvent {
	var out []CandidateEvent
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The candidate would have opened where the policy in force stays
// closed: it is reported with its tripping window, and refuses nothing.
func TestCandidate_ReportsATripThePolicyInForceDoesNotMake(t *testing.T) {
	logs := &lockedBuffer{}
	h := newDocHarness(t, GroupConfig{}, WithLogger(slogTo(logs)))
	ch := h.candidates()
	h.doc("v7", candidateDoc)

	h.calls("payment.Charge", 8, nil)
	h.calls("orders.Create", 8, nil)
	h.calls("payment.Charge", 2, errBoom) // 2 of 10: 0.2
	h.calls("orders.Create", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	assert.Equal(t, Closed, pay.State(), "the policy in force")
	events := drain(ch)
	require.Len(t, events, 1)
	e := events[0]
	assert.Equal(t, CandidateEvent{Name: "payment.Charge", Version: "v7", Time: h.clk.Now(),
		Candidate: Open, Active: Closed, Moved: "candidate", Reason: ReasonErrorRatio,
		Window: Snapshot{Counted: 10, Failures: 2}}, e)

	// It refuses nothing, and counts what it would have refused.
	ran := 0
	for i := 0; i < 3; i++ {
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(context.Context) error { ran++; return nil }))
	}
	assert.Equal(t, 3, ran)
	st, ok := pay.Candidate()
	require.True(t, ok)
	assert.Equal(t, "v7", st.Version)
	assert.Equal(t, Open, st.State)
	assert.Equal(t, uint64(3), st.WouldRefuse)
	assert.Equal(t, uint64(1), st.Differences)
	assert.Equal(t, Snapshot{Counted: 10, Failures: 2}, st.Trip)
	assert.Equal(t, 0.2, st.Policy.ErrorRatio)
	assert.Equal(t, []TransitionCount{{From: Closed, To: Open, Reason: ReasonErrorRatio, Count: 1}}, st.Transitions)
	require.NotNil(t, pay.Status().Candidate)

	_, ok = mustGet(t, h.g, "orders.Create").Candidate()
	assert.False(t, ok, "a key whose candidate is its own policy runs none")
	assert.Nil(t, mustGet(t, h.g, "orders.Create").Status().Candidate)

	assert.Contains(t, logs.String(), `level=INFO msg="breaker candidate differs" breaker.name=payment.Charge breaker.candidate=true `+
		`breaker.version=v7 breaker.moved=candidate breaker.candidate_state=open breaker.active_state=closed breaker.reason=error_ratio `+
		`breaker.ratio=0.2 breaker.counted=10 breaker.failures=2 breaker.timeouts=0 breaker.would_refuse=0 breaker.would_admit=0`)

	// Half-open after its cooldown, then closed by its probes while the
	// policy in force stayed closed.
	h.clk.Add(30 * time.Second)
	h.calls("payment.Charge", 3, nil)
	events = drain(ch)
	require.Len(t, events, 1, "half-open differs; closed agrees again")
	assert.Equal(t, HalfOpen, events[0].Candidate)
	assert.Equal(t, ReasonCooldown, events[0].Reason)
	st, _ = pay.Candidate()
	assert.Equal(t, Closed, st.State)
}

// The policy in force opens where the candidate would not: reported as
// the active side's move, with the calls the candidate would have let
// through.
func TestCandidate_ReportsATripTheCandidateWouldNotMake(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	ch := h.candidates()
	h.doc("v1", `{"default": {"min_requests": 10, "error_ratio": 0.2},
		"candidate": {"default": {"error_ratio": 0.5}}}`)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	require.Equal(t, Open, pay.State())
	events := drain(ch)
	require.Len(t, events, 1)
	assert.Equal(t, CandidateEvent{Name: "payment.Charge", Version: "v1", Time: h.clk.Now(),
		Candidate: Closed, Active: Open, Moved: "active", Reason: ReasonErrorRatio,
		Window: Snapshot{Counted: 10, Failures: 2}}, events[0])
	for i := 0; i < 4; i++ {
		require.ErrorIs(t, h.g.Do(context.Background(), "payment.Charge", func(context.Context) error { return nil }), ErrOpen)
	}
	st, _ := pay.Candidate()
	assert.Equal(t, uint64(4), st.WouldAdmit)
	assert.Empty(t, drain(ch), "the same difference is reported once")
}

// An outcome that trips both is no difference, whichever settles first.
func TestCandidate_AnOutcomeThatTripsBothIsNoDifference(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	ch := h.candidates()
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"default": {"open_for": "45s", "max_open_for": "3m"}}}`)
	h.calls("payment.Charge", 10, errBoom)
	require.Equal(t, Open, mustGet(t, h.g, "payment.Charge").State())
	st, _ := mustGet(t, h.g, "payment.Charge").Candidate()
	assert.Equal(t, Open, st.State)
	assert.Empty(t, drain(ch))
}

// The two-step form and a panicking call reach the candidate too.
func TestCandidate_SeesAllowAndPanickingCalls(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", candidateDoc)
	pay := mustGet(t, h.g, "payment.Charge")
	for i := 0; i < 8; i++ {
		_, done, err := pay.Allow(context.Background())
		require.NoError(t, err)
		done(nil)
		done(nil) // once only
	}
	func() {
		defer func() { assert.Equal(t, "bug", recover()) }()
		_ = pay.Do(context.Background(), func(context.Context) error { panic("bug") })
	}()
	st, _ := pay.Candidate()
	assert.Equal(t, Snapshot{Counted: 9, Failures: 1}, st.Window)
	assert.Equal(t, Snapshot{Counted: 9, Failures: 1}, pay.Snapshot())
	_, err := Call(context.Background(), pay, func(context.Context) (int, error) { return 0, errBoom })
	require.ErrorIs(t, err, errBoom)
	st, _ = pay.Candidate()
	assert.Equal(t, Open, st.State, "2 of 10")
}

// Promoting is publishing the candidate as the document: the breaker
// runs it, keeps its state and window, and runs no candidate any more.
func TestCandidate_PromotingPublishesItAsThePolicyInForce(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", candidateDoc)
	h.calls("payment.Charge", 9, nil)
	pay := mustGet(t, h.g, "payment.Charge")
	snap := pay.Snapshot()

	gp, err := ParseGroupPolicy([]byte(candidateDoc))
	require.NoError(t, err)
	promoted, err := gp.Promote()
	require.NoError(t, err)
	data, err := json.Marshal(promoted)
	require.NoError(t, err)
	h.doc("v2", string(data))

	assert.Equal(t, 0.2, pay.Policy().ErrorRatio)
	assert.Equal(t, snap, pay.Snapshot())
	_, ok := pay.Candidate()
	assert.False(t, ok)
}

// A candidate that stays across a reload keeps its state; one for a key
// made later is given at creation.
func TestCandidate_StaysAcrossAReloadAndReachesNewKeys(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", candidateDoc)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	h.doc("v2", `{"default": {"min_requests": 10, "probes": 2},
		"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`)
	st, ok := mustGet(t, h.g, "payment.Charge").Candidate()
	require.True(t, ok)
	assert.Equal(t, Open, st.State, "kept")
	assert.Equal(t, "v2", st.Version)
	assert.Equal(t, 2, st.Policy.Probes)

	h.doc("v3", `{"candidate": {"default": {"error_ratio": 0.3}}}`)
	_, ok = mustGet(t, h.g, "never.Seen@10.0.0.1").Candidate()
	assert.True(t, ok)
}

// A candidate's probe runs on the context of the breaker in force, which
// is closed, so it is no probe there and makes no mark: a mark nobody can
// see would only keep every closed call of the process looking for one.
func TestCandidate_AProbeOfTheCandidateMakesNoMark(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", candidateDoc)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	h.clk.Add(30 * time.Second) // the candidate's cooldown
	before := liveProbes.Load()
	for i := 0; i < 3; i++ { // the candidate's probes
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
			assert.False(t, IsProbe(ctx))
			assert.Equal(t, before, liveProbes.Load())
			return nil
		}))
	}
	st, _ := pay.Candidate()
	assert.Equal(t, Closed, st.State)
	assert.Equal(t, Closed, pay.State())
}

// A call to another breaker made inside a call, with its context, runs
// that breaker's candidate too; fn sees the caller's own context.
func TestCandidate_ANestedCallRunsItsOwnCandidate(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"default": {"error_ratio": 0.2}}}`)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "caller")
	for i := 0; i < 3; i++ {
		require.NoError(t, h.g.Do(ctx, "outer.Call", func(ctx context.Context) error {
			assert.Equal(t, "caller", ctx.Value(key{}))
			return h.g.Do(ctx, "inner.Call", func(context.Context) error { return nil })
		}))
	}
	for _, k := range []string{"outer.Call", "inner.Call"} {
		st, ok := mustGet(t, h.g, k).Candidate()
		require.True(t, ok)
		assert.Equal(t, uint64(3), st.Window.Counted, k)
	}
}

// Under a policy with a deadline the call gets a context derived from
// the caller's; the candidate times the call on its own rules, judging
// slowness and its own timeout without imposing them.
func TestCandidate_JudgesATimedCallByItsOwnRules(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10, "call_timeout": "1s"},
		"candidate": {"default": {"call_timeout": "150ms", "slow_call": "100ms", "slow_ratio": 0.5}}}`)
	for i := 0; i < 2; i++ {
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			assert.True(t, ok, "the policy in force's deadline")
			h.clk.Add(120 * time.Millisecond)
			return nil
		}))
	}
	pay := mustGet(t, h.g, "payment.Charge")
	assert.Equal(t, Snapshot{Counted: 2}, pay.Snapshot())
	st, _ := pay.Candidate()
	assert.Equal(t, Snapshot{Counted: 2, Slow: 2}, st.Window, "slow for the candidate")
	require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
		h.clk.Add(200 * time.Millisecond)
		return nil
	}))
	st, _ = pay.Candidate()
	assert.Equal(t, uint64(3), st.Window.Counted)
	assert.Equal(t, uint64(1), st.Window.Timeouts, "past the candidate's timeout")
	assert.Equal(t, uint64(0), pay.Snapshot().Timeouts)
}

// A candidate with an adaptive timeout judges a call by its own deadline
// in force, as it judges a fixed one, without imposing it: a call that
// outlasts it is a timeout for the candidate, censored in its histogram.
// The candidate's adaptive deadline used to be ignored: such a call was
// a success for it, and a candidate trying a tighter adaptive timeout
// never showed the timeouts it would make.
func TestCandidate_JudgesACallByItsOwnAdaptiveDeadline(t *testing.T) {
	h := newDocHarness(t, GroupConfig{})
	h.doc("v1", `{"default": {"min_requests": 10, "call_timeout": "1s"},
		"candidate": {"default": {"call_timeout": "150ms", "adaptive_timeout": {"enabled": true, "min": "10ms", "max": "1s"}}}}`)
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
			h.clk.Add(d)
			return nil
		}))
	}
	pay := mustGet(t, h.g, "payment.Charge")
	assert.Equal(t, Snapshot{Counted: 2}, pay.Snapshot(), "within the policy in force's 1s")
	st, _ := pay.Candidate()
	assert.Equal(t, Snapshot{Counted: 2, Failures: 1, Timeouts: 1}, st.Window, "past the candidate's 150ms")
	lat, ok := pay.cand.Load().shadow.Latency()
	require.True(t, ok)
	assert.Equal(t, uint64(1), lat.Samples)
	assert.Equal(t, uint64(1), lat.Censored)
	assert.Equal(t, 150*time.Millisecond, lat.Timeout)
}

// Calls, Allow and status reads race reloads that add, change and remove
// a candidate; the race detector and the counts must agree.
func TestCandidate_RaceHammer(t *testing.T) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	require.NoError(t, err)
	hold, err := g.HoldPolicies("hammer")
	require.NoError(t, err)
	defer hold.Release()
	docs := []string{
		`{"default": {"min_requests": 5}}`,
		`{"default": {"min_requests": 5}, "candidate": {"default": {"error_ratio": 0.2}}}`,
		`{"default": {"min_requests": 5, "call_timeout": "1s"}, "candidate": {"default": {"slow_call": "1ms", "slow_ratio": 0.5}}}`,
	}
	const workers, calls = 4, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			gp, err := ParseGroupPolicy([]byte(docs[i%len(docs)]))
			assert.NoError(t, err)
			assert.NoError(t, hold.Apply(gp, "hammer", strconv.Itoa(i)))
			_ = g.PolicyLabel()
		}
	}()
	var calling sync.WaitGroup
	for w := 0; w < workers; w++ {
		calling.Add(1)
		go func(w int) {
			defer calling.Done()
			key := []string{"payment.Charge", "orders.Create"}[w%2]
			for i := 0; i < calls; i++ {
				var e error
				if i%3 == 0 {
					e = errBoom
				}
				if i%5 == 0 {
					b, _ := g.Get(key)
					if _, done, err := b.Allow(context.Background()); err == nil {
						done(e)
					}
					_ = b.Status()
					continue
				}
				_ = g.Do(context.Background(), key, func(context.Context) error { return e })
			}
		}(w)
	}
	calling.Wait()
	close(stop)
	wg.Wait()
	for _, k := range []string{"payment.Charge", "orders.Create"} {
		c := mustGet(t, g, k).Counters()
		assert.Equal(t, c.Admitted, c.Successes+c.Failures+c.Timeouts+c.Ignored, k)
	}
}

// Running a candidate records every outcome twice, and allocates nothing.
func TestCandidate_DoAllocatesNothing(t *testing.T) {
	g, err := NewGroup(GroupConfig{}, WithLogger(discardLogger()))
	require.NoError(t, err)
	require.NoError(t, g.LoadPolicies([]byte(`{"candidate": {"default": {"error_ratio": 0.3}}}`)))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	require.NoError(t, g.Do(ctx, "allocs.Candidate", ok))
	_, has := mustGet(t, g, "allocs.Candidate").Candidate()
	require.True(t, has)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = g.Do(ctx, "allocs.Candidate", ok) }))
	st, _ := mustGet(t, g, "allocs.Candidate").Candidate()
	assert.Equal(t, uint64(1002), st.Window.Counted)
}
