package breaker

// TestModel drives a real Breaker and a small reference model (refModel in
// model_ref_test.go) side by side through random sequences of calls, two-step
// calls reported late, out of order or never, clock steps (forward, backward,
// and to ±1 ns around every deadline the breaker keeps), policy and mode
// changes, resets and warmups, and compares everything observable after
// every step. rapid shrinks a failing sequence to a short one.
//
// By default it runs modelChecks sequences (a third of them under -race)
// of about modelSteps steps on a step clock, and one in mockShare more on
// *clock.Mock. To run it longer:
//
//	go test -run TestModel -rapid.checks=100000 -rapid.steps=200
//
// A failing run prints the shrunk sequence and saves it under
// testdata/rapid (ignored by git); -rapid.failfile replays it, with -run
// naming the subtest (TestModel/step or TestModel/mock).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

const (
	modelChecks = 2000
	modelSteps  = 60
)

// modelClock is a Clock the test can set.
type modelClock interface {
	Clock
	Set(time.Time)
}

// modelStepClock is the clock of the bulk of the sequences. *clock.Mock runs a
// share of them too (TestModel/mock), but its Set sleeps a millisecond to
// let timer goroutines run, which would cap the test at about a thousand
// clock steps a second. WithTimeout keeps Policy.CallTimeout deadlines off the
// real clock; the breaker decides timeouts from its own clock readings.
type modelStepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *modelStepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *modelStepClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *modelStepClock) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

type modelKind uint8

const (
	mkSuccess modelKind = iota
	mkFailure
	mkTimeout  // fn returns context.DeadlineExceeded
	mkIgnored  // fn returns Ignore(err)
	mkCanceled // the caller cancels its ctx, fn returns context.Canceled
	mkNetTimeout
	mkRefused       // a refused connection: nothing answered
	mkMarkedSuccess // Mark(err, Success)
	mkPanic         // last: two-step calls cannot panic
)

func (k modelKind) String() string {
	return [...]string{"success", "failure", "timeout", "ignored", "canceled", "net_timeout", "conn_refused", "marked_success", "panic"}[k]
}

type modelNetTimeout struct{}

func (modelNetTimeout) Error() string { return "i/o timeout" }
func (modelNetTimeout) Timeout() bool { return true }

func (k modelKind) err() error {
	switch k {
	case mkFailure:
		return errors.New("boom")
	case mkTimeout:
		return context.DeadlineExceeded
	case mkIgnored:
		return Ignore(errors.New("bad request"))
	case mkCanceled:
		return context.Canceled
	case mkNetTimeout:
		return fmt.Errorf("read: %w", modelNetTimeout{})
	case mkRefused:
		return fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	case mkMarkedSuccess:
		return Mark(errors.New("not found, as expected"), Success)
	}
	return nil
}

type modelPanic struct{}

type modelPending struct {
	rc     refCall
	done   func(error)
	cancel context.CancelFunc
}

type modelRun struct {
	clk     modelClock
	b       *Breaker
	m       *refModel
	pending []*modelPending
	nextID  int

	mu     sync.Mutex
	events []Event
}

func TestModel(t *testing.T) {
	checks := modelChecks
	if raceEnabled {
		// The race detector makes each sequence some ten times slower;
		// scripts/stress.sh runs thousands more under it.
		checks = modelChecks / 3
	}
	modelFlagDefault(t, "rapid.checks", checks)
	modelFlagDefault(t, "rapid.steps", modelSteps)
	t.Run("step", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { runModel(rt, &modelStepClock{}) })
	})
	t.Run("mock", func(t *testing.T) {
		// One sequence in mockShare, on *clock.Mock: its timers carry the
		// Policy.CallTimeout deadlines here.
		checks := flag.Lookup("rapid.checks")
		all := checks.Value.String()
		defer checks.Value.Set(all)
		n, _ := strconv.Atoi(all)
		checks.Value.Set(strconv.Itoa(max(1, n/mockShare)))
		rapid.Check(t, func(rt *rapid.T) { runModel(rt, clock.NewMock()) })
	})
}

const mockShare = 20

// modelFlagDefault gives a rapid flag this test's default unless the command
// line set it, and gives it back its value when t ends, so that the
// property tests that follow keep theirs.
func modelFlagDefault(t *testing.T, name string, v int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		f := flag.Lookup(name)
		old := f.Value.String()
		if err := f.Value.Set(fmt.Sprint(v)); err != nil {
			panic(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
}

func runModel(t *rapid.T, clk modelClock) {
	r := &modelRun{clk: clk}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 999).Draw(t, "base_ms")) * time.Millisecond)
	r.clk.Set(base)
	p := modelDrawPolicy(t, "policy")
	u := rapid.SampledFrom([]float64{0.5, 0, 0.25, 0.999, 1.5, math.NaN()}).Draw(t, "rand")
	cold := rapid.Bool().Draw(t, "start_cold")
	reenter := rapid.Bool().Draw(t, "reentrant_hook")
	opts := []Option{
		WithClock(r.clk),
		WithRand(func() float64 { return u }),
		OnTransition(func(e Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			if reenter {
				// A hook may call back into the breaker. At the instant
				// of a transition these reads change nothing: no
				// cooldown or probe timeout can end at once.
				_, _, _ = r.b.State(), r.b.Snapshot(), r.b.Counters()
			}
		}),
	}
	if rapid.Bool().Draw(t, "logger") {
		opts = append(opts, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	}
	b, err := New("orders.Create", p, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	if rapid.Bool().Draw(t, "spread") {
		// As a breaker that calls from several cores have collided on:
		// its counters are striped, and failures pass the stripes' gates
		// rather than the base's (gates.go). The sequence must
		// come out the same.
		b.win.Load().Spread() // later windows spread too (nextWindow)
	}
	if cold {
		// A new instance's breaker starts cold: MarkCold before the clock
		// moves, so the target is cold from the breaker's creation.
		b.MarkCold()
	}
	r.b = b
	r.m = newRefModel("orders.Create", base, p, u, cold)
	defer func() {
		for _, pc := range r.pending {
			pc.cancel()
		}
	}()

	t.Repeat(map[string]func(*rapid.T){
		"Do":        r.do,
		"Allow":     r.allow,
		"Report":    r.report,
		"DoCtxDone": r.doCtxDone,
		"Clock":     r.step,
		"SetPolicy": r.setPolicy,
		"SetMode":   r.setMode,
		"Reset": func(t *rapid.T) {
			r.b.Reset()
			r.m.Reset()
		},
		"MarkCold": func(t *rapid.T) {
			r.b.MarkCold()
			r.m.MarkCold()
		},
		"": r.check,
	})
}

func (r *modelRun) setClock(c time.Time) {
	r.clk.Set(c)
	r.m.clk = c
}

// drawInstance draws the instance-start mark of a call: none, or a start
// near the instant where the target stops being cold.
func (r *modelRun) drawInstance(t *rapid.T) *time.Time {
	if !rapid.Bool().Draw(t, "marked") {
		return nil
	}
	now := r.m.clk
	w := r.m.pol.Warmup
	var s time.Time
	switch rapid.IntRange(0, 3).Draw(t, "mark") {
	case 0:
		s = now.Add(-w).Add(time.Duration(rapid.IntRange(-1, 1).Draw(t, "ns")))
	case 1:
		s = now.Add(-time.Duration(rapid.Int64Range(0, int64(w)+int64(time.Second)).Draw(t, "age")))
	case 2:
		s = now.Add(time.Second)
	default:
		s = now.Add(-w - time.Second)
	}
	return &s
}

func (r *modelRun) callCtx(inst *time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	if inst != nil {
		return WithInstanceStart(ctx, *inst), cancel
	}
	return ctx, cancel
}

// drawRunTime draws how long a function runs: the clock moves forward by
// that much while it is in fn.
func (r *modelRun) drawRunTime(t *rapid.T) time.Duration {
	p := r.m.pol
	opts := []time.Duration{0, time.Millisecond}
	for _, d := range []time.Duration{p.CallTimeout, p.SlowCall} {
		if d > 0 {
			opts = append(opts, d-1, d, d+1)
		}
	}
	return rapid.SampledFrom(opts).Draw(t, "runtime")
}

func (r *modelRun) do(t *rapid.T) {
	kind := modelKind(rapid.IntRange(0, int(mkPanic)).Draw(t, "outcome"))
	inst := r.drawInstance(t)
	run := r.drawRunTime(t)
	viaCall := rapid.Bool().Draw(t, "via_call")
	ctx, cancel := r.callCtx(inst)
	defer cancel()

	r.nextID++
	rc, refusal := r.m.admit(r.nextID, r.m.read(), inst)
	called, probe := false, false
	var panicked any
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				panicked = p
			}
		}()
		fn := func(c context.Context) error {
			called, probe = true, IsProbe(c)
			if run > 0 {
				r.setClock(r.clk.Now().Add(run))
			}
			if kind == mkPanic {
				panic(modelPanic{})
			}
			if kind == mkCanceled {
				cancel()
			}
			return kind.err()
		}
		if viaCall {
			_, err := Call(ctx, r.b, func(c context.Context) (int, error) { return 1, fn(c) })
			return err
		}
		return r.b.Do(ctx, fn)
	}()
	if refusal != nil {
		if called {
			t.Fatalf("Do called fn; the model refuses it (%v)", refusal)
		}
		r.checkRefusal(t, err, refusal)
		return
	}
	if !called {
		t.Fatalf("Do refused the call (%v); the model admits it as %s", err, modelRoleName(rc.role))
	}
	if probe != (rc.role == refProbe) {
		t.Fatalf("IsProbe(ctx) = %v; the model's role is %s", probe, modelRoleName(rc.role))
	}
	if kind == mkPanic {
		if _, ok := panicked.(modelPanic); !ok {
			t.Fatalf("Do did not re-raise fn's panic: recovered %v, returned %v", panicked, err)
		}
		r.m.abandon(rc)
		return
	}
	if panicked != nil {
		t.Fatalf("Do panicked: %v", panicked)
	}
	if want := kind.err(); (want == nil) != (err == nil) || (want != nil && err.Error() != want.Error()) {
		t.Fatalf("Do returned %v, fn returned %v", err, want)
	}
	r.m.finishDo(rc, kind)
}

func modelRoleName(role uint8) string {
	switch role {
	case refCounted:
		return "counted"
	case refProbe:
		return "probe"
	case refShadow:
		return "shadow"
	}
	return "refused"
}

func (r *modelRun) allow(t *rapid.T) {
	inst := r.drawInstance(t)
	ctx, cancel := r.callCtx(inst)
	r.nextID++
	rc, refusal := r.m.admit(r.nextID, r.m.read(), inst)
	call, done, err := r.b.Allow(ctx)
	if refusal != nil {
		cancel()
		if done != nil {
			t.Fatalf("Allow admitted the call; the model refuses it (%v)", refusal)
		}
		r.checkRefusal(t, err, refusal)
		return
	}
	if err != nil || done == nil {
		cancel()
		t.Fatalf("Allow refused the call (%v); the model admits it as %s", err, modelRoleName(rc.role))
	}
	if IsProbe(call) != (rc.role == refProbe) {
		cancel()
		t.Fatalf("IsProbe(ctx) = %v; the model's role is %s", IsProbe(call), modelRoleName(rc.role))
	}
	t.Logf("permit #%d admitted as %s", rc.id, modelRoleName(rc.role))
	r.pending = append(r.pending, &modelPending{rc: rc, done: done, cancel: cancel})
}

func (r *modelRun) report(t *rapid.T) {
	if len(r.pending) == 0 {
		t.Skip("no pending permit")
	}
	i := rapid.IntRange(0, len(r.pending)-1).Draw(t, "permit")
	kind := modelKind(rapid.IntRange(0, int(mkPanic)-1).Draw(t, "outcome"))
	pc := r.pending[i]
	r.pending = append(r.pending[:i], r.pending[i+1:]...)
	t.Logf("permit #%d reports %s", pc.rc.id, kind)
	if kind == mkCanceled {
		pc.cancel()
	}
	pc.done(kind.err())
	r.m.finish(pc.rc, kind)
	if rapid.Bool().Draw(t, "report_twice") {
		pc.done(errors.New("second report")) // must do nothing
	}
	pc.cancel()
}

func (r *modelRun) doCtxDone(t *rapid.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := r.b.Do(ctx, func(context.Context) error { called = true; return nil })
	if called || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a done ctx: called fn %v, returned %v; want no call and context.Canceled", called, err)
	}
	if _, done, err := r.b.Allow(ctx); done != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with a done ctx: returned done %v, %v; want nil and context.Canceled", done != nil, err)
	}
}

// step moves the clock: by a random amount, or to an instant the breaker
// cares about, ±1 ns.
func (r *modelRun) step(t *rapid.T) {
	m := r.m
	now := m.now
	var targets []int64
	width := int64(m.pol.Window) / int64(m.pol.Buckets)
	targets = append(targets, (refFloorDiv(now, width)+1)*width, (refFloorDiv(now, width)+int64(m.pol.Buckets))*width)
	if m.state == Open && m.mode != ModeForcedOpen {
		targets = append(targets, m.openUntil)
	}
	if m.warmUntil != refNever {
		targets = append(targets, m.warmUntil)
	}
	if m.out.active && m.closedAt != refNever {
		targets = append(targets, m.closedAt+int64(m.pol.MaxOpenFor))
	}
	if d, ok := m.probeDeadline(); ok {
		targets = append(targets, d)
	}
	for _, pc := range r.pending {
		for _, d := range []time.Duration{pc.rc.pol.CallTimeout, pc.rc.pol.SlowCall} {
			if d > 0 {
				targets = append(targets, pc.rc.start+int64(d))
			}
		}
	}
	var c time.Time
	kind := rapid.SampledFrom([]string{"forward", "target", "far", "back"}).Draw(t, "step")
	switch kind {
	case "forward":
		d := rapid.Int64Range(1, 3000).Draw(t, "ms")
		c = r.clk.Now().Add(time.Duration(d) * time.Millisecond)
	case "far":
		d := rapid.Int64Range(1, 600).Draw(t, "s")
		c = r.clk.Now().Add(time.Duration(d) * time.Second)
	case "back":
		d := time.Duration(rapid.Int64Range(0, 10000).Draw(t, "ms_back")) * time.Millisecond
		c = r.clk.Now().Add(-max(d, 1))
	default:
		target := rapid.SampledFrom(targets).Draw(t, "target") + int64(rapid.IntRange(-1, 1).Draw(t, "ns"))
		if target <= now {
			t.Skip("target passed")
		}
		c = m.clockFor(target)
	}
	t.Logf("clock %+v (internal %v)", c.Sub(m.base), time.Duration(now))
	r.setClock(c)
	if kind == "back" {
		// The breaker must read the clock (the check does) before it
		// moves again: whether a step back is a pause depends on whether
		// the breaker saw the earlier reading, and not every admission
		// reads the clock.
		return
	}
	// A call right after the step, before the check reads the state,
	// makes the lazy transitions happen on admission instead.
	switch rapid.SampledFrom([]string{"none", "Do", "Allow"}).Draw(t, "then") {
	case "Do":
		r.do(t)
	case "Allow":
		r.allow(t)
	}
}

func (r *modelRun) setPolicy(t *rapid.T) {
	p := modelDrawPolicy(t, "new_policy")
	if rapid.IntRange(0, 4).Draw(t, "invalid") == 0 {
		p = modelBreakPolicy(t, p)
		if err := r.b.SetPolicy(p); err == nil {
			t.Fatalf("SetPolicy(%+v) accepted an invalid policy", p)
		} else if _, ok := err.(*PolicyError); !ok {
			t.Fatalf("SetPolicy: error %T, want *PolicyError", err)
		}
		return
	}
	if err := r.b.SetPolicy(p); err != nil {
		t.Fatalf("SetPolicy(%+v): %v", p, err)
	}
	r.m.SetPolicy(p)
}

func (r *modelRun) setMode(t *rapid.T) {
	mode := rapid.SampledFrom([]Mode{ModeAuto, ModeShadow, ModeForcedOpen, ModeForcedClosed, 4, 255}).Draw(t, "mode")
	err := r.b.SetMode(mode)
	if mode > ModeForcedClosed {
		if err == nil {
			t.Fatalf("SetMode(%d) accepted an unknown mode", mode)
		}
		return
	}
	if err != nil {
		t.Fatalf("SetMode(%v): %v", mode, err)
	}
	r.m.SetMode(mode)
}

// modelDrawPolicy draws a small valid policy.
func modelDrawPolicy(t *rapid.T, label string) Policy {
	p := Policy{
		Window:      time.Duration(rapid.IntRange(1, 10).Draw(t, label+".window_s")) * time.Second,
		Buckets:     rapid.SampledFrom([]int{1, 2, 4, 5, 8, 10}).Draw(t, label+".buckets"),
		MinRequests: rapid.IntRange(1, 10).Draw(t, label+".min_requests"),
		ErrorRatio:  rapid.SampledFrom([]float64{0.5, 0.25, 1, 0.1, 0.75, 0}).Draw(t, label+".error_ratio"),
		Probes:      rapid.IntRange(1, 4).Draw(t, label+".probes"),
		OpenFor:     time.Duration(rapid.IntRange(1, 20).Draw(t, label+".open_for_s")) * time.Second,
		Jitter:      rapid.SampledFrom([]float64{0, 0.2, 0.5}).Draw(t, label+".jitter"),
		Warmup:      rapid.SampledFrom([]time.Duration{0, 5 * time.Second, time.Second, 60 * time.Second}).Draw(t, label+".warmup"),
	}
	p.MaxOpenFor = p.OpenFor * time.Duration(rapid.SampledFrom([]int{4, 1, 2, 3, 8}).Draw(t, label+".max_open_for_x"))
	if rapid.Bool().Draw(t, label+".throttle") {
		p.Throttle = Throttle{
			Enabled:     rapid.IntRange(0, 3).Draw(t, label+".throttle.enabled") > 0,
			K:           rapid.SampledFrom([]float64{2, 1, 1.5, 3, 10}).Draw(t, label+".throttle.k"),
			MinRequests: rapid.IntRange(1, 12).Draw(t, label+".throttle.min_requests"),
		}
	}
	if rapid.Bool().Draw(t, label+".extra_rules") {
		p.ConsecutiveFailures = rapid.IntRange(0, 5).Draw(t, label+".consecutive")
		p.ErrorCount = rapid.IntRange(0, 6).Draw(t, label+".error_count")
		p.StrictProbes = rapid.Bool().Draw(t, label+".strict")
		p.CallTimeout = rapid.SampledFrom([]time.Duration{0, 200 * time.Millisecond, time.Second}).Draw(t, label+".timeout")
		p.SlowCall = rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond}).Draw(t, label+".slow_call")
		if p.SlowCall > 0 {
			p.SlowRatio = rapid.SampledFrom([]float64{0.5, 0.2, 1}).Draw(t, label+".slow_ratio")
		}
	}
	if p.ErrorRatio == 0 && p.ErrorCount == 0 && p.ConsecutiveFailures == 0 && p.SlowCall == 0 && !p.Throttle.Enabled {
		// ErrorRatio 0 turns the ratio rule off, which is valid only
		// beside another rule or a throttle.
		p.ErrorRatio = 0.5
	}
	return p
}

// modelBreakPolicy makes p invalid in one drawn way.
func modelBreakPolicy(t *rapid.T, p Policy) Policy {
	switch rapid.IntRange(0, 18).Draw(t, "break") {
	case 0:
		p.Window = 0
	case 1:
		p.Window = -time.Second
	case 2:
		p.Buckets = 0
	case 3:
		p.Window, p.Buckets = time.Second, 3 // 333.3 ms buckets
	case 4:
		p.MinRequests = -1
	case 5:
		p.ErrorRatio = 1.5
	case 6:
		p.ErrorRatio = math.NaN()
	case 7:
		p.MaxOpenFor = p.OpenFor - 1
	case 8:
		p.OpenFor = 0
	case 9:
		p.Jitter = 1
	case 10:
		p.Probes = 0
	case 11:
		p.Probes = maxProbes + 1
	case 12:
		p.Warmup = -1
	case 13:
		p.SlowCall, p.SlowRatio = 0, 0.5
	case 14:
		p.AdaptiveTimeout.Enabled, p.AdaptiveTimeout.Max = true, 0 // no bound
	case 15:
		// Under factor 1 the deadline would cut more than 1-q of the calls
		// and stop adapting.
		p.AdaptiveTimeout.Enabled, p.AdaptiveTimeout.Max = true, time.Second
		p.AdaptiveTimeout.Quantile, p.AdaptiveTimeout.Factor = 0.99, 0.5
	case 16:
		p.Throttle = Throttle{Enabled: true, K: 0.5, MinRequests: 5} // throttles a healthy downstream
	case 17:
		p.Throttle = Throttle{Enabled: true, K: 2, MinRequests: 0}
	default:
		// No trip rule, and no throttle either.
		p.ErrorRatio, p.ErrorCount, p.ConsecutiveFailures, p.SlowCall, p.SlowRatio = 0, 0, 0, 0, 0
		p.Throttle.Enabled = false
	}
	return p
}

func (r *modelRun) checkRefusal(t *rapid.T, err error, want *OpenError) {
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) {
		t.Fatalf("refusal: got %v (%T), want an *OpenError matching ErrOpen", err, err)
	}
	if msg := oe.Error(); !strings.HasPrefix(msg, "breaker: "+want.Name+" is ") {
		t.Fatalf("refusal message %q", msg)
	}
	if oe.Name != want.Name || oe.State != want.State || oe.Reason != want.Reason || oe.Trip != want.Trip ||
		oe.Cooldown != want.Cooldown ||
		!oe.Since.Equal(want.Since) || !oe.Until.Equal(want.Until) || oe.Until.IsZero() != want.Until.IsZero() {
		t.Fatalf("refusal:\n got %s\nwant %s", modelFmtOpenErr(r.m, oe), modelFmtOpenErr(r.m, want))
	}
	if g, w := oe.RetryAfter(), r.m.RetryAfter(want); g != w {
		t.Fatalf("RetryAfter = %v, want %v", g, w)
	}
}

func modelFmtOpenErr(m *refModel, e *OpenError) string {
	until := "-"
	if !e.Until.IsZero() {
		until = e.Until.Sub(m.base).String()
	}
	return fmt.Sprintf("{%s %s %s trip=%+v since=%v until=%s cooldown=%v}", e.Name, e.State, e.Reason, e.Trip, e.Since.Sub(m.base), until, e.Cooldown)
}

func modelFmtEvent(m *refModel, e Event) string {
	return fmt.Sprintf("{%s %s->%s %s t=%v snap=%+v cooldown=%v doublings=%d mode=%s outage=%s}",
		e.Name, e.From, e.To, e.Reason, e.Time.Sub(m.base), e.Snapshot, e.Cooldown, e.Doublings, e.Mode, modelFmtOutage(m, e.Outage))
}

func modelFmtOutage(m *refModel, o *Outage) string {
	if o == nil {
		return "none"
	}
	return fmt.Sprintf("{since=%v for=%v trip=%+v trips=%d reopens=%d refused=%d probes=%d/%d/%d closed=%v settles=%v}",
		o.Since.Sub(m.base), o.Duration, o.Trip, o.Trips, o.Reopens, o.Refused, o.ProbesPassed, o.ProbesFailed,
		o.ProbesPassedOnError, o.ClosedAt, o.SettlesAt)
}

// check compares everything observable. State comes first: like the
// breaker's, the model's State makes the lazy transitions.
func (r *modelRun) check(t *rapid.T) {
	m := r.m
	if g, w := r.b.State(), m.State(); g != w {
		t.Fatalf("State() = %v, want %v", g, w)
	}
	if g, w := r.b.Policy(), m.pol; !reflect.DeepEqual(g, w) {
		t.Fatalf("Policy() = %+v, want %+v", g, w)
	}
	if g, w := r.b.Mode(), m.mode; g != w {
		t.Fatalf("Mode() = %v, want %v", g, w)
	}
	gs, ws := r.b.Snapshot(), m.Snapshot()
	if gs != ws {
		t.Fatalf("Snapshot() = %+v, want %+v", gs, ws)
	}
	if !(gs.Timeouts <= gs.Failures && gs.Failures <= gs.Counted && gs.Slow <= gs.Counted) {
		t.Fatalf("inconsistent Snapshot() %+v", gs)
	}
	if g, w := r.b.Status().ThrottleProbability, m.ThrottleProbability(); g != w {
		t.Fatalf("Status().ThrottleProbability = %v, want %v", g, w)
	}
	gc, wc := r.b.Counters(), m.Counters()
	if gc != wc {
		t.Fatalf("Counters():\n got %+v\nwant %+v", gc, wc)
	}
	if gc.Admitted != gc.Successes+gc.Failures+gc.Timeouts+gc.Ignored {
		t.Fatalf("inconsistent Counters() %+v", gc)
	}
	if g, w := r.b.Status().Outage, m.outage(m.read()); !reflect.DeepEqual(g, w) {
		t.Fatalf("Status().Outage = %s, want %s", modelFmtOutage(m, g), modelFmtOutage(m, w))
	}
	r.mu.Lock()
	got := append([]Event(nil), r.events...)
	r.mu.Unlock()
	for _, e := range got {
		if !slices.Contains(PossibleTransitions(), TransitionCount{From: e.From, To: e.To, Reason: e.Reason}) &&
			e.Reason != ReasonTimeoutAdapted {
			t.Fatalf("transition %s → %s (%s) is not in PossibleTransitions", e.From, e.To, e.Reason)
		}
	}
	for i := 0; i < len(got) || i < len(m.events); i++ {
		switch {
		case i >= len(got):
			t.Fatalf("event %d missing: want %s", i, modelFmtEvent(m, m.events[i]))
		case i >= len(m.events):
			t.Fatalf("event %d unexpected: got %s", i, modelFmtEvent(m, got[i]))
		case !reflect.DeepEqual(got[i], m.events[i]):
			t.Fatalf("event %d:\n got %s\nwant %s", i, modelFmtEvent(m, got[i]), modelFmtEvent(m, m.events[i]))
		}
	}
}
