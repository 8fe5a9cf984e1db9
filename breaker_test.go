package breaker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The state machine as the design states it: closed → open on the error
// ratio behind the minimum-sample gate, timeouts counted as errors, a
// fixed three probes on real traffic, a doubling cooldown that decays, and
// the warmup exemption of a cold target.
//
// The tables here walk a breaker through the main paths of the state
// machine (docs/behaviour.md §4), one row per instant of a mock clock in
// the manner of golang.org/x/time/rate's tests: at the row's instant make
// the row's calls, then the breaker must show the row's state, answers,
// window, counters and transitions. Every table runs on newHarness: the
// default policy unless it says otherwise, and cooldowns without jitter,
// so the instants can be read off the policy (OpenFor 30s, MaxOpenFor 2m,
// MinRequests 20, ErrorRatio 0.5, 3 probes).

// instant is a named moment of a table: t0, the harness's start, plus d.
type instant struct {
	name string
	d    time.Duration
}

func (i instant) String() string { return fmt.Sprintf("%s (t0+%v)", i.name, i.d) }

// after names the instant d after i.
func (i instant) after(name string, d time.Duration) instant { return instant{name, i.d + d} }

// ret is what the function of a row's calls returns.
type ret int

const (
	callNone    ret = iota // no call: the row only reads the breaker
	callOK                 // nil: a success
	callFail               // errBoom: a failure; as a probe it passes, the downstream answered
	callTimeout            // context.DeadlineExceeded: a failure that is a timeout; it fails a probe
	callIgnored            // Ignore(errBoom): not the downstream's fault, not counted
)

func (r ret) err() error {
	switch r {
	case callFail:
		return errBoom
	case callTimeout:
		return context.DeadlineExceeded
	case callIgnored:
		return Ignore(errBoom)
	}
	return nil
}

func (r ret) String() string {
	return [...]string{"none", "ok", "fail", "timeout", "ignored"}[r]
}

// callRow is one row of a table. Every want is checked on every row,
// except snap and count, which are checked when set.
type callRow struct {
	at   instant
	call ret
	n    int // calls made, one after the other; 0 with callNone

	// err is ErrOpen if every call must be refused, nil if every call
	// must be admitted (Do then returns what the function did).
	err   error
	probe bool          // IsProbe(ctx) in every admitted call
	retry time.Duration // with err ErrOpen: the refusal's RetryAfter
	state State         // the state after the calls
	moves []string      // the transitions the row made, "from>to:reason"
	snap  *Snapshot     // the window after the calls
	count *Counters     // the counters after the calls
}

// runCallRows runs the rows in order on h and reports every difference,
// with the row's instant, as got/want.
func runCallRows(t *testing.T, h *harness, rows []callRow) {
	t.Helper()
	seen := len(h.transitions())
	for i, r := range rows {
		h.at(r.at.d)
		for c := 1; c <= r.n; c++ {
			admitted, probe := false, false
			err := h.b.Do(context.Background(), func(ctx context.Context) error {
				admitted, probe = true, IsProbe(ctx)
				return r.call.err()
			})
			switch {
			case r.err == nil && !admitted:
				t.Errorf("row %d at %v: call %d of %d (%v): refused with %v, want admitted", i, r.at, c, r.n, r.call, err)
			case r.err == nil && !errors.Is(err, r.call.err()):
				t.Errorf("row %d at %v: call %d of %d (%v): Do = %v, want %v", i, r.at, c, r.n, r.call, err, r.call.err())
			case r.err == nil && probe != r.probe:
				t.Errorf("row %d at %v: call %d of %d (%v): IsProbe = %v, want %v", i, r.at, c, r.n, r.call, probe, r.probe)
			case r.err != nil && admitted:
				t.Errorf("row %d at %v: call %d of %d (%v): admitted, want refused with %v", i, r.at, c, r.n, r.call, r.err)
			case r.err != nil && !errors.Is(err, r.err):
				t.Errorf("row %d at %v: call %d of %d (%v): Do = %v, want %v", i, r.at, c, r.n, r.call, err, r.err)
			case r.err != nil:
				var oe *OpenError
				if !errors.As(err, &oe) {
					t.Errorf("row %d at %v: call %d of %d: Do = %T, want an *OpenError", i, r.at, c, r.n, err)
				} else if got := oe.RetryAfter(); got != r.retry {
					t.Errorf("row %d at %v: call %d of %d: RetryAfter = %v, want %v", i, r.at, c, r.n, got, r.retry)
				}
			}
		}
		if got := h.b.State(); got != r.state {
			t.Errorf("row %d at %v: State = %v, want %v", i, r.at, got, r.state)
		}
		moves := h.transitions()[seen:]
		seen += len(moves)
		if !slices.Equal(moves, r.moves) {
			t.Errorf("row %d at %v: transitions %q, want %q", i, r.at, moves, r.moves)
		}
		if r.snap != nil {
			if got := h.b.Snapshot(); got != *r.snap {
				t.Errorf("row %d at %v: Snapshot = %+v, want %+v", i, r.at, got, *r.snap)
			}
		}
		if r.count != nil {
			if got := h.b.Counters(); got != *r.count {
				t.Errorf("row %d at %v: Counters = %+v, want %+v", i, r.at, got, *r.count)
			}
		}
	}
}

// behaviour.md §4 Closed: outcomes go into the window, and below
// MinRequests counted calls nothing trips, even at 100% failures. At
// MinRequests the ratio rule trips the breaker; refusals then stay out of
// the window.
func TestSteps_ClosedGatesAtMinRequestsThenTripsAtTheRatio(t *testing.T) {
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", time.Second)
	runCallRows(t, newHarness(t, DefaultPolicy()), []callRow{
		{at: t0, call: callIgnored, n: 5, state: Closed,
			snap:  &Snapshot{},
			count: &Counters{Admitted: 5, Ignored: 5}},
		{at: t0, call: callTimeout, n: 10, state: Closed,
			snap: &Snapshot{Counted: 10, Failures: 10, Timeouts: 10}},
		{at: t1, call: callFail, n: 9, state: Closed,
			snap: &Snapshot{Counted: 19, Failures: 19, Timeouts: 10}},
		{at: t1, call: callFail, n: 1, state: Open,
			moves: []string{"closed>open:error_ratio"},
			snap:  &Snapshot{Counted: 20, Failures: 20, Timeouts: 10}},
		{at: t1, call: callOK, n: 3, err: ErrOpen, retry: 30 * time.Second, state: Open,
			snap:  &Snapshot{Counted: 20, Failures: 20, Timeouts: 10},
			count: &Counters{Admitted: 25, Failures: 10, Timeouts: 10, Ignored: 5, Rejected: 3, Opens: 1}},
	})
}

// behaviour.md §4 Closed: the ratio rule holds at exactly ErrorRatio, not
// only above it; under the ratio the breaker stays closed whatever the
// count.
func TestSteps_ClosedTripsWithTheRatioExactlyAtErrorRatio(t *testing.T) {
	t0 := instant{"t0", 0}
	runCallRows(t, newHarness(t, DefaultPolicy()), []callRow{
		{at: t0, call: callOK, n: 11, state: Closed},
		{at: t0, call: callFail, n: 10, state: Closed, // 10/21 < 0.5
			snap: &Snapshot{Counted: 21, Failures: 10}},
		{at: t0, call: callFail, n: 1, state: Open, // 11/22 = 0.5
			moves: []string{"closed>open:error_ratio"},
			snap:  &Snapshot{Counted: 22, Failures: 11}},
	})
}

// behaviour.md §4 Open: every call is refused at once with ErrOpen,
// RetryAfter counting down to the end of the cooldown, and the refusals
// counted apart. When the cooldown has elapsed, a read of the state finds
// the breaker half-open.
func TestSteps_OpenRefusesUntilTheCooldownEndsThenHalfOpen(t *testing.T) {
	const cooldown = defaultOpenFor
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", 10*time.Second)
	t2 := t0.after("t2", cooldown-1)
	t3 := t0.after("t3", cooldown)
	h := newHarness(t, DefaultPolicy())
	runCallRows(t, h, []callRow{
		{at: t0, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
		{at: t0, call: callOK, n: 2, err: ErrOpen, retry: cooldown, state: Open,
			snap: &Snapshot{Counted: 20, Failures: 20}},
		{at: t1, call: callTimeout, n: 2, err: ErrOpen, retry: cooldown - 10*time.Second, state: Open,
			snap:  &Snapshot{}, // the trip's calls have left the 5s window, and no refusal came in
			count: &Counters{Admitted: 20, Failures: 20, Rejected: 4, Opens: 1, OpenTime: 10 * time.Second}},
		{at: t2, call: callOK, n: 1, err: ErrOpen, retry: 1, state: Open},
		{at: t3, call: callNone, state: HalfOpen, moves: []string{"open>half_open:cooldown_elapsed"}},
	})
}

// behaviour.md §4 Half-open: the next Probes calls are admitted as probes.
// A probe that succeeds, or fails in a way that shows the downstream
// answered, passes; an ignored one frees its slot with no verdict. When all
// have passed the breaker closes on an empty window and later calls are not
// probes.
func TestSteps_PassingProbesCloseTheBreaker(t *testing.T) {
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", defaultOpenFor)
	runCallRows(t, newHarness(t, DefaultPolicy()), []callRow{
		{at: t0, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
		{at: t1, call: callOK, n: 1, probe: true, state: HalfOpen,
			moves: []string{"open>half_open:cooldown_elapsed"}},
		{at: t1, call: callIgnored, n: 2, probe: true, state: HalfOpen},
		{at: t1, call: callFail, n: 1, probe: true, state: HalfOpen},
		{at: t1, call: callOK, n: 1, probe: true, state: Closed,
			moves: []string{"half_open>closed:probes_passed"},
			snap:  &Snapshot{},
			count: &Counters{Admitted: 25, Successes: 2, Failures: 21, Ignored: 2,
				ProbesPassed: 3, Opens: 1, OpenTime: defaultOpenFor}},
		{at: t1, call: callFail, n: 1, state: Closed,
			snap: &Snapshot{Counted: 1, Failures: 1}},
	})
}

// behaviour.md §4 Half-open and Cooldown: a probe that times out reopens
// the breaker at once and doubles the cooldown, up to MaxOpenFor. The
// doubled cooldown is the one the refusals report and the one the clock
// must run out.
func TestSteps_AFailedProbeReopensWithADoubledCooldown(t *testing.T) {
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", 30*time.Second)   // first cooldown over
	t2 := t1.after("t2", 60*time.Second-1) // a nanosecond short of the doubled one
	t3 := t1.after("t3", 60*time.Second)   // doubled cooldown over
	t4 := t3.after("t4", 2*time.Minute)    // the cooldown doubled again: 2m, MaxOpenFor
	t5 := t4.after("t5", 2*time.Minute)    // and stays at MaxOpenFor
	runCallRows(t, newHarness(t, DefaultPolicy()), []callRow{
		{at: t0, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
		{at: t1, call: callTimeout, n: 1, probe: true, state: Open,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>open:probe_failed"}},
		{at: t1, call: callOK, n: 1, err: ErrOpen, retry: 60 * time.Second, state: Open},
		{at: t2, call: callOK, n: 1, err: ErrOpen, retry: 1, state: Open},
		{at: t3, call: callTimeout, n: 1, probe: true, state: Open,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>open:probe_failed"}},
		{at: t3, call: callOK, n: 1, err: ErrOpen, retry: 2 * time.Minute, state: Open},
		{at: t4, call: callTimeout, n: 1, probe: true, state: Open,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>open:probe_failed"}},
		{at: t4, call: callOK, n: 1, err: ErrOpen, retry: 2 * time.Minute, state: Open},
		{at: t5, call: callOK, n: 3, probe: true, state: Closed,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"},
			count: &Counters{Admitted: 26, Successes: 3, Failures: 20, Timeouts: 3,
				Rejected: 4, ProbesPassed: 3, ProbesFailed: 3, Opens: 4, OpenTime: t5.d}},
	})
}

// behaviour.md §4 Cooldown: the doubling decays. A trip within MaxOpenFor
// of the last close continues it; once the breaker has stayed closed for
// MaxOpenFor, the next trip starts again from OpenFor.
func TestSteps_TheCooldownDecaysAfterMaxOpenForClosed(t *testing.T) {
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", 30*time.Second) // first cooldown over; the probe fails
	t2 := t1.after("t2", 60*time.Second) // doubled cooldown over; the probes pass
	flapping := t2.after("t3", defaultMaxOpenFor-1)
	stable := t2.after("t3", defaultMaxOpenFor)
	closeAfterAFailedProbe := []callRow{
		{at: t0, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
		{at: t1, call: callTimeout, n: 1, probe: true, state: Open,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>open:probe_failed"}},
		{at: t1, call: callOK, n: 1, err: ErrOpen, retry: 60 * time.Second, state: Open},
		{at: t2, call: callOK, n: 3, probe: true, state: Closed,
			moves: []string{"open>half_open:cooldown_elapsed", "half_open>closed:probes_passed"}},
	}
	t.Run("flapping", func(t *testing.T) {
		runCallRows(t, newHarness(t, DefaultPolicy()), append(slices.Clone(closeAfterAFailedProbe),
			callRow{at: flapping, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
			callRow{at: flapping, call: callOK, n: 1, err: ErrOpen, retry: 2 * time.Minute, state: Open},
		))
	})
	t.Run("stable", func(t *testing.T) {
		runCallRows(t, newHarness(t, DefaultPolicy()), append(slices.Clone(closeAfterAFailedProbe),
			callRow{at: stable, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"}},
			callRow{at: stable, call: callOK, n: 1, err: ErrOpen, retry: 30 * time.Second, state: Open},
		))
	})
}

// The whole round trip on the default policy, closed to open to half-open
// to closed, with the window's contents at the trip, the refusal, the
// cooldown to the nanosecond, the probes and the counters at the end.
func TestSteps_TripRefuseProbeClose(t *testing.T) {
	t0 := instant{"t0", 0}
	t1 := t0.after("t1", defaultOpenFor-1)
	t2 := t0.after("t2", defaultOpenFor)
	runCallRows(t, newHarness(t, DefaultPolicy()), []callRow{
		{at: t0, call: callOK, n: 10, state: Closed},
		{at: t0, call: callFail, n: 9, state: Closed,
			snap: &Snapshot{Counted: 19, Failures: 9}},
		{at: t0, call: callFail, n: 1, state: Open,
			moves: []string{"closed>open:error_ratio"},
			snap:  &Snapshot{Counted: 20, Failures: 10}},
		{at: t0, call: callOK, n: 1, err: ErrOpen, retry: defaultOpenFor, state: Open},
		{at: t1, call: callNone, state: Open},
		{at: t2, call: callNone, state: HalfOpen,
			moves: []string{"open>half_open:cooldown_elapsed"}},
		{at: t2, call: callOK, n: 3, probe: true, state: Closed,
			moves: []string{"half_open>closed:probes_passed"},
			snap:  &Snapshot{},
			count: &Counters{Admitted: 23, Successes: 13, Failures: 10, Rejected: 1,
				ProbesPassed: 3, Opens: 1, OpenTime: defaultOpenFor}},
	})
}

// behaviour.md §3: timeouts count. A downstream whose calls outlive
// CallTimeout, though they return nil, fails them: the window counts them
// as failures that are timeouts, and they trip the breaker at the ratio
// as errors do. A timed-out probe fails the episode.
func TestSteps_TimeoutsCountAsErrors(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.CallTimeout = 100 * time.Millisecond }))
	slow := func(ctx context.Context) error {
		h.add(150 * time.Millisecond) // answers, too late
		return nil
	}
	for range 10 {
		require.NoError(t, h.call(nil))
	}
	for range 9 {
		require.NoError(t, h.b.Do(context.Background(), slow))
	}
	require.Equal(t, Closed, h.b.State())
	require.NoError(t, h.b.Do(context.Background(), slow)) // 10 of 20: the ratio
	h.requireState(Open)
	assert.Equal(t, Snapshot{Counted: 20, Failures: 10, Timeouts: 10}, h.b.Status().Outage.Trip.Window)
	assert.Equal(t, ReasonErrorRatio, h.lastReason())

	h.add(h.b.Status().Cooldown)
	require.NoError(t, h.b.Do(context.Background(), slow)) // a probe that times out
	h.requireState(Open)
	assert.Equal(t, ReasonProbeFailed, h.lastReason())
}

// behaviour.md §4 Warmup: a cold target's outcomes stay out of the window
// for Warmup, so its cold start trips nothing; once warm, the same
// failures trip the breaker.
func TestSteps_AColdTargetIsExemptForItsWarmup(t *testing.T) {
	t0 := instant{"t0", 0}
	warm := t0.after("warm", time.Minute)
	h := newHarness(t, DefaultPolicy())
	h.b.MarkCold()
	runCallRows(t, h, []callRow{
		{at: t0, call: callFail, n: 40, state: Closed, snap: &Snapshot{}},
		{at: warm, call: callFail, n: 20, state: Open, moves: []string{"closed>open:error_ratio"},
			snap: &Snapshot{Counted: 20, Failures: 20}},
	})
	assert.Equal(t, uint64(40), h.b.Counters().Exempt)
}
