package breaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupHarness is a group on a mock clock with exact cooldowns.
type groupHarness struct {
	t   *testing.T
	g   *Group
	clk *clock.Mock
	t0  time.Time
}

func newGroupHarness(t *testing.T, cfg GroupConfig, opts ...Option) *groupHarness {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	g, err := NewGroup(cfg, append([]Option{WithClock(clk), WithRand(func() float64 { return 0.5 })}, opts...)...)
	require.NoError(t, err)
	return &groupHarness{t: t, g: g, clk: clk, t0: clk.Now()}
}

func (gh *groupHarness) calls(key string, n int, err error) {
	gh.t.Helper()
	for i := 0; i < n; i++ {
		got := gh.g.Do(context.Background(), key, func(context.Context) error { return err })
		require.NotErrorIs(gh.t, got, ErrOpen, "%s: call %d refused", key, i+1)
	}
}

func (gh *groupHarness) state(key string) State {
	gh.t.Helper()
	b, err := gh.g.Get(key)
	require.NoError(gh.t, err)
	return b.State()
}

// cachedKey is a constant, so every Get below passes the very string the
// breaker is created with and takes the key cache; builtKey is an equal
// string with bytes of its own, which takes the map.
const cachedKey = "inventory.GetStock@10.0.0.7"

var builtKey = string([]byte(cachedKey))

// reachable returns the breakers Range visits for key.
func reachable(g *Group, key string) []*Breaker {
	var out []*Breaker
	g.Range(func(k string, b *Breaker) bool {
		if k == key {
			out = append(out, b)
		}
		return true
	})
	return out
}

func TestGroup_OneBreakerPerKeyCreatedOnFirstUse(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	assert.Zero(t, gh.g.Len())
	a1, err := gh.g.Get("orders.Create")
	require.NoError(t, err)
	a2, _ := gh.g.Get("orders.Create")
	b1, _ := gh.g.Get("orders.Get")
	assert.Same(t, a1, a2)
	assert.NotSame(t, a1, b1)
	assert.Equal(t, "orders.Create", a1.Name())
	assert.Equal(t, 2, gh.g.Len())

	// Concurrent first use of one key creates one breaker.
	var wg sync.WaitGroup
	got := make([]*Breaker, 16)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], _ = gh.g.Get("payment.Charge")
		}(i)
	}
	wg.Wait()
	for _, b := range got {
		assert.Same(t, got[0], b)
	}
}

func TestGroup_EmptyKeyIsAnError(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	_, err := gh.g.Get("")
	assert.EqualError(t, err, "breaker: empty key")
	assert.EqualError(t, gh.g.Do(context.Background(), "", func(context.Context) error { return nil }), "breaker: empty key")
	assert.Zero(t, gh.g.Len())
}

// behaviour.md §1 Shape: a per-service breaker lets one slow endpoint cut
// off every healthy endpoint of the same service (it took down six healthy
// ones in the incident behind these rules); per-method breakers isolate
// them.
func TestGroup_OneFailingMethodDoesNotOpenItsNeighbours(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("payment.Refund", 20, errBoom)
	gh.calls("payment.Charge", 50, nil)
	assert.Equal(t, Open, gh.state("payment.Refund"))
	assert.Equal(t, Closed, gh.state("payment.Charge"))
}

func TestGroup_OverridesApplyPerKeyAndToTheMethodsTargets(t *testing.T) {
	pay := policy(func(p *Policy) { p.OpenFor = 45 * time.Second; p.MaxOpenFor = 3 * time.Minute })
	pinned := policy(func(p *Policy) { p.MinRequests = 5 })
	gh := newGroupHarness(t, GroupConfig{Policies: GroupPolicy{
		Overrides: map[string]Policy{"payment.Charge": pay, "payment.Charge@10.0.0.9": pinned},
	}})
	get := func(k string) Policy { b, _ := gh.g.Get(k); return b.Policy() }
	assert.Equal(t, DefaultPolicy(), get("orders.Create"), "a zero default means DefaultPolicy")
	assert.Equal(t, pay, get("payment.Charge"))
	assert.Equal(t, pay, get("payment.Charge@10.0.0.7"), "a target inherits its method's override")
	assert.Equal(t, pinned, get("payment.Charge@10.0.0.9"), "its own override wins")
}

func TestGroup_InvalidPoliciesAreRefusedWithPaths(t *testing.T) {
	_, err := NewGroup(GroupConfig{Policies: GroupPolicy{
		Default:   policy(func(p *Policy) { p.Jitter = 2 }),
		Overrides: map[string]Policy{"a": policy(func(p *Policy) { p.Probes = 0 })},
	}})
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "default.jitter", pe.Problems[0].Field)
	assert.Equal(t, `overrides["a"].probes`, pe.Problems[1].Field)

	_, err = NewGroup(GroupConfig{IdleAfter: -time.Second})
	assert.Error(t, err)
}

// A document cut short (a file caught half-copied) is refused saying
// that it ends early, and where: at its last byte, with the line and the
// column, at every cut of a group document and of a policy document. A
// 58-byte group document holding "default" was refused with `want a JSON
// object with "default" and "overrides": unexpected end of the document
// at byte 11`, which reads as a missing field and points at the wrong
// place.
func TestGroupPolicy_ATruncatedDocumentIsSaidToEndEarlyWhereItEnds(t *testing.T) {
	group := "{\"default\": {\"min_requests\": 10, \"open_for\": \"30s\"},\n" +
		" \"overrides\": {\"payment.Charge\": {\"open_for\": \"45s\", \"max_open_for\": \"3m\"}},\n" +
		" \"candidate\": {\"default\": {\"error_ratio\": 0.3}}}"
	single := "{\n  \"min_requests\": 10,\n  \"open_for\": \"45s\", \"jitter\": 0.5\n}"
	for _, c := range []struct {
		name  string
		doc   string
		parse func([]byte) error
	}{
		{"group", group, func(b []byte) error { _, err := ParseGroupPolicy(b); return err }},
		{"policy", single, func(b []byte) error { _, err := ParsePolicy(b); return err }},
	} {
		require.NoError(t, c.parse([]byte(c.doc)), "%s: the whole document", c.name)
		for n := 1; n < len(c.doc); n++ {
			cut := c.doc[:n]
			if strings.TrimSpace(cut) == "" {
				continue // refused as empty
			}
			err := c.parse([]byte(cut))
			var pe *PolicyError
			require.ErrorAs(t, err, &pe, "%s cut at %d: %q", c.name, n, cut)
			require.Len(t, pe.Problems, 1, "%s cut at %d: %v", c.name, n, err)
			p := pe.Problems[0]
			end := len(strings.TrimRight(cut, " \n"))
			line := 1 + strings.Count(cut[:end], "\n")
			col := end - strings.LastIndexByte(cut[:end], '\n')
			want := fmt.Sprintf("the document ends early at byte %d (line %d, column %d)", end, line, col)
			assert.Equal(t, "(document)", p.Field, "%s cut at %d", c.name, n)
			assert.True(t, strings.HasPrefix(p.Problem, want), "%s cut at %d (%q):\n got %s\nwant %s…", c.name, n, cut, p.Problem, want)
			assert.NotContains(t, p.Problem, "want", "%s cut at %d: it names nothing as missing", c.name, n)
		}
	}

	// The case as it was met, a file cut at 58 bytes inside "default"
	// (the old message pointed at byte 11, where its value begins), and
	// one cut inside "overrides", on the second line.
	met := `{"default": {"min_requests": 10, "open_for": "30s", "max_open_for": "3m"}}`[:58]
	_, err := ParseGroupPolicy([]byte(met))
	assert.EqualError(t, err, `breaker: invalid policy: (document): the document ends early at byte 58 (line 1, column 59), in the value of default`)
	_, err = ParseGroupPolicy([]byte(group[:90]))
	assert.EqualError(t, err, `breaker: invalid policy: (document): the document ends early at byte 90 (line 2, column 38), in the value of overrides`)
}

// behaviour.md §2 Policy and §7 Errors and bad input: a bad document
// leaves every running breaker on its old policy and the error is
// reported, with the path of each bad field.
func TestGroup_LoadPoliciesIsAllOrNothing(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("orders.Create", 1, nil)
	gh.calls("payment.Charge@10.0.0.7", 1, nil)

	bad := []byte(`{
		"default": {"error_ratio": 0.6},
		"overrides": {
			"payment.Charge": {"open_for": "45s", "max_open_for": "20s"},
			"orders.Create": {"timout": "1s"}
		}
	}`)
	err := gh.g.LoadPolicies(bad)
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Problems, 2)
	assert.Equal(t, `overrides["orders.Create"].timout`, pe.Problems[0].Field)
	assert.Equal(t, `overrides["payment.Charge"].max_open_for`, pe.Problems[1].Field)
	b, _ := gh.g.Get("orders.Create")
	assert.Equal(t, DefaultPolicy(), b.Policy(), "nothing of a bad document is applied")
	assert.Equal(t, DefaultPolicy(), gh.g.Policies().Default)

	good := []byte(`{"default": {"error_ratio": 0.6}, "overrides": {"payment.Charge": {"open_for": "45s"}}}`)
	require.NoError(t, gh.g.LoadPolicies(good))
	assert.Equal(t, 0.6, b.Policy().ErrorRatio)
	pc, _ := gh.g.Get("payment.Charge@10.0.0.7")
	assert.Equal(t, 45*time.Second, pc.Policy().OpenFor)
	assert.Equal(t, 0.6, pc.Policy().ErrorRatio, "an override is read onto the document's default")
	nb, _ := gh.g.Get("search.Query")
	assert.Equal(t, 0.6, nb.Policy().ErrorRatio, "new breakers take the new default")

	for doc, field := range map[string]string{
		`{"defaults": {}}`:             "defaults",
		`{"overrides": {"": {}}}`:      "overrides",
		`{"overrides": [1]}`:           "overrides",
		`[]`:                           "(document)",
		`{"default": {"window": "x"}}`: "default.window",
	} {
		err := gh.g.LoadPolicies([]byte(doc))
		require.ErrorAs(t, err, &pe, doc)
		assert.Equal(t, field, pe.Problems[0].Field, doc)
	}
}

func TestGroupPolicy_AZeroDefaultMeansTheDefaultPolicy(t *testing.T) {
	assert.NoError(t, GroupPolicy{}.Validate())
	assert.NoError(t, GroupPolicy{Overrides: map[string]Policy{"a": DefaultPolicy()}}.Validate())
	assert.Error(t, GroupPolicy{Overrides: map[string]Policy{"a": {}}}.Validate(), "a zero override is not a default")
}

func TestGroupPolicy_JSONRoundTrip(t *testing.T) {
	gp := GroupPolicy{
		Default:   policy(func(p *Policy) { p.ErrorRatio = 0.4 }),
		Overrides: map[string]Policy{"payment.Charge": policy(func(p *Policy) { p.OpenFor = time.Minute; p.MaxOpenFor = 4 * time.Minute })},
	}
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
}

// A group document with "overrides": {} round-trips through its encoding,
// which omits empty overrides.
// Regression (12e7bc0): the empty map came back nil.
func TestGroupPolicy_EmptyOverridesRoundTrip(t *testing.T) {
	gp, err := ParseGroupPolicy([]byte(`{"overrides": {}}`))
	require.NoError(t, err)
	data, err := json.Marshal(gp)
	require.NoError(t, err)
	back, err := ParseGroupPolicy(data)
	require.NoError(t, err)
	assert.Equal(t, gp, back)
}

// GroupConfig.ColdTargets: a per-target key, made by TargetKey, starts
// cold; a per-method key does not.
func TestGroup_ColdTargetsStartCold(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{ColdTargets: true})
	instance := TargetKey("inventory.GetStock", "10.0.0.7")
	gh.calls(instance, 40, errBoom) // a new instance, cold caches
	gh.calls("inventory.GetStock", 20, errBoom)
	assert.Equal(t, Closed, gh.state(instance), "per-target key starts cold")
	assert.Equal(t, Open, gh.state("inventory.GetStock"), "per-method key does not")
	gh.clk.Add(time.Minute)
	gh.calls(instance, 20, errBoom)
	assert.Equal(t, Open, gh.state(instance))
}

// GroupConfig.IdleAfter: a breaker nobody has asked for in IdleAfter is
// dropped whatever its state; a breaker still refusing calls is being
// asked for, and stays.
func TestGroup_EvictsIdleBreakersWhateverTheirState(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute})
	gh.calls("search.Query@10.0.0.1", 1, nil)
	gh.calls("search.Query@10.0.0.2", 20, errBoom) // open
	gh.calls("search.Query@10.0.0.3", 1, nil)
	require.Equal(t, Open, gh.state("search.Query@10.0.0.2"))
	_ = gh.g.EvictIdle() // notes the activity
	gh.clk.Add(5 * time.Minute)
	gh.calls("search.Query@10.0.0.3", 1, nil) // still in use
	probe := gh.g.Do(context.Background(), "search.Query@10.0.0.2", func(context.Context) error { return context.DeadlineExceeded })
	require.ErrorIs(t, probe, context.DeadlineExceeded, "a probe is a call asked for")
	require.Equal(t, Open, gh.state("search.Query@10.0.0.2"))
	assert.Zero(t, gh.g.EvictIdle())
	gh.clk.Add(5 * time.Minute)
	assert.Equal(t, 1, gh.g.EvictIdle(), "only .1 has been idle for 10 minutes")
	assert.Equal(t, 2, gh.g.Len())
	var keys []string
	gh.g.Range(func(k string, _ *Breaker) bool { keys = append(keys, k); return true })
	assert.ElementsMatch(t, []string{"search.Query@10.0.0.2", "search.Query@10.0.0.3"}, keys)

	// Nobody calls .2 again: it goes, open as it is (half-open by now to
	// anyone who looked, and nobody did).
	gh.clk.Add(10 * time.Minute)
	assert.Equal(t, 2, gh.g.EvictIdle())
	_, present := gh.g.m.Load("search.Query@10.0.0.2")
	assert.False(t, present, "an open breaker nobody calls is dropped")
	assert.Equal(t, Evictions{Closed: 2, Open: 1}, gh.g.Status().Evicted)

	// A sweep also runs when new keys are created.
	gh.calls("search.Query@10.0.0.4", 1, nil)
	gh.clk.Add(time.Hour)
	gh.calls("search.Query@10.0.0.5", 1, nil)
	gh.clk.Add(time.Hour)
	gh.calls("search.Query@10.0.0.6", 1, nil)
	_, present = gh.g.m.Load("search.Query@10.0.0.4")
	assert.False(t, present)
	assert.False(t, gh.g.Remove("search.Query@10.0.0.4"))
	assert.True(t, gh.g.Remove("search.Query@10.0.0.6"))
}

// fleet is a churning fleet of pods behind one method, each with its
// per-target breaker: every round one pod dies (its last calls fail and
// its breaker opens) and a new one, at a new address, takes its place.
// Nobody calls a dead pod's address again.
type fleet struct {
	gh   *groupHarness
	live []string
	next int
	dead []string
}

func newFleet(gh *groupHarness, pods int) *fleet {
	f := &fleet{gh: gh}
	for range pods {
		f.live = append(f.live, f.newPod())
	}
	return f
}

func (f *fleet) newPod() string {
	f.next++
	return fmt.Sprintf("payment.Charge@10.0.%d.%d", f.next/256, f.next%256)
}

// step is five minutes of the fleet: a call to each live pod, a look at
// every breaker (a dashboard, which makes the lazy transitions), and a
// round of a watcher of package ops, which evicts.
func (f *fleet) step() {
	for _, k := range f.live {
		f.gh.calls(k, 1, nil)
	}
	f.gh.g.Range(func(_ string, b *Breaker) bool { _ = b.Status(); return true })
	f.gh.g.EvictIdle()
	f.gh.clk.Add(5 * time.Minute)
}

// die kills the oldest live pod: its calls fail until its breaker opens.
func (f *fleet) die() {
	k := f.live[0]
	f.live = append(f.live[1:], f.newPod())
	for i := 0; i < 30; i++ {
		err := f.gh.g.Do(context.Background(), k, func(context.Context) error { return errBoom })
		if errors.Is(err, ErrOpen) {
			break
		}
	}
	require.Equal(f.gh.t, Open, f.gh.state(k), "%s: the dead pod's breaker", k)
	f.dead = append(f.dead, k)
}

// Regression: idle eviction dropped only closed breakers. When a pod
// died, its last calls failed, its per-target breaker opened, and, with
// nobody calling that address again, the breaker stayed open or
// half-open for ever: after a simulated day all 100 dead pods' breakers
// were still in the group.
func TestGroup_IdleOpenBreakerIsDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute, ColdTargets: true})
	f := newFleet(gh, 5)
	for range 100 { // 25 hours
		for range 2 {
			f.step()
		}
		f.die()
		f.step()
	}
	for range 4 {
		f.step()
	}
	assert.ElementsMatch(t, f.live, keysOf(gh.g), "after a day, only the live pods have breakers")
	ev := gh.g.Status().Evicted
	assert.Equal(t, uint64(100), ev.Open+ev.HalfOpen, "every dead pod's breaker was dropped open or half-open: %+v", ev)
	assert.NotZero(t, ev.HalfOpen, "the dashboard found some half-open: %+v", ev)
}

// Keys built from request data (a path, a header) and made to fail open
// one breaker each; nobody asks for them again, and they go.
func TestGroup_RequestKeysMadeToFailAreDroppedWhenIdle(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute})
	gh.calls("orders.Get", 1, nil)
	for i := range 500 {
		key := "orders.Get/" + strconv.Itoa(i)
		gh.calls(key, 20, errBoom)
		require.Equal(t, Open, gh.state(key))
	}
	require.Equal(t, 501, gh.g.Len())
	gh.g.EvictIdle()
	for range 10 {
		gh.clk.Add(time.Minute)
		gh.calls("orders.Get", 1, nil)
		gh.g.EvictIdle()
	}
	assert.Equal(t, []string{"orders.Get"}, keysOf(gh.g))
	assert.Equal(t, Evictions{Open: 500}, gh.g.Status().Evicted)
}

// keysOf returns the group's keys.
func keysOf(g *Group) []string {
	var keys []string
	g.Range(func(k string, _ *Breaker) bool { keys = append(keys, k); return true })
	return keys
}

// GroupConfig.IdleAfter: a breaker in a mode other than ModeAuto is an
// operator's decision and stays, however long it is idle; Remove drops it.
func TestGroup_ForcedAndShadowBreakersAreNotDroppedAsIdle(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute})
	for _, m := range []Mode{ModeForcedOpen, ModeForcedClosed, ModeShadow} {
		b, err := gh.g.Get("ledger.Post@" + m.String())
		require.NoError(t, err)
		require.NoError(t, b.SetMode(m))
	}
	gh.g.EvictIdle()
	gh.clk.Add(24 * time.Hour)
	assert.Zero(t, gh.g.EvictIdle())
	assert.Equal(t, 3, gh.g.Len())
	assert.True(t, gh.g.Remove("ledger.Post@forced_open"))
}

// A drop is recorded with the state the breaker was in, at Info for an
// open or half-open one and at Debug for a closed one; a sweep that drops
// many lists a few and sums up the rest.
func TestGroup_ADropIsRecordedWithTheStateItWasIn(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	gh := newGroupHarness(t, GroupConfig{IdleAfter: 10 * time.Minute}, WithLogger(l))
	gh.calls("payment.Charge@10.0.0.7", 20, errBoom)
	gh.calls("payment.Charge@10.0.0.8", 1, nil)
	gh.g.EvictIdle()
	gh.clk.Add(10 * time.Minute)
	buf.Reset()
	require.Equal(t, 2, gh.g.EvictIdle())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.ElementsMatch(t, []string{
		`level=INFO msg="breaker dropped" breaker.name=payment.Charge@10.0.0.7 breaker.state=open breaker.reason=idle breaker.idle=10m0s`,
		`level=DEBUG msg="breaker dropped" breaker.name=payment.Charge@10.0.0.8 breaker.state=closed breaker.reason=idle breaker.idle=10m0s`,
	}, lines)

	for i := range 20 {
		gh.calls("payment.Charge@10.0.1."+strconv.Itoa(i), 1, nil)
	}
	gh.g.EvictIdle()
	gh.clk.Add(10 * time.Minute)
	buf.Reset()
	require.Equal(t, 20, gh.g.EvictIdle())
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, maxDropRecords+1, buf.String())
	assert.Equal(t, `level=INFO msg="breakers dropped" breaker.reason=idle breaker.dropped=20 breaker.unlisted=4 breaker.closed=20 breaker.open=0 breaker.half_open=0`, lines[maxDropRecords])
}

func TestGroup_EvictionIsOffByDefault(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("a", 1, nil)
	gh.clk.Add(24 * time.Hour)
	assert.Zero(t, gh.g.EvictIdle())
	assert.Equal(t, 1, gh.g.Len())
}

// startCall starts g.Do(key) with a function that blocks until the
// returned release is sent the call's result, and returns once the call
// has been admitted. wait returns Do's error.
func startCall(t *testing.T, do func(context.Context, func(context.Context) error) error) (release chan<- error, wait func() error) {
	t.Helper()
	rel := make(chan error)
	in := make(chan struct{})
	out := make(chan error, 1)
	go func() {
		out <- do(context.Background(), func(context.Context) error {
			close(in)
			return <-rel
		})
	}()
	<-in
	return rel, func() error { return <-out }
}

// An eviction loses no outcome: a call still running when its breaker is
// evicted (a long Do, a stream opened with Allow), or made after it through
// a *Breaker kept from before, reports into the key's current breaker,
// which counts it in its counters and its window, and is the one Range
// finds.
// Regression (0ddf5d9): busy breakers looked idle; their outcomes went nowhere.
func TestGroup_EvictionLosesNoOutcomeOfACallInFlight(t *testing.T) {
	cfg := GroupConfig{IdleAfter: time.Minute}
	cases := []struct {
		name string
		// begin starts a call on b that is still running at the eviction;
		// end finishes it with err.
		begin func(t *testing.T, b *Breaker) (end func(err error))
	}{
		{"do", func(t *testing.T, b *Breaker) func(error) {
			release, wait := startCall(t, b.Do)
			return func(err error) {
				release <- err
				require.ErrorIs(t, wait(), err)
			}
		}},
		{"do_with_timeout", func(t *testing.T, b *Breaker) func(error) {
			require.NoError(t, b.SetPolicy(policy(func(p *Policy) { p.CallTimeout = time.Hour })))
			release, wait := startCall(t, b.Do)
			return func(err error) {
				release <- err
				require.ErrorIs(t, wait(), err)
			}
		}},
		{"allow", func(t *testing.T, b *Breaker) func(error) {
			_, done, err := b.Allow(context.Background())
			require.NoError(t, err)
			return done
		}},
		{"kept_pointer", func(t *testing.T, b *Breaker) func(error) {
			return func(err error) {
				require.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return err }), err)
			}
		}},
		// A result that passed the generation check before the drop and
		// is added after it (see passedCheck): it went to the dropped
		// breaker's window.
		{"checked_before_the_drop", func(t *testing.T, b *Breaker) func(error) {
			late := passedCheck(b)
			return func(err error) {
				require.ErrorIs(t, err, errBoom)
				late.land(Failure)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gh := newGroupHarness(t, cfg)
			old, err := gh.g.Get(cachedKey)
			require.NoError(t, err)
			gh.g.EvictIdle()
			end := tc.begin(t, old)
			gh.clk.Add(time.Minute)
			gh.g.EvictIdle()
			end(errBoom)

			cur, err := gh.g.Get(cachedKey)
			require.NoError(t, err)
			c := cur.Counters()
			c.OpenTime = 0
			assert.Equal(t, Counters{Admitted: 1, Failures: 1}, c, "the group's breaker for the key")
			assert.Equal(t, uint64(1), cur.Snapshot().Failures, "the failure is in the window")
			assert.Equal(t, []*Breaker{cur}, reachable(gh.g, cachedKey))
		})
	}
}

// GroupConfig.IdleAfter: a half-open breaker whose only call is a probe
// still in flight has been asked for nothing since, and is dropped. The
// probe's result, when it comes, gives no verdict and makes no breaker;
// the next call finds a new, closed breaker for the key.
func TestGroup_AProbeOfADroppedBreakerGivesNoVerdict(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: time.Hour})
	gh.calls(cachedKey, 20, errBoom)
	gh.clk.Add(30 * time.Second)
	old, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	_, done, err := old.Allow(context.Background())
	require.NoError(t, err)
	require.Equal(t, HalfOpen, old.State())
	gh.g.EvictIdle()
	gh.clk.Add(time.Hour)
	require.Equal(t, 1, gh.g.EvictIdle())
	assert.Equal(t, Evictions{HalfOpen: 1}, gh.g.Status().Evicted)

	done(nil)
	assert.Zero(t, gh.g.Len(), "a stale probe makes no breaker")
	c := old.Counters()
	assert.Zero(t, c.ProbesPassed, "no verdict")
	assert.Equal(t, uint64(1), c.Successes)

	cur, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	assert.NotSame(t, old, cur)
	assert.Equal(t, Closed, cur.State())
}

// A call admitted before its breaker tripped, still running when the
// tripped breaker is removed, returns a result that was stale anyway: it
// is counted nowhere in a window, and makes no new breaker for a key that
// was removed on purpose. A call admitted just before the drop does make
// one (see TestGroup_EvictionLosesNoOutcomeOfACallInFlight).
// Regression (ae17810): the stale result made a new breaker for the key.
func TestGroup_AStaleResultAfterRemoveMakesNoBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	b, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	release, wait := startCall(t, b.Do)
	gh.calls(cachedKey, 20, errBoom)
	require.Equal(t, Open, b.State())
	require.True(t, gh.g.Remove(cachedKey))
	release <- nil
	require.NoError(t, wait())
	assert.Zero(t, gh.g.Len())
}

// behaviour.md §6 Observability: events from every breaker reach one
// subscriber list, in order per breaker, outside any lock.
func TestGroup_SubscribersSeeEveryBreakersTransitionsInOrder(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	var mu sync.Mutex
	var seen []string
	unsub := gh.g.Subscribe(func(_ *Breaker, e Event) {
		// Calling back into the breaker and the group must not deadlock.
		b, _ := gh.g.Get(e.Name)
		_ = b.State()
		_ = b.Status()
		_ = gh.g.Len()
		mu.Lock()
		seen = append(seen, e.Name+":"+e.From.String()+">"+e.To.String())
		mu.Unlock()
	})
	var other []Event
	unsub2 := gh.g.Subscribe(func(_ *Breaker, e Event) { other = append(other, e) })
	gh.calls("a", 20, errBoom)
	gh.calls("b", 20, errBoom)
	gh.clk.Add(30 * time.Second)
	gh.calls("a", 3, nil)
	assert.Equal(t, []string{"a:closed>open", "b:closed>open", "a:open>half_open", "a:half_open>closed"}, seen)
	assert.Len(t, other, 4)
	unsub()
	unsub()
	gh.calls("a", 20, errBoom)
	assert.Len(t, seen, 4, "unsubscribed")
	assert.Len(t, other, 5)
	unsub2()
	assert.NotNil(t, gh.g.Subscribe(nil))
}

// recorder is a subscriber that keeps the transitions it sees.
type recorder struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 64)} }
func (r *recorder) see(_ *Breaker, e Event) {
	r.mu.Lock()
	r.got = append(r.got, e.Name+" "+e.From.String()+">"+e.To.String())
	r.mu.Unlock()
	r.ch <- struct{}{}
}
func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// A panicking subscriber hides no event from the subscribers after it, and
// its panic comes out of no call: it is recovered and logged at Error, on
// the group's logger or, without one, on slog.Default(). (Package ops tests
// the same on the watcher's goroutine.)
// Regression (5a70e05): the panic cut delivery short and escaped from Do.
func TestGroup_APanickingSubscriberHidesNoEventAndCrashesNothing(t *testing.T) {
	t.Run("caller", func(t *testing.T) {
		var buf bytes.Buffer
		gh := newGroupHarness(t, GroupConfig{}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		gh.g.Subscribe(func(*Breaker, Event) { panic("subscriber bug") })
		rec := newRecorder()
		gh.g.Subscribe(rec.see)
		require.NotPanics(t, func() { gh.calls("inventory.GetStock", 20, errBoom) })
		assert.Equal(t, []string{"inventory.GetStock closed>open"}, rec.seen())
		assert.Contains(t, buf.String(), `level=ERROR msg="breaker: subscriber panicked" breaker.name=inventory.GetStock panic="subscriber bug"`)
	})
	t.Run("no_logger", func(t *testing.T) {
		var buf bytes.Buffer
		defer slog.SetDefault(slog.Default())
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
		gh := newGroupHarness(t, GroupConfig{})
		gh.g.Subscribe(func(*Breaker, Event) { panic("subscriber bug") })
		require.NotPanics(t, func() { gh.calls("inventory.GetStock", 20, errBoom) })
		assert.Contains(t, buf.String(), `msg="breaker: subscriber panicked"`, "reported to slog.Default()")
	})
}

// Once unsubscribe has returned, its subscriber is called no more, even
// with an event already being delivered: here an earlier subscriber
// unsubscribes it.
// Regression (5a70e05): delivery read the subscribers once per event.
func TestGroup_NoDeliveryAfterUnsubscribeReturns(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	rec := newRecorder()
	var unsubscribe func()
	gh.g.Subscribe(func(*Breaker, Event) { unsubscribe() })
	unsubscribe = gh.g.Subscribe(rec.see)
	gh.calls("inventory.GetStock", 20, errBoom)
	assert.Empty(t, rec.seen())
}

// Subscribers see the transitions of the group's breakers only, and are
// told which breaker: a *Breaker kept from before its key was removed is
// forced open unseen; the key's new breaker forced open is seen.
// Regression (d406a6c): a dropped breaker's transitions reached them by key.
func TestGroup_SubscribersSeeNoTransitionOfADroppedBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	rec := newRecorder()
	gh.g.Subscribe(rec.see)
	var from []*Breaker
	gh.g.Subscribe(func(b *Breaker, _ Event) { from = append(from, b) })

	old, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	require.True(t, gh.g.Remove(cachedKey))
	require.NoError(t, old.SetMode(ModeForcedOpen))
	assert.Empty(t, rec.seen())

	cur, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	require.NoError(t, cur.SetMode(ModeForcedOpen))
	assert.Equal(t, []string{cachedKey + " closed>open"}, rec.seen())
	assert.Equal(t, []*Breaker{cur}, from)
}

func TestLogger_OneRecordPerTransitionAndProbesApart(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(l))
	gh.calls("orders.Create", 22, nil)
	gh.calls("orders.Create", 13, context.DeadlineExceeded)
	gh.calls("orders.Create", 9, errBoom)
	gh.clk.Add(30 * time.Second)
	gh.calls("orders.Create", 3, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 6, buf.String())
	assert.Equal(t, `level=WARN msg="breaker opened" breaker.name=orders.Create breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=0.5 breaker.counted=44 breaker.failures=22 breaker.timeouts=13 breaker.cooldown=30s`, lines[0])
	assert.Equal(t, `level=INFO msg="breaker half-open" breaker.name=orders.Create breaker.state=half_open breaker.from=open breaker.reason=cooldown_elapsed breaker.trip_reason=error_ratio breaker.ratio=0.5 breaker.counted=44 breaker.failures=22 breaker.timeouts=13 breaker.outage_since=2026-03-04T05:06:07.000Z breaker.outage_for=30s breaker.trips=1 breaker.refused=0`, lines[1])
	assert.Equal(t, `level=INFO msg="probe passed" breaker.name=orders.Create breaker.probe=true breaker.outcome=success breaker.verdict=pass`, lines[2])
	assert.Equal(t, lines[2], lines[3])
	assert.Equal(t, `level=INFO msg="probe passed" breaker.name=orders.Create breaker.probe=true breaker.outcome=success breaker.verdict=pass`, lines[4])
	assert.Equal(t, `level=INFO msg="breaker closed" breaker.name=orders.Create breaker.state=closed breaker.from=half_open breaker.reason=probes_passed breaker.trip_reason=error_ratio breaker.ratio=0 breaker.counted=0 breaker.failures=0 breaker.timeouts=0 breaker.outage_since=2026-03-04T05:06:07.000Z breaker.outage_for=30s breaker.trips=1 breaker.refused=0 breaker.settles_at=2026-03-04T05:08:37.000Z`, lines[5])
}

func TestLogger_NilLogsNothing(t *testing.T) {
	b, err := New("x", DefaultPolicy(), WithLogger(nil))
	require.NoError(t, err)
	assert.Nil(t, b.opt.logger)
	assert.Empty(t, b.opt.hooks)
}

func ExampleGroup() {
	g, err := NewGroup(GroupConfig{
		Policies: GroupPolicy{Overrides: map[string]Policy{
			"payment.Charge": func() Policy {
				p := DefaultPolicy()
				p.OpenFor, p.MaxOpenFor = 45*time.Second, 3*time.Minute
				return p
			}(),
		}},
	})
	if err != nil {
		panic(err)
	}
	err = g.Do(context.Background(), "inventory.GetStock", func(ctx context.Context) error {
		return nil // the call
	})
	b, _ := g.Get("payment.Charge@10.0.0.7")
	fmt.Println(err, g.Len(), b.Policy().OpenFor)
	// Output: <nil> 2 45s
}

// A GroupConfig encodes as JSON: it has no function field.
func TestGroupConfig_EncodesAsJSON(t *testing.T) {
	b, err := json.Marshal(GroupConfig{IdleAfter: time.Minute})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"IdleAfter":60000000000`)
}

func TestGroup_LookupNeverCreatesABreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	for _, key := range []string{"orders.Create", "orders.Create@10.0.0.7", ""} {
		b, ok := gh.g.Lookup(key)
		assert.False(t, ok, "Lookup(%q)", key)
		assert.Nil(t, b, "Lookup(%q)", key)
	}
	assert.Equal(t, 0, gh.g.Len(), "Lookup created a breaker")

	want, err := gh.g.Get("orders.Create")
	require.NoError(t, err)
	got, ok := gh.g.Lookup("orders.Create")
	assert.True(t, ok)
	assert.Same(t, want, got)
	// A key built at run time, equal but not the same string, misses the
	// pointer cache and must still be found.
	got, ok = gh.g.Lookup(strings.Join([]string{"orders", "Create"}, "."))
	assert.True(t, ok)
	assert.Same(t, want, got)
	_, ok = gh.g.Lookup("orders.Create@10.0.0.7")
	assert.False(t, ok, "a per-target key is its own breaker")
	assert.Equal(t, 1, gh.g.Len())
}

func TestGroup_LookupNeverReturnsADroppedBreaker(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{IdleAfter: time.Minute})
	removed, err := gh.g.Get("orders.Create")
	require.NoError(t, err)
	require.True(t, gh.g.Remove("orders.Create"))
	b, ok := gh.g.Lookup("orders.Create")
	assert.False(t, ok, "Lookup found a removed breaker")
	assert.Nil(t, b)

	gh.calls("orders.Cancel", 1, nil)
	gh.g.EvictIdle() // notes the activity
	gh.clk.Add(2 * time.Minute)
	require.Equal(t, 1, gh.g.EvictIdle())
	_, ok = gh.g.Lookup("orders.Cancel")
	assert.False(t, ok, "Lookup found an evicted breaker")

	again, err := gh.g.Get("orders.Create")
	require.NoError(t, err)
	got, ok := gh.g.Lookup("orders.Create")
	assert.True(t, ok)
	assert.Same(t, again, got)
	assert.NotSame(t, removed, got)
}

// A breaker marked dropped but still in the map (its drop under way, with
// the group's lock held) is not handed out either.
func TestGroup_LookupSkipsABreakerBeingDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	old, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	gh.g.mu.Lock()
	defer gh.g.mu.Unlock()
	_, dropped := old.drop(false)
	require.True(t, dropped)
	for _, key := range []string{cachedKey, builtKey} {
		b, ok := gh.g.Lookup(key)
		assert.False(t, ok, "Lookup(%q) found a breaker being dropped", key)
		assert.Nil(t, b)
	}
	gh.g.forgetLocked(cachedKey, old)
}

// groupDrops are the two ways a group drops a breaker.
var groupDrops = []struct {
	name string
	cfg  GroupConfig
	// prepare runs before the breaker is used; drop drops it.
	prepare, drop func(t *testing.T, gh *groupHarness)
}{
	{
		name:    "remove",
		prepare: func(*testing.T, *groupHarness) {},
		drop: func(t *testing.T, gh *groupHarness) {
			require.True(t, gh.g.Remove(cachedKey))
		},
	},
	{
		name: "evict",
		cfg:  GroupConfig{IdleAfter: time.Minute},
		prepare: func(t *testing.T, gh *groupHarness) {
			gh.g.EvictIdle() // notes the activity
		},
		drop: func(t *testing.T, gh *groupHarness) {
			gh.clk.Add(time.Minute)
			require.Equal(t, 1, gh.g.EvictIdle())
		},
	},
}

// A Get that races a drop never puts the dropped breaker back in the key
// cache. Get(k) misses the cache and finds breaker b in the map; before it
// puts b into the cache, Remove(k) or an idle sweep drops b. The test runs
// Get's steps in that order: later Gets, with the very string or an equal
// one built elsewhere, find one new breaker, the one Range visits.
// Regression (e021017): b was cached again: two live breakers for one key.
func TestGroup_GetRacingADropNeverRecachesTheDroppedBreaker(t *testing.T) {
	for _, d := range groupDrops {
		t.Run(d.name, func(t *testing.T) {
			gh := newGroupHarness(t, d.cfg)
			g := gh.g
			old, err := g.Get(cachedKey)
			require.NoError(t, err)
			d.prepare(t, gh)

			found := g.load(cachedKey) // Get's map lookup...
			require.Same(t, old, found)
			d.drop(t, gh)                 // ...the drop...
			g.cache.put(cachedKey, found) // ...and Get's re-cache.

			b1, err := g.Get(cachedKey)
			require.NoError(t, err)
			b2, err := g.Get(builtKey)
			require.NoError(t, err)
			assert.NotSame(t, old, b1, "Get returned the dropped breaker")
			assert.Same(t, b1, b2, "two breakers for one key")
			assert.Equal(t, []*Breaker{b2}, reachable(g, cachedKey))
		})
	}
}

// Get never returns a breaker whose drop is under way: it waits for the
// drop to finish and returns the key's next breaker. The test holds the
// group's lock between the two steps of the drop, as a sweep does.
// Regression (c9e9b1f): Get returned it, and calls diverted from it went round.
func TestGroup_GetNeverReturnsABreakerBeingDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	old, err := gh.g.Get(cachedKey)
	require.NoError(t, err)

	gh.g.mu.Lock()
	_, dropped := old.drop(false)
	require.True(t, dropped)
	got := make(chan *Breaker)
	go func() {
		b, _ := gh.g.Get(builtKey)
		got <- b
	}()
	var early *Breaker
	select {
	case early = <-got:
	case <-time.After(100 * time.Millisecond):
		// Get is waiting for the drop to finish, as it should.
	}
	gh.g.forgetLocked(cachedKey, old)
	gh.g.mu.Unlock()
	if early == nil {
		early = <-got
	}
	assert.NotSame(t, old, early, "Get returned a dropped breaker")
	assert.Equal(t, []*Breaker{early}, reachable(gh.g, cachedKey))
}

// Range skips a breaker whose drop is under way, so ops.Snapshot, ops.Alerts
// and the metrics adapters never report it as one of the group's. The test
// holds the group's lock between the two steps of the drop, as a sweep does.
// Regression (4a1dbf9): Range reported a breaker a sweep had marked dropped.
func TestGroup_RangeSkipsABreakerBeingDropped(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	old, err := gh.g.Get(cachedKey)
	require.NoError(t, err)
	gh.g.mu.Lock()
	_, dropped := old.drop(false)
	require.True(t, dropped)
	seen := reachable(gh.g, cachedKey)
	gh.g.forgetLocked(cachedKey, old)
	gh.g.mu.Unlock()
	assert.Empty(t, seen)
}

// TestRace_GroupLookupsDropsAndDeliveries runs lookups with the constant
// key and with an equal built one, long and short calls, streams, Remove,
// idle sweeps, SetPolicies, Status over Range and subscribers coming and going, all
// at once. Run under -race. When everything has stopped, the key has one
// breaker, found by every lookup and by Range, and it is not dropped.
func TestRace_GroupLookupsDropsAndDeliveries(t *testing.T) {
	steps := 400
	if testing.Short() {
		steps = 100
	}
	gh := newGroupHarness(t, GroupConfig{IdleAfter: time.Second})
	g := gh.g
	ctx := context.Background()
	var wg sync.WaitGroup
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < steps; i++ {
				f(i)
			}
		}()
	}
	fail := func(i int) error {
		if i%3 == 0 {
			return errBoom
		}
		return nil
	}
	run(func(i int) { _ = g.Do(ctx, cachedKey, func(context.Context) error { return fail(i) }) })
	run(func(i int) { _ = g.Do(ctx, builtKey, func(context.Context) error { return fail(i) }) })
	run(func(i int) {
		b, err := g.Get(cachedKey)
		require.NoError(t, err)
		_, done, err := b.Allow(ctx)
		if err == nil {
			runtime.Gosched()
			done(fail(i))
		}
	})
	run(func(i int) {
		switch i % 4 {
		case 0:
			g.Remove(cachedKey)
		case 1:
			gh.clk.Add(time.Second)
			g.EvictIdle()
		case 2:
			_ = g.SetPolicies(GroupPolicy{Default: policy(func(p *Policy) { p.MinRequests = 5 + i%7 })})
		default: // what ops.Snapshot reads
			g.Range(func(_ string, b *Breaker) bool { _ = b.Status(); return true })
		}
	})
	run(func(int) {
		unsubscribe := g.Subscribe(func(b *Breaker, e Event) {
			assert.Equal(t, b.Name(), e.Name)
		})
		runtime.Gosched()
		unsubscribe()
	})
	wg.Wait()

	b1, err := g.Get(cachedKey)
	require.NoError(t, err)
	b2, err := g.Get(builtKey)
	require.NoError(t, err)
	assert.Same(t, b1, b2)
	assert.False(t, b1.dropped())
	assert.Equal(t, []*Breaker{b1}, reachable(g, cachedKey))
}

func TestGroup_LookupOfAnExistingKeyAllocatesNothing(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	const key = "inventory.GetStock"
	_, err := gh.g.Get(key)
	require.NoError(t, err)
	built := strings.Join([]string{"inventory", "GetStock"}, ".")
	for _, k := range []string{key, built} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, ok := gh.g.Lookup(k); !ok {
				t.Fatal("not found")
			}
		})
		assert.Zero(t, allocs, "Lookup(%q)", k)
	}
}

// stockOverride is a document whose only override misspells
// "inventory.GetStock".
const stockOverride = `{"overrides":{"inventory.GetStok":{"open_for":"45s","max_open_for":"3m"}}}`

func TestGroup_UnusedOverridesListsAKeyNoBreakerUses(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	gh.calls("inventory.GetStock", 1, nil)
	require.NoError(t, gh.g.LoadPolicies([]byte(stockOverride)), "an unused override is accepted")
	assert.Equal(t, []string{"inventory.GetStok"}, gh.g.UnusedOverrides())
	b, _ := gh.g.Lookup("inventory.GetStock")
	assert.Equal(t, DefaultPolicy().OpenFor, b.Policy().OpenFor, "the typo left the breaker on the default")

	// The breaker may come later: a call on the key uses the override.
	gh.calls("inventory.GetStok", 1, nil)
	assert.Nil(t, gh.g.UnusedOverrides())
	b, _ = gh.g.Lookup("inventory.GetStok")
	assert.Equal(t, 45*time.Second, b.Policy().OpenFor)
}

func TestGroup_UnusedOverridesAMethodOverrideCoversItsTargets(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{Policies: GroupPolicy{Overrides: map[string]Policy{
		"payment.Charge":          DefaultPolicy(),
		"payment.Refund@10.0.0.7": DefaultPolicy(),
		"payment.Refund@10.0.0.8": DefaultPolicy(),
	}}})
	assert.Equal(t, []string{"payment.Charge", "payment.Refund@10.0.0.7", "payment.Refund@10.0.0.8"},
		gh.g.UnusedOverrides(), "no breaker yet: every override is unused")
	gh.calls("payment.Charge@10.0.0.7", 1, nil)
	gh.calls("payment.Refund@10.0.0.7", 1, nil)
	// A method's breaker does not use an override of one of its targets.
	gh.calls("payment.Refund", 1, nil)
	assert.Equal(t, []string{"payment.Refund@10.0.0.8"}, gh.g.UnusedOverrides())
}

func TestGroup_UnusedOverridesSurviveADropAndAReload(t *testing.T) {
	gh := newGroupHarness(t, GroupConfig{})
	require.NoError(t, gh.g.LoadPolicies([]byte(`{"overrides":{"orders.Create":{},"orders.Cancel":{}}}`)))
	gh.calls("orders.Create", 1, nil)
	require.True(t, gh.g.Remove("orders.Create"))
	assert.Equal(t, []string{"orders.Cancel"}, gh.g.UnusedOverrides(), "a dropped breaker was used all the same")

	// A reload keeps the use of a key it keeps, and judges new keys
	// against the breakers the group holds.
	gh.calls("orders.Get", 1, nil)
	require.NoError(t, gh.g.LoadPolicies([]byte(`{"overrides":{"orders.Create":{},"orders.Get":{},"orders.List":{}}}`)))
	assert.Equal(t, []string{"orders.List"}, gh.g.UnusedOverrides())
	require.NoError(t, gh.g.SetPolicies(GroupPolicy{}))
	assert.Nil(t, gh.g.UnusedOverrides())
}

func TestGroup_SetPoliciesLogsEachUnusedOverrideAtWarn(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(l))
	gh.calls("inventory.GetStock", 1, nil)
	require.NoError(t, gh.g.LoadPolicies([]byte(
		`{"overrides":{"inventory.GetStok":{},"inventory.GetStock":{},"orders.Creat":{}}}`)))
	assert.Equal(t, "level=WARN msg=\"breaker override unused\" breaker.override=inventory.GetStok\n"+
		"level=WARN msg=\"breaker override unused\" breaker.override=orders.Creat\n", buf.String())

	buf.Reset()
	require.NoError(t, gh.g.LoadPolicies([]byte(`{"overrides":{"inventory.GetStock":{}}}`)))
	assert.Empty(t, buf.String(), "every override used: nothing to report")
}

// A service that loads its policies at start, before any breaker is
// made, is not told that every override is unused: the README's own
// document used to log a Warn for its override on every start. Once the
// group holds breakers, a reload reports an override none of them uses,
// and UnusedOverrides lists the unused keys for a look after traffic
// began.
func TestGroup_NoUnusedOverrideWarningBeforeAnyBreaker(t *testing.T) {
	var buf bytes.Buffer
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	doc := `{"default": {"error_ratio": 0.5}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`
	require.NoError(t, gh.g.LoadPolicies([]byte(doc)))
	assert.Empty(t, buf.String(), "no breaker yet: nothing to report")
	assert.Equal(t, []string{"payment.Charge"}, gh.g.UnusedOverrides())

	gh.calls("orders.Create", 1, nil)
	require.NoError(t, gh.g.LoadPolicies([]byte(doc)))
	assert.Contains(t, buf.String(), `level=WARN msg="breaker override unused" breaker.override=payment.Charge`)
	gh.calls("payment.Charge", 1, nil)
	assert.Empty(t, gh.g.UnusedOverrides())
}

// The logger may call back into the group: the records are written
// outside its lock.
func TestGroup_UnusedOverrideLoggerMayCallBack(t *testing.T) {
	var g *Group
	var seen []string
	h := &callbackHandler{f: func() { seen = g.UnusedOverrides() }}
	gh := newGroupHarness(t, GroupConfig{}, WithLogger(slog.New(h)))
	g = gh.g
	gh.calls("inventory.GetStock", 1, nil)
	require.NoError(t, g.LoadPolicies([]byte(stockOverride)))
	assert.Equal(t, []string{"inventory.GetStok"}, seen)
}

type callbackHandler struct{ f func() }

func (h *callbackHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *callbackHandler) Handle(context.Context, slog.Record) error {
	h.f()
	return nil
}
func (h *callbackHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *callbackHandler) WithGroup(string) slog.Handler      { return h }
