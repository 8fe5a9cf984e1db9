package breaker

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRace_Hammer runs many goroutines through many cycles of every state
// while a driver moves the mock clock and flips the downstream between
// healthy and failing, and occasionally changes mode or resets. Run under
// -race. It checks the invariants that no interleaving may break:
//   - no half-open episode has more than Policy.Probes probes in flight,
//     nor admits more than Policy.Probes probes besides those whose slot an
//     ignored outcome gave back;
//   - every admitted call is counted exactly once, in its outcome, and
//     every refusal in Rejected: nothing is lost or counted twice.
//
// The suite drives 300 clock steps, some fifteen open and half-open
// episodes; BREAKER_LONG=1 drives 1,000.
func TestRace_Hammer(t *testing.T) {
	const workers = 8
	steps := 300
	if long {
		steps = 1000
	}
	clk := clock.NewMock()
	p := policy(func(p *Policy) {
		p.Window = time.Second
		p.MinRequests = 10
		p.OpenFor = 300 * time.Millisecond
		p.MaxOpenFor = 600 * time.Millisecond
		p.Probes = 3
	})
	var opens atomic.Int64
	var halfOpens atomic.Int64
	b, err := New("hammer", p, WithClock(clk), OnTransition(func(e Event) {
		switch e.To {
		case Open:
			opens.Add(1)
		case HalfOpen:
			halfOpens.Add(1)
		}
	}))
	require.NoError(t, err)

	var failing atomic.Bool
	var stop atomic.Bool
	var mu sync.Mutex
	type episode struct{ admitted, released, inFlight, maxInFlight int }
	probesPerEpisode := map[uint64]*episode{}
	var made struct{ ok, fail, timeout, ignored, refused atomic.Uint64 }

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for !stop.Load() {
				draw := rng.IntN(100)
				err := b.Do(context.Background(), func(ctx context.Context) error {
					if m, ok := ctx.Value(probeKey{}).(*probeMark); ok && m != nil {
						mu.Lock()
						e := probesPerEpisode[m.gen]
						if e == nil {
							e = &episode{}
							probesPerEpisode[m.gen] = e
						}
						e.admitted++
						e.inFlight++
						e.maxInFlight = max(e.maxInFlight, e.inFlight)
						if draw < 5 {
							e.released++ // an ignored probe frees its slot
						}
						mu.Unlock()
						defer func() {
							mu.Lock()
							e.inFlight--
							mu.Unlock()
						}()
					}
					switch {
					case draw < 5:
						made.ignored.Add(1)
						return Ignore(errBoom)
					case failing.Load() && draw < 60:
						made.timeout.Add(1)
						return context.DeadlineExceeded
					case failing.Load() && draw < 80:
						made.fail.Add(1)
						return errBoom
					default:
						made.ok.Add(1)
						return nil
					}
				})
				if errors.Is(err, ErrOpen) {
					made.refused.Add(1)
				}
			}
		}(uint64(w))
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < steps; i++ {
		clk.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
		if i%40 == 0 {
			failing.Store(!failing.Load())
		}
		switch rng.IntN(200) {
		case 0:
			b.Reset()
		case 1:
			_ = b.SetMode(ModeShadow)
		case 2, 3:
			_ = b.SetMode(ModeAuto)
		case 4:
			_ = b.SetPolicy(p)
		}
	}
	stop.Store(true)
	wg.Wait()

	for gen, e := range probesPerEpisode {
		require.LessOrEqual(t, e.maxInFlight, p.Probes, "half-open episode %d had %d probes in flight", gen, e.maxInFlight)
		require.LessOrEqual(t, e.admitted-e.released, p.Probes, "half-open episode %d: %+v", gen, *e)
	}
	c := b.Counters()
	assert.Equal(t, made.ok.Load(), c.Successes, "successes")
	assert.Equal(t, made.fail.Load(), c.Failures, "failures")
	assert.Equal(t, made.timeout.Load(), c.Timeouts, "timeouts")
	assert.Equal(t, made.ignored.Load(), c.Ignored, "ignored")
	assert.Equal(t, made.refused.Load(), c.Rejected, "refusals")
	assert.Equal(t, made.ok.Load()+made.fail.Load()+made.timeout.Load()+made.ignored.Load(), c.Admitted)
	// Some five steps in a hundred end in a trip (16 in 300 steps).
	assert.Greater(t, opens.Load(), int64(steps/30), "the hammer must cycle through open many times")
	assert.Greater(t, halfOpens.Load(), int64(steps/30), "and through half-open")
	assert.NotEmpty(t, probesPerEpisode)
	t.Logf("%d steps: opens=%d half-opens=%d episodes with probes=%d counters=%+v", steps, opens.Load(), halfOpens.Load(), len(probesPerEpisode), c)
}

// TestRace_ClosedCountsAreExact hammers a breaker that stays closed and
// checks the window against the calls made.
func TestRace_ClosedCountsAreExact(t *testing.T) {
	clk := clock.NewMock()
	b, err := New("closed", policy(func(p *Policy) { p.Window = time.Hour; p.Buckets = 60 }), WithClock(clk))
	require.NoError(t, err)
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := error(nil)
				if i%10 == 0 {
					err = errBoom // 10%: never trips
				}
				_ = b.Do(context.Background(), func(context.Context) error { return err })
				if w == 0 && i%100 == 0 {
					clk.Add(time.Second) // bucket changes race with the writes
				}
			}
		}(w)
	}
	wg.Wait()
	require.Equal(t, Closed, b.State())
	assert.Equal(t, Snapshot{Counted: workers * each, Failures: workers * each / 10}, b.Snapshot())
}

// TestRace_ResultsFromBeforeARestartStayOutOfTheNewWindow restarts the
// window over and over (Reset, or SetPolicy with another Window) while
// calls of the round before are returning, and checks, after each restart,
// that the window holds no result of a call admitted before it. The
// calls run in the background: each is admitted in one round and returns,
// failing or timing out, when the next restart begins, so that its result
// races with the restart; one that cannot tell whether it was admitted
// before or after a restart is ignored. The driver then makes the round's
// calls, which all succeed: a failure in the window is a result of an
// earlier generation. At the end, the counters hold every result exactly
// once. The suite runs 1,000 rounds; BREAKER_LONG=1 runs 5,000.
func TestRace_ResultsFromBeforeARestartStayOutOfTheNewWindow(t *testing.T) {
	const workers, perRound = 16, 8
	rounds := 1000
	switch {
	case long:
		rounds = 5000
	case testing.Short():
		rounds = 500
	}
	// More threads than cores, so that the system's scheduler interrupts
	// them at any instruction, between a check and an add among them.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))
	clk := clock.NewMock()
	p := policy(func(p *Policy) { p.MinRequests = 1 << 30 }) // never trips
	other := p
	other.Window = 2 * p.Window
	b, err := New("restarts", p, WithClock(clk))
	require.NoError(t, err)

	type roundInfo struct {
		k        uint64
		admitted atomic.Int64  // calls that know they are of this round
		ended    chan struct{} // closed when the next restart begins
		left     chan struct{} // a token from each of those whose function returned
		next     chan struct{} // closed when the next round begins
	}
	newRound := func(k uint64) *roundInfo {
		return &roundInfo{k: k, ended: make(chan struct{}), left: make(chan struct{}, workers), next: make(chan struct{})}
	}
	var cur atomic.Pointer[roundInfo]
	cur.Store(newRound(0))
	var started atomic.Uint64 // the round whose restart has begun
	var made struct{ ok, fail, timeout, ignored atomic.Uint64 }
	errUnsure := Ignore(errors.New("admitted around a restart"))
	count := func(err error) {
		switch {
		case err == nil:
			made.ok.Add(1)
		case errors.Is(err, context.DeadlineExceeded):
			made.timeout.Add(1)
		case errors.Is(err, errBoom):
			made.fail.Add(1)
		default:
			made.ignored.Add(1)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !stop.Load() {
				r := cur.Load()
				unsure := false
				count(b.Do(context.Background(), func(context.Context) error {
					if started.Load() != r.k {
						unsure = true
						return errUnsure // admitted before or after a restart
					}
					r.admitted.Add(1)
					<-r.ended
					defer func() { r.left <- struct{}{} }()
					if w%2 == 0 {
						return context.DeadlineExceeded
					}
					return errBoom
				}))
				if unsure {
					<-r.next
				}
			}
		}(w)
	}
	finish := func() {
		stop.Store(true)
		r := cur.Load()
		close(r.ended)
		close(r.next)
		wg.Wait()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := uint64(1); k <= uint64(rounds); k++ {
		// A new bucket: the first late result moves the old window on
		// before its add, a stretch of work between its check and its add.
		clk.Add(time.Second)
		started.Store(k)
		last := cur.Load()
		close(last.ended)
		// Restart while the last round's results are being recorded:
		// after the functions of a random share of its calls returned.
		for n := rng.Int64N(last.admitted.Load() + 1); n > 0; n-- {
			<-last.left
		}
		if k%3 == 0 {
			require.NoError(t, b.SetPolicy(other))
			other, p = p, other
		} else {
			b.Reset()
		}
		cur.Store(newRound(k))
		close(last.next)
		for i := 0; i < perRound; i++ {
			count(b.Do(context.Background(), func(context.Context) error { return nil }))
			if s := b.Snapshot(); s.Failures != 0 {
				finish()
				t.Fatalf("round %d: the window holds %+v, failures of calls admitted before the restart", k, s)
			}
		}
	}
	finish()
	c := b.Counters()
	assert.Equal(t, made.ok.Load(), c.Successes, "successes")
	assert.Equal(t, made.fail.Load(), c.Failures, "failures")
	assert.Equal(t, made.timeout.Load(), c.Timeouts, "timeouts")
	assert.Equal(t, made.ignored.Load(), c.Ignored, "ignored")
	assert.NotZero(t, made.fail.Load()+made.timeout.Load(), "no call outlived its round: the test proves nothing")
	t.Logf("%d rounds, counters %+v", rounds, c)
}
