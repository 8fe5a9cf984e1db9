package testutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a testing.TB that records the failures a helper reports
// instead of failing the test. Its FailNow ends the goroutine, as
// testing's does.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.msgs = append(r.msgs, s)
	r.mu.Unlock()
}

func (r *recorder) Error(args ...any)                 { r.add(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fail()                             { r.add("Fail") }
func (r *recorder) FailNow()                          { runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs) > 0
}

// failures runs f with a recorder, on a goroutine of its own so that a
// FailNow ends f alone, and returns the failures f reported.
func failures(t *testing.T, f func(tb testing.TB)) []string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs
}

// requireFailure checks that f reported exactly one failure, containing
// each of want.
func requireFailure(t *testing.T, f func(tb testing.TB), want ...string) {
	t.Helper()
	got := failures(t, f)
	require.Len(t, got, 1, "failures: %q", got)
	for _, w := range want {
		assert.Contains(t, got[0], w)
	}
}

func TestNoLeaks_PassesWhenEverythingIsClosed(t *testing.T) {
	got := failures(t, func(tb testing.TB) {
		check := noLeaksWithin(tb, 50*time.Millisecond)
		done := make(chan struct{})
		go close(done)
		<-done
		f, err := os.Open(os.DevNull)
		require.NoError(tb, err)
		require.NoError(tb, f.Close())
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		require.NoError(tb, l.Close())
		check()
	})
	assert.Empty(t, got)
}

func TestNoLeaks_ReportsAGoroutineLeftRunning(t *testing.T) {
	stop := make(chan struct{})
	requireFailure(t, func(tb testing.TB) {
		check := noLeaksWithin(tb, 50*time.Millisecond)
		go func() { <-stop }()
		check()
	}, "found unexpected goroutines", "TestNoLeaks_ReportsAGoroutineLeftRunning")
	close(stop)
}

func TestNoLeaks_ReportsAFileLeftOpen(t *testing.T) {
	if OpenFDs(t) < 0 {
		t.Skip("no /proc/self/fd: descriptors are not counted here")
	}
	var leaked *os.File
	requireFailure(t, func(tb testing.TB) {
		check := noLeaksWithin(tb, 50*time.Millisecond)
		var err error
		leaked, err = os.Open(os.DevNull)
		require.NoError(tb, err)
		check()
	}, "file descriptors:", "before the experiment")
	require.NoError(t, leaked.Close())
}

func TestOpenFDs_CountsEachOpenFile(t *testing.T) {
	before := OpenFDs(t)
	if before < 0 {
		t.Skip("no /proc/self/fd")
	}
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	assert.Equal(t, before+1, OpenFDs(t))
	require.NoError(t, f.Close())
	assert.Equal(t, before, OpenFDs(t))
}

func TestRefusedAddr_NothingListens(t *testing.T) {
	addr := RefusedAddr(t)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	assert.Error(t, err, "something listens on %s", addr)
}

func TestJitterBounds(t *testing.T) {
	lo, hi := JitterBounds(200*time.Millisecond, 0.1)
	assert.Equal(t, 180*time.Millisecond, lo)
	assert.Equal(t, 220*time.Millisecond, hi)
	lo, hi = JitterBounds(time.Second, 0)
	assert.Equal(t, time.Second, lo)
	assert.Equal(t, time.Second, hi)
}

func TestPolicies_AreValid(t *testing.T) {
	for name, p := range map[string]breaker.Policy{
		"Policy": Policy(), "MetricsPolicy": MetricsPolicy(),
		"ChaosPolicy": ChaosPolicy(), "DelayPolicy": DelayPolicy(),
	} {
		assert.NoError(t, p.Validate(), name)
	}
	assert.NoError(t, CandidatePolicies(Payment).Validate())
}

// verdictOf reads a call through a breaker whose function returned err
// and whose Do returned got, as the transports' tests read a call: a
// refusal, or else what the function returned (errBoom a failure,
// errIgnored ignored).
func verdictOf(err, got error) Verdict {
	switch {
	case errors.Is(got, breaker.ErrOpen):
		return Refused
	case err == nil:
		return Succeeded
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	case err == errIgnored:
		return Ignored
	}
	return Failed
}

// errIgnored is a failure that is the caller's fault.
var errIgnored = breaker.Ignore(errors.New("bad request"))

// do makes one call through b that returns err, and notes it in tl.
func do(tl *Tally, b *breaker.Breaker, err error) Verdict {
	got := b.Do(context.Background(), func(context.Context) error { return err })
	return tl.Note(verdictOf(err, got), got)
}

func TestTally_CheckHoldsTheCallsAgainstTheBreaker(t *testing.T) {
	b, err := breaker.New("k", Policy(), breaker.WithClock(NewClock()))
	require.NoError(t, err)
	var tl Tally
	assert.Equal(t, Succeeded, do(&tl, b, nil))
	assert.Equal(t, Failed, do(&tl, b, errBoom))
	assert.Equal(t, TimedOut, do(&tl, b, context.DeadlineExceeded))
	assert.Equal(t, Ignored, do(&tl, b, errIgnored))
	assert.Equal(t, Calls{Made: 4, Succeeded: 1, Failed: 1, TimedOut: 1, Ignored: 1}, tl.Calls())
	assert.ErrorIs(t, tl.Last(), errIgnored)
	assert.Empty(t, failures(t, func(tb testing.TB) { tl.Check(tb, b) }))

	// A call the tally does not know of.
	_ = b.Do(context.Background(), func(context.Context) error { return nil })
	got := failures(t, func(tb testing.TB) { tl.Check(tb, b) })
	require.Len(t, got, 2, "outcomes and admitted calls differ: %q", got)
	assert.Contains(t, got[0], "calls made 4")
	assert.Contains(t, got[1], "admitted")
}

func TestOutcomesOf(t *testing.T) {
	b, err := breaker.New("k", Policy())
	require.NoError(t, err)
	require.NoError(t, b.Do(context.Background(), func(context.Context) error { return nil }))
	_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
	assert.Equal(t, Outcomes{Successes: 1, Failures: 1}, OutcomesOf(b))
}

func TestEvents_RecordsTheGroupsTransitionsInOrder(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	var ev Events
	defer m.Group.Subscribe(ev.Record)()
	m.Trip(Pricing)
	m.At(10 * time.Second)
	m.Calls(Pricing, 1, nil)
	var got []string
	for _, e := range ev.List() {
		got = append(got, e.From.String()+">"+e.To.String())
	}
	assert.Equal(t, []string{"closed>open", "open>half_open", "half_open>closed"}, got)
}

func TestLoad_CountsAndWaitsForHandlers(t *testing.T) {
	var l Load
	leave := l.Arrive(true)
	l.Arrive(false)()
	assert.Equal(t, int64(2), l.Hits())
	assert.Equal(t, int64(1), l.Probes())
	requireFailure(t, func(tb testing.TB) { l.WaitIdle(tb, 20*time.Millisecond) }, "1 handlers still running")
	leave()
	assert.Empty(t, failures(t, func(tb testing.TB) { l.WaitIdle(tb, time.Second) }))
}

func TestKillable_KilledAndStartedAgainOnTheSamePort(t *testing.T) {
	var k *Killable
	k = NewKillable(t, func() (func(net.Listener) error, func()) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer k.Arrive(false)()
			io.WriteString(w, "ok")
		}), ReadHeaderTimeout: time.Second}
		return srv.Serve, func() { _ = srv.Close() }
	})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() error {
		resp, err := client.Get("http://" + k.Addr() + "/")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	addr := k.Addr()
	require.NoError(t, get())
	k.Kill()
	client.CloseIdleConnections()
	assert.Error(t, get(), "served after the kill")
	k.Kill() // a second kill does nothing
	k.Start()
	assert.Equal(t, addr, k.Addr())
	require.NoError(t, get())
	assert.Equal(t, int64(2), k.Hits())
}

func TestOneAtATime_ServesOneOfTheRequestsInFlight(t *testing.T) {
	const n = 4
	o := NewOneAtATime(n, 10*time.Second)
	var wg sync.WaitGroup
	served := make(chan bool, n)
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, leave := o.Enter()
			defer leave()
			served <- ok
		}()
	}
	wg.Wait()
	close(served)
	count := 0
	for ok := range served {
		if ok {
			count++
		}
	}
	assert.Equal(t, 1, count, "served")
	assert.Less(t, time.Since(start), 5*time.Second, "waited for the guard although all had arrived")

	// The slot is free again once the served request has left; a lone
	// request waits for the guard, then is served.
	o = NewOneAtATime(2, time.Millisecond)
	ok, leave := o.Enter()
	assert.True(t, ok)
	leave()
	ok, leave = o.Enter()
	assert.True(t, ok)
	leave()
}

// chaosOn is an experiment on a group on the real clock whose calls run
// fn, with no server.
func chaosOn(t testing.TB, p breaker.Policy, key string, fn func() error) (*Chaos, *breaker.Breaker) {
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}})
	require.NoError(t, err)
	b, err := g.Get(key)
	require.NoError(t, err)
	var c *Chaos
	c = NewChaos(t, g, p, &Load{}, func() Verdict {
		var err error
		got := b.Do(context.Background(), func(context.Context) error { err = fn(); return err })
		return c.Note(verdictOf(err, got), got)
	})
	return c, b
}

func TestChaos_TripAfterChecksTheTrip(t *testing.T) {
	p := ChaosPolicy()
	c, b := chaosOn(t, p, "k", func() error { return errBoom })
	trip := c.TripAfter(Failed)
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, breaker.ReasonErrorRatio, trip.Reason)

	// A breaker that needs one call more than the experiment's policy
	// says is still closed when TripAfter looks.
	later := p
	later.MinRequests++
	got := failures(t, func(tb testing.TB) {
		c, _ := chaosOn(tb, later, "k", func() error { return errBoom })
		c.Policy = p
		c.TripAfter(Failed)
	})
	require.Len(t, got, 1, "%q", got)
	assert.Contains(t, got[0], fmt.Sprintf("not open after %d calls", p.MinRequests))
}

func TestChaos_UntilAdmittedGivesUpWithin(t *testing.T) {
	p := ChaosPolicy()
	p.OpenFor, p.MaxOpenFor = time.Hour, time.Hour
	c, _ := chaosOn(t, p, "k", func() error { return errBoom })
	c.TripAfter(Failed)
	start := time.Now()
	requireFailure(t, func(tb testing.TB) {
		c.T = tb
		c.UntilAdmitted(50 * time.Millisecond)
	}, "no call admitted within 50ms")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.NotZero(t, c.Calls().Refused)
}

func TestChaos_CallersUntilRefusedStopAtTheTrip(t *testing.T) {
	c, b := chaosOn(t, ChaosPolicy(), "k", func() error { return errBoom })
	c.CallersUntilRefused(3, 5*time.Second)
	assert.Equal(t, breaker.Open, b.State())
	n := c.Calls()
	assert.Equal(t, uint64(3), n.Refused, "each caller stops at its first refusal")
	c.Check(t, b)
}

func TestMockGroup_TellsTheStoryOnTheMockClock(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), m.T0)
	m.Trip(Pricing)
	m.Refused(Pricing, 1)
	m.At(10 * time.Second)
	m.Calls(Pricing, 1, nil)
	assert.Equal(t, breaker.Closed, m.Breaker(Pricing).State())
	m.SlowCall(Inventory, 3*time.Second)
	assert.Equal(t, m.T0.Add(13*time.Second), m.Clock.Now())
	assert.Equal(t, uint64(1), m.Breaker(Inventory).Counters().Slow)
}

func TestMockGroup_ReportsAStoryThatDoesNotHold(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	m.At(time.Minute)
	requireFailure(t, func(tb testing.TB) {
		m := *m
		m.t = tb
		m.At(time.Second)
	}, "at(1s) would move the clock back")
	requireFailure(t, func(tb testing.TB) {
		m := *m
		m.t = tb
		m.Refused(Pricing, 1)
	}, "call 1 of 1 to pricing.GetPrice was admitted")
	m.Trip(Payment)
	requireFailure(t, func(tb testing.TB) {
		m := *m
		m.t = tb
		m.Calls(Payment, 1, nil)
	}, "call 1 of 1 to payment.Charge was refused")
}

func TestMockGroup_PlayEveryCount(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	m.PlayEveryCount()
	assert.Equal(t, m.T0.Add(38*time.Second), m.Clock.Now())
	pricing := m.Breaker(Pricing).Counters()
	assert.Equal(t, breaker.Closed, m.Breaker(Pricing).State())
	assert.Equal(t, uint64(2), pricing.Opens)
	assert.Equal(t, uint64(3), pricing.Rejected)
	assert.Equal(t, breaker.Open, m.Breaker(Payment).State())
	assert.Equal(t, breaker.ModeShadow, m.Breaker(Payment).Mode())
	inv := m.Breaker(Inventory).Counters()
	assert.Equal(t, uint64(1), inv.Ignored)
	assert.Equal(t, uint64(1), inv.Slow)
}

func TestMockGroup_FollowSaysWhatBecameOfEachDocument(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	f, deliver := m.Follow()
	assert.Equal(t, live.Applied, deliver(live.Document{Origin: "test", Version: "1",
		Data: []byte(`{"default": {"min_requests": 10}}`)}))
	assert.Equal(t, live.Rejected, deliver(live.Document{Origin: "test", Version: "2",
		Data: []byte(`{"default": {"min_requests": -1}}`)}))
	assert.Equal(t, 10, m.Breaker(Pricing).Policy().MinRequests)
	assert.Equal(t, live.Reloads{Applied: 1, Rejected: 1}, f.Status().Reloads)
}

func TestMockGroup_HammerCountsTheTransitions(t *testing.T) {
	m := NewMockGroup(t, breaker.GroupConfig{})
	collected := 0
	seen := m.Hammer(func() { collected++ }, Inventory, Pricing)
	assert.Equal(t, 2*50*2, seen)
	assert.Equal(t, 20, collected)
}

func TestInsideAProbe_RunsFnAsAnotherBreakersProbe(t *testing.T) {
	clk := NewClock()
	start := clk.Now()
	probe := false
	err := InsideAProbe(t, clk, func(ctx context.Context) error {
		probe = breaker.IsProbe(ctx)
		return errBoom
	})
	assert.ErrorIs(t, err, errBoom)
	assert.True(t, probe)
	assert.Equal(t, start.Add(Policy().OpenFor), clk.Now())
}

func TestRunCommand_CapturesTheExitCodeAndOutput(t *testing.T) {
	run := func(args []string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, strings.Join(args, " "))
		fmt.Fprint(stderr, "cmd: bad\nusage: ...\n")
		return 2
	}
	code, stdout, stderr := RunCommand(t, run, "-a", "b")
	assert.Equal(t, 2, code)
	assert.Equal(t, "-a b\n", stdout)
	assert.Equal(t, "cmd: bad", FirstLine(stderr))
	assert.Equal(t, "one line", FirstLine("one line"))
}

func TestWriteFileAndGolden(t *testing.T) {
	path := WriteFile(t, "golden.txt", "want\n")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "want\n", string(data))

	assert.Empty(t, failures(t, func(tb testing.TB) { Golden(tb, path, "want\n", false) }))
	requireFailure(t, func(tb testing.TB) { Golden(tb, path, "got\n", false) }, "go test -update rewrites it")
	Golden(t, path, "got\n", true)
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "got\n", string(data))
	requireFailure(t, func(tb testing.TB) { Golden(tb, path+".missing", "x", false) }, "go test -update writes it")
}

// The harness (this package and the ones under it) imports testify,
// goleak and clock, and stays out of what users of the root module build
// only while nothing but tests imports it: every other package of the
// root module builds on the standard library and the module's own
// packages alone.
func TestOnlyTestsImportTheHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	const self = "github.com/govkit/breaker/internal/testutil"
	list := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command(goTool, append([]string{"list"}, args...)...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "GOWORK=off") // the root module alone
		out, err := cmd.Output()
		require.NoError(t, err, "go list %s", strings.Join(args, " "))
		return strings.Fields(string(out))
	}
	var roots []string
	harness := func(p string) bool { return p == self || strings.HasPrefix(p, self+"/") }
	for _, p := range list("./...") {
		if !harness(p) {
			roots = append(roots, p)
		}
	}
	require.Contains(t, roots, "github.com/govkit/breaker")
	var outside []string
	for _, p := range list(append([]string{"-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, roots...)...) {
		if harness(p) || !strings.HasPrefix(p, "github.com/govkit/breaker") {
			outside = append(outside, p)
		}
	}
	assert.Empty(t, outside, "packages of the root module build on these")
}

// A text logger writes records without their time, so that a test can
// compare them whole; the buffer returns what was written.
func TestTextLogger_WritesRecordsWithoutTheTime(t *testing.T) {
	var buf LogBuffer
	TextLogger(&buf).Info("breaker opened", "breaker.name", "payment.Charge")
	assert.Equal(t, "level=INFO msg=\"breaker opened\" breaker.name=payment.Charge\n", buf.String())
	DiscardLogger().Info("dropped")
}
