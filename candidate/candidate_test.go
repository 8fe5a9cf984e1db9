package candidate_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/internal/testutil"
)

// candidateDoc tries a lower error ratio on payment.Charge alone.
const candidateDoc = `{"default": {"min_requests": 10},
	"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`

func (h *harness) candidates() chan candidate.Event {
	ch := make(chan candidate.Event, 64)
	h.t.Cleanup(h.rep.Subscribe(func(e candidate.Event) { ch <- e }))
	return ch
}

func drain(ch chan candidate.Event) []candidate.Event {
	var out []candidate.Event
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
	logs := &testutil.LogBuffer{}
	h := newLoggedHarness(t, breaker.GroupConfig{}, testutil.TextLogger(logs))
	ch := h.candidates()
	h.doc("v7", candidateDoc)

	h.calls("payment.Charge", 8, nil)
	h.calls("orders.Create", 8, nil)
	h.calls("payment.Charge", 2, errBoom) // 2 of 10: 0.2
	h.calls("orders.Create", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	assert.Equal(t, breaker.Closed, pay.State(), "the policy in force")
	events := drain(ch)
	require.Len(t, events, 1)
	e := events[0]
	assert.Equal(t, candidate.Event{Name: "payment.Charge", Version: "v7", Time: h.clk.Now(),
		Candidate: breaker.Open, Active: breaker.Closed, Moved: "candidate", Reason: breaker.ReasonErrorRatio,
		Window: breaker.Snapshot{Counted: 10, Failures: 2}}, e)

	// It refuses nothing, and counts what it would have refused.
	ran := 0
	for i := 0; i < 3; i++ {
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(context.Context) error { ran++; return nil }))
	}
	assert.Equal(t, 3, ran)
	st, ok := candidate.Of(pay)
	require.True(t, ok)
	assert.Equal(t, "v7", st.Version)
	assert.Equal(t, breaker.Open, st.State)
	assert.Equal(t, uint64(3), st.WouldRefuse)
	assert.Equal(t, uint64(1), st.Differences)
	assert.Equal(t, breaker.Snapshot{Counted: 10, Failures: 2}, st.Trip)
	assert.Equal(t, 0.2, st.Policy.ErrorRatio)
	assert.Equal(t, []breaker.TransitionCount{{From: breaker.Closed, To: breaker.Open, Reason: breaker.ReasonErrorRatio, Count: 1}}, st.Transitions)

	_, ok = candidate.Of(mustGet(t, h.g, "orders.Create"))
	assert.False(t, ok, "a key whose candidate is its own policy runs none")

	assert.Contains(t, logs.String(), `level=INFO msg="breaker candidate differs" breaker.name=payment.Charge breaker.candidate=true `+
		`breaker.version=v7 breaker.moved=candidate breaker.candidate_state=open breaker.active_state=closed breaker.reason=error_ratio `+
		`breaker.ratio=0.2 breaker.counted=10 breaker.failures=2 breaker.timeouts=0 breaker.would_refuse=0 breaker.would_admit=0`)

	// Half-open after its cooldown, then closed by its probes while the
	// policy in force stayed closed.
	h.clk.Add(30 * time.Second)
	h.calls("payment.Charge", 3, nil)
	events = drain(ch)
	require.Len(t, events, 1, "half-open differs; closed agrees again")
	assert.Equal(t, breaker.HalfOpen, events[0].Candidate)
	assert.Equal(t, breaker.ReasonCooldown, events[0].Reason)
	st, _ = candidate.Of(pay)
	assert.Equal(t, breaker.Closed, st.State)
}

// The policy in force opens where the candidate would not: reported as
// the active side's move, with the calls the candidate would have let
// through.
func TestCandidate_ReportsATripTheCandidateWouldNotMake(t *testing.T) {
	h := newHarness(t)
	ch := h.candidates()
	h.doc("v1", `{"default": {"min_requests": 10, "error_ratio": 0.2},
		"candidate": {"default": {"error_ratio": 0.5}}}`)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	pay := mustGet(t, h.g, "payment.Charge")
	require.Equal(t, breaker.Open, pay.State())
	events := drain(ch)
	require.Len(t, events, 1)
	assert.Equal(t, candidate.Event{Name: "payment.Charge", Version: "v1", Time: h.clk.Now(),
		Candidate: breaker.Closed, Active: breaker.Open, Moved: "active", Reason: breaker.ReasonErrorRatio,
		Window: breaker.Snapshot{Counted: 10, Failures: 2}}, events[0])
	for i := 0; i < 4; i++ {
		require.ErrorIs(t, h.g.Do(context.Background(), "payment.Charge", func(context.Context) error { return nil }), breaker.ErrOpen)
	}
	st, _ := candidate.Of(pay)
	assert.Equal(t, uint64(4), st.WouldAdmit)
	assert.Empty(t, drain(ch), "the same difference is reported once")
}

// A new pod's cold start, which the policy in force leaves out of its
// window (ColdTargets), is no difference: the candidate leaves it out too.
// A candidate differing only in min_requests used to count it, open and
// be reported.
func TestCandidate_AColdStartIsNoDifference(t *testing.T) {
	h := newGroupHarness(t, breaker.GroupConfig{ColdTargets: true})
	ch := h.candidates()
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"default": {"min_requests": 5}}}`)
	key := breaker.TargetKey("inventory.GetStock", "10.0.0.7:443")
	h.calls(key, 10, errBoom)
	st, ok := candidate.Of(mustGet(t, h.g, key))
	require.True(t, ok)
	assert.Equal(t, breaker.Closed, st.State)
	assert.Empty(t, drain(ch))
}

// An outcome that trips both is no difference, whichever settles first.
func TestCandidate_AnOutcomeThatTripsBothIsNoDifference(t *testing.T) {
	h := newHarness(t)
	ch := h.candidates()
	h.doc("v1", `{"default": {"min_requests": 10}, "candidate": {"default": {"open_for": "45s", "max_open_for": "3m"}}}`)
	h.calls("payment.Charge", 10, errBoom)
	require.Equal(t, breaker.Open, mustGet(t, h.g, "payment.Charge").State())
	st, _ := candidate.Of(mustGet(t, h.g, "payment.Charge"))
	assert.Equal(t, breaker.Open, st.State)
	assert.Empty(t, drain(ch))
}

// The two-step form and a panicking call reach the candidate too.
func TestCandidate_SeesAllowAndPanickingCalls(t *testing.T) {
	h := newHarness(t)
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
	st, _ := candidate.Of(pay)
	assert.Equal(t, breaker.Snapshot{Counted: 9, Failures: 1}, st.Window)
	assert.Equal(t, breaker.Snapshot{Counted: 9, Failures: 1}, pay.Snapshot())
	_, err := breaker.Call(context.Background(), pay, func(context.Context) (int, error) { return 0, errBoom })
	require.ErrorIs(t, err, errBoom)
	st, _ = candidate.Of(pay)
	assert.Equal(t, breaker.Open, st.State, "2 of 10")
}

// Promoting is publishing the candidate as the document: the breaker
// runs it, keeps its state and window, and runs no candidate any more.
func TestCandidate_PromotingPublishesItAsThePolicyInForce(t *testing.T) {
	h := newHarness(t)
	h.doc("v1", candidateDoc)
	h.calls("payment.Charge", 9, nil)
	pay := mustGet(t, h.g, "payment.Charge")
	snap := pay.Snapshot()

	gp, err := breaker.ParseGroupPolicy([]byte(candidateDoc))
	require.NoError(t, err)
	promoted, err := gp.Promote()
	require.NoError(t, err)
	data, err := json.Marshal(promoted)
	require.NoError(t, err)
	h.doc("v2", string(data))

	assert.Equal(t, 0.2, pay.Policy().ErrorRatio)
	assert.Equal(t, snap, pay.Snapshot())
	_, ok := candidate.Of(pay)
	assert.False(t, ok)
}

// A candidate that stays across a reload keeps its state; one for a key
// made later is given at creation.
func TestCandidate_StaysAcrossAReloadAndReachesNewKeys(t *testing.T) {
	h := newHarness(t)
	h.doc("v1", candidateDoc)
	h.calls("payment.Charge", 8, nil)
	h.calls("payment.Charge", 2, errBoom)
	h.doc("v2", `{"default": {"min_requests": 10, "probes": 2},
		"candidate": {"overrides": {"payment.Charge": {"error_ratio": 0.2}}}}`)
	st, ok := candidate.Of(mustGet(t, h.g, "payment.Charge"))
	require.True(t, ok)
	assert.Equal(t, breaker.Open, st.State, "kept")
	assert.Equal(t, "v2", st.Version)
	assert.Equal(t, 2, st.Policy.Probes)

	h.doc("v3", `{"candidate": {"default": {"error_ratio": 0.3}}}`)
	_, ok = candidate.Of(mustGet(t, h.g, "never.Seen@10.0.0.1"))
	assert.True(t, ok)
}

// A call to another breaker made inside a call, with its context, runs
// that breaker's candidate too; fn sees the caller's own context.
func TestCandidate_ANestedCallRunsItsOwnCandidate(t *testing.T) {
	h := newHarness(t)
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
		st, ok := candidate.Of(mustGet(t, h.g, k))
		require.True(t, ok)
		assert.Equal(t, uint64(3), st.Window.Counted, k)
	}
}

// Under a policy with a deadline the call gets a context derived from
// the caller's; the candidate times the call on its own rules, judging
// slowness and its own timeout without imposing them.
func TestCandidate_JudgesATimedCallByItsOwnRules(t *testing.T) {
	h := newHarness(t)
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
	assert.Equal(t, breaker.Snapshot{Counted: 2}, pay.Snapshot())
	st, _ := candidate.Of(pay)
	assert.Equal(t, breaker.Snapshot{Counted: 2, Slow: 2}, st.Window, "slow for the candidate")
	require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
		h.clk.Add(200 * time.Millisecond)
		return nil
	}))
	st, _ = candidate.Of(pay)
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
	h := newHarness(t)
	h.doc("v1", `{"default": {"min_requests": 10, "call_timeout": "1s"},
		"candidate": {"default": {"call_timeout": "150ms", "adaptive_timeout": {"enabled": true, "min": "10ms", "max": "1s"}}}}`)
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		require.NoError(t, h.g.Do(context.Background(), "payment.Charge", func(ctx context.Context) error {
			h.clk.Add(d)
			return nil
		}))
	}
	pay := mustGet(t, h.g, "payment.Charge")
	assert.Equal(t, breaker.Snapshot{Counted: 2}, pay.Snapshot(), "within the policy in force's 1s")
	st, _ := candidate.Of(pay)
	assert.Equal(t, breaker.Snapshot{Counted: 2, Failures: 1, Timeouts: 1}, st.Window, "past the candidate's 150ms")
	lat, ok := candidate.ShadowOf(pay).Latency()
	require.True(t, ok)
	assert.Equal(t, uint64(1), lat.Samples)
	assert.Equal(t, uint64(1), lat.Censored)
	assert.Equal(t, 150*time.Millisecond, lat.Timeout)
}

// Calls, Allow and status reads race reloads that add, change and remove
// a candidate; the race detector and the counts must agree.
func TestCandidate_RaceHammer(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
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
			gp, err := breaker.ParseGroupPolicy([]byte(docs[i%len(docs)]))
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
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	require.NoError(t, g.LoadPolicies([]byte(`{"candidate": {"default": {"error_ratio": 0.3}}}`)))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	require.NoError(t, g.Do(ctx, "allocs.Candidate", ok))
	_, has := candidate.Of(mustGet(t, g, "allocs.Candidate"))
	require.True(t, has)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = g.Do(ctx, "allocs.Candidate", ok) }))
	st, _ := candidate.Of(mustGet(t, g, "allocs.Candidate"))
	assert.Equal(t, uint64(1002), st.Window.Counted)
}
