// Command http shows the breakerhttp Transport protecting a client from a
// downstream that goes bad for a while.
//
// It starts two servers on localhost, "inventory" and "pricing", and a
// client that calls each of them 25 times a second through one
// breakerhttp.Transport, so each host gets its own breaker. From 0:02 to
// 0:10 inventory answers 40% of calls with a 500 and holds another 20%
// past the client's deadline: the fault injected in the replay behind
// the library's defaults. Every second the program prints, for each
// service, the calls made, how many were answered, failed, refused by the
// breaker and served from the fallback (the last good answer: a cached
// value for a read), how many probes the server saw, and the breaker's
// state; transitions are printed as they happen. Inventory's breaker
// opens, probes, perhaps reopens with a doubled cooldown while the fault
// lasts, and closes once the server is healthy again; pricing's never
// moves.
//
// The policy is shortened so that all of it fits in 20 seconds: a 2s
// window, a first cooldown of 3s, at most 12s.
//
//	go run ./examples/http
//	go run ./examples/http -scale 0.25   # the same story in 5 seconds
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerhttp"
)

func main() {
	scale := flag.Float64("scale", 1, "multiply every duration by this (0.25 runs four times faster)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, defaults().scaled(*scale)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// config is the whole scenario. Durations are in real time.
type config struct {
	tick     time.Duration // one line of output
	duration time.Duration // how long the client sends
	badFrom  time.Duration // when inventory goes bad
	badFor   time.Duration // for how long
	slow     time.Duration // how long a slow answer takes; past policy.Timeout
	perTick  int           // calls to each service per tick
	policy   breaker.Policy
}

func defaults() config {
	p := breaker.DefaultPolicy()
	p.Window = 2 * time.Second
	p.Buckets = 10
	p.MinRequests = 10
	p.OpenFor = 3 * time.Second
	p.MaxOpenFor = 12 * time.Second
	p.Jitter = 0.1
	p.CallTimeout = 200 * time.Millisecond // the client's deadline for each call
	p.Warmup = 0
	return config{
		tick:     time.Second,
		duration: 20 * time.Second,
		badFrom:  2 * time.Second,
		badFor:   8 * time.Second,
		slow:     time.Second,
		perTick:  25,
		policy:   p,
	}
}

// scaled returns c with every duration multiplied by f. The window stays a
// multiple of 10ms so that its 10 buckets are whole milliseconds, as a
// Policy requires.
func (c config) scaled(f float64) config {
	if f <= 0 || f == 1 {
		return c
	}
	d := func(x time.Duration) time.Duration {
		return time.Duration(float64(x) * f).Round(time.Millisecond)
	}
	c.tick, c.duration, c.badFrom, c.badFor, c.slow = d(c.tick), d(c.duration), d(c.badFrom), d(c.badFor), d(c.slow)
	c.policy.Window = time.Duration(float64(c.policy.Window) * f).Round(10 * time.Millisecond)
	c.policy.OpenFor = d(c.policy.OpenFor)
	c.policy.MaxOpenFor = d(c.policy.MaxOpenFor)
	c.policy.CallTimeout = d(c.policy.CallTimeout)
	return c
}

// service is one downstream: its server and what the client saw of it in
// the current tick.
type service struct {
	name   string
	url    string
	host   string
	server *http.Server
	probes atomic.Int64 // requests that came with Breaker-Probe: 1

	calls, ok, failed, rejected, fallback atomic.Int64

	mu       sync.Mutex
	lastGood []byte // the fallback: the last answer that was served
}

// run plays the scenario and writes its report to w.
func run(ctx context.Context, w io.Writer, cfg config) error {
	start := time.Now()
	bad := func() bool {
		t := time.Since(start)
		return t >= cfg.badFrom && t < cfg.badFrom+cfg.badFor
	}
	inventory, err := startService("inventory", cfg, bad)
	if err != nil {
		return err
	}
	defer inventory.server.Close()
	pricing, err := startService("pricing", cfg, func() bool { return false })
	if err != nil {
		return err
	}
	defer pricing.server.Close()
	services := []*service{inventory, pricing}
	nameOf := map[string]string{inventory.host: inventory.name, pricing.host: pricing.name}

	group, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: cfg.policy}})
	if err != nil {
		return err
	}
	var out sync.Mutex // lines from the ticker and from transitions
	printf := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(w, format, args...)
	}
	unsubscribe := group.Subscribe(func(_ *breaker.Breaker, e breaker.Event) {
		line := fmt.Sprintf("%7s  %-9s  %s -> %s (%s", stamp(e.Time.Sub(start)), nameOf[e.Name], e.From, e.To, e.Reason)
		if e.To == breaker.Open {
			line += fmt.Sprintf(": %d/%d failed, %d timeouts; cooldown %v",
				e.Snapshot.Failures, e.Snapshot.Counted, e.Snapshot.Timeouts, e.Cooldown.Round(10*time.Millisecond))
		}
		printf("%s)\n", line)
	})
	defer unsubscribe()

	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: breakerhttp.New(base, group)}

	printf("inventory goes bad from %s to %s: 40%% errors, 20%% slower than the %v deadline\n",
		stamp(cfg.badFrom), stamp(cfg.badFrom+cfg.badFor), cfg.policy.CallTimeout)
	printf("calls ended in each tick: ok, failed (5xx or no answer in time), rejected by the breaker\n" +
		"without a request; fallback: answered from the last good value; probes: seen by the server\n\n")
	printf("%7s  %-9s  %5s %5s %6s %8s %8s %6s  %s\n",
		"time", "service", "calls", "ok", "failed", "rejected", "fallback", "probes", "state")

	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var calls sync.WaitGroup
	interval := cfg.tick / time.Duration(cfg.perTick)
	send := time.NewTicker(interval)
	defer send.Stop()
	report := time.NewTicker(cfg.tick)
	defer report.Stop()

loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-send.C:
			for _, s := range services {
				calls.Add(1)
				go func(s *service) {
					defer calls.Done()
					s.call(context.Background(), client)
				}(s)
			}
		case <-report.C:
			now := time.Since(start)
			for _, s := range services {
				b, _ := group.Get(s.host)
				printf("%7s  %-9s  %5d %5d %6d %8d %8d %6d  %s\n", stamp(now), s.name,
					s.calls.Swap(0), s.ok.Swap(0), s.failed.Swap(0), s.rejected.Swap(0),
					s.fallback.Swap(0), s.probes.Swap(0), b.State())
			}
		}
	}
	calls.Wait()

	printf("\n")
	for _, s := range services {
		b, _ := group.Get(s.host)
		c := b.Counters()
		printf("%s: final state %s; %d calls answered, %d refused (%d of them served by the fallback), %d opens, probes %d passed, %d failed\n",
			s.name, b.State(), c.Admitted, c.Rejected, c.Fallbacks, c.Opens, c.ProbesPassed, c.ProbesFailed)
	}
	return nil
}

// call makes one request and files its result. A refused or failed read
// is answered from the fallback, the last good answer, when there is one.
func (s *service) call(ctx context.Context, client *http.Client) {
	body, err := get(ctx, client, s.url)
	s.calls.Add(1) // when it ends, so that a tick's columns add up
	switch {
	case err == nil:
		s.ok.Add(1)
		s.mu.Lock()
		s.lastGood = body
		s.mu.Unlock()
		return
	case errors.Is(err, breaker.ErrOpen):
		s.rejected.Add(1)
		// The Transport has already guarded the call; FallbackResult serves the
		// fallback for its refusal and counts it on the breaker that
		// refused (Counters.Fallbacks).
		if _, err := breaker.FallbackResult(ctx, body, err, s.cached); err == nil {
			s.fallback.Add(1)
		}
		return
	default:
		s.failed.Add(1)
	}
	if _, err := s.cached(ctx, err); err == nil {
		s.fallback.Add(1)
	}
}

// cached is the fallback: the last good answer, or the error if there is
// none yet.
func (s *service) cached(_ context.Context, err error) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastGood == nil {
		return nil, err
	}
	return s.lastGood, nil
}

var errStatus = errors.New("bad status")

// get fetches url and reads the whole body: the breaker's call ends with
// the body, so a body cut off by the deadline counts as the timeout it is.
func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s", errStatus, resp.Status)
	}
	return body, nil
}

// startService starts a server on a loopback port that, while bad()
// holds, fails 40% of requests with a 500 and answers 20% only after
// cfg.slow.
func startService(name string, cfg config, bad func() bool) (*service, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &service{name: name, host: l.Addr().String(), url: "http://" + l.Addr().String() + "/" + name}
	s.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(breakerhttp.ProbeHeader) == "1" {
			s.probes.Add(1)
		}
		if bad() {
			switch u := rand.Float64(); {
			case u < 0.4:
				http.Error(w, "injected failure", http.StatusInternalServerError)
				return
			case u < 0.6:
				t := time.NewTimer(cfg.slow)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.Context().Done():
					return // the client gave up, as it should
				}
			}
		}
		fmt.Fprintf(w, "%s: ok\n", name)
	})}
	go s.server.Serve(l)
	return s, nil
}

// stamp formats an offset from the start as m:ss.t.
func stamp(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("%d:%02d.%d", int(d.Minutes()), int(d.Seconds())%60, int(d.Milliseconds()/100)%10)
}
