package breaker

import (
	"context"
	"errors"
	"math/rand/v2"
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
func TestRace_Hammer(t *testing.T) {
	const workers = 8
	steps := 1000
	if testing.Short() {
		steps = 300
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
	if !testing.Short() {
		assert.Greater(t, opens.Load(), int64(20), "the hammer must cycle through open many times")
		assert.Greater(t, halfOpens.Load(), int64(20), "and through half-open")
		assert.NotEmpty(t, probesPerEpisode)
	}
	t.Logf("opens=%d half-opens=%d episodes with probes=%d counters=%+v", opens.Load(), halfOpens.Load(), len(probesPerEpisode), c)
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
