package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	"github.com/govkit/breaker/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a log sink the server's goroutines write while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// instance is the service running on a real loopback listener, its
// breakers on a mock clock: the window never slides and cooldowns end
// only when the test moves the clock, so the number of calls that trips a
// breaker is exact.
type instance struct {
	t      *testing.T
	base   string
	clk    *clock.Mock
	logs   *syncBuffer
	client *http.Client
}

func start(t *testing.T) *instance { t.Helper(); return startFollowing(t, nil, nil) }

// startFollowing starts the service, its breakers following the source
// that source makes for in if source is not nil, with observe subscribed
// to the follower's records from the first.
func startFollowing(t *testing.T, source func(*instance) live.Source, observe func(live.Change)) *instance {
	t.Helper()
	in := &instance{t: t, clk: clock.NewMock(), logs: &syncBuffer{}}
	in.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var src live.Source
	var open chan struct{}
	if source != nil {
		open = make(chan struct{})
		src = held{source(in), open}
	}
	launch(in, src, observe, breaker.WithClock(in.clk), breaker.WithRand(func() float64 { return 0.5 }))
	if open != nil {
		close(open)
	}
	return in
}

// held is a source whose watch begins once open is closed, so that a
// test can subscribe to the follower before the first document.
type held struct {
	live.Source
	open chan struct{}
}

func (h held) Origin() string {
	if o, ok := h.Source.(interface{ Origin() string }); ok {
		return o.Origin()
	}
	return ""
}

func (h held) Watch(ctx context.Context, deliver func(live.Document)) error {
	select {
	case <-h.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Source.Watch(ctx, deliver)
}

// launch serves the service, its group built with opts and following src
// if it is not nil, for in's test, with observe (if not nil) subscribed to
// the follower's records.
func launch(in *instance, src live.Source, observe func(live.Change), opts ...breaker.Option) *instance {
	t := in.t
	t.Helper()
	log := slog.New(slog.NewTextHandler(in.logs, nil))
	svc, err := newService(log, src, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, svc.close()) })
	if observe != nil && svc.follower != nil {
		t.Cleanup(svc.follower.Subscribe(observe))
	}
	// Port 0: the kernel picks a free port, so tests never collide. The
	// listener accepts from here on, so no wait for the server is needed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	in.base = "http://" + ln.Addr().String()
	in.client = &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, svc.routes(), log) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "run returns nil after a clean shutdown")
		in.client.CloseIdleConnections()
	})
	return in
}

// get fetches path and returns the status and the body.
func (in *instance) get(path string) (int, string) {
	in.t.Helper()
	resp, err := in.client.Get(in.base + path)
	require.NoError(in.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(in.t, err)
	return resp.StatusCode, string(body)
}

func (in *instance) fault(query string) {
	in.t.Helper()
	resp, err := in.client.Post(in.base+"/faults?"+query, "", nil)
	require.NoError(in.t, err)
	resp.Body.Close()
	require.Equal(in.t, http.StatusOK, resp.StatusCode, "POST /faults?%s", query)
}

// product fetches /product?sku=42 and decodes the answer, which must be a
// 200.
func (in *instance) product() productView {
	in.t.Helper()
	code, body := in.get("/product?sku=42")
	require.Equal(in.t, http.StatusOK, code, body)
	var p productView
	require.NoError(in.t, json.Unmarshal([]byte(body), &p))
	return p
}

// breakerView is the part of a /breakers entry the tests read. State is a
// string here: breaker.State marshals to its name but does not unmarshal.
type breakerView struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Counters struct {
		Successes uint64 `json:"successes"`
		Failures  uint64 `json:"failures"`
		Ignored   uint64 `json:"ignored"`
		Rejected  uint64 `json:"rejected"`
		Fallbacks uint64 `json:"fallbacks"`
		Throttled uint64 `json:"throttled"`
	} `json:"counters"`
}

// breakers fetches /breakers and returns the entries by name.
func (in *instance) breakers() map[string]breakerView {
	in.t.Helper()
	code, body := in.get("/breakers")
	require.Equal(in.t, http.StatusOK, code, body)
	var snap struct {
		Breakers []breakerView `json:"breakers"`
	}
	require.NoError(in.t, json.Unmarshal([]byte(body), &snap))
	out := map[string]breakerView{}
	for _, b := range snap.Breakers {
		out[b.Name] = b
	}
	return out
}

// metrics fetches /metrics.
func (in *instance) metrics() string {
	in.t.Helper()
	code, body := in.get("/metrics")
	require.Equal(in.t, http.StatusOK, code, body)
	return body
}

// A pricing outage: its breaker opens after exactly the calls the policy
// says, the product page keeps answering with the catalogue price, the
// inventory breaker is untouched, and /breakers, /metrics and the log all
// show it; then pricing heals and the breaker closes after its probes.
func TestService_PricingOutageOpensItsBreakerAndFallsBack(t *testing.T) {
	in := start(t)

	// Healthy: five live prices. The policy judges on at least ten calls
	// at 50% failures.
	for i := 0; i < 5; i++ {
		assert.Equal(t, productView{SKU: "42", Stock: 7, PriceCents: 1899, PriceSource: "pricing"}, in.product())
	}

	in.fault("pricing=error")
	// Five failures on top of five successes is 5/10: the fifth trips.
	// Each failed call is served the catalogue price.
	for i := 0; i < 5; i++ {
		require.Equal(t, "closed", in.breakers()[keyPrice].State, "tripped early, at failure %d", i+1)
		assert.Equal(t, productView{SKU: "42", Stock: 7, PriceCents: 1999, PriceSource: "catalogue"}, in.product())
	}
	// Open: pricing is not called at all; the page still answers.
	for i := 0; i < 3; i++ {
		assert.Equal(t, "catalogue", in.product().PriceSource)
	}

	bs := in.breakers()
	require.Contains(t, bs, keyPrice)
	require.Contains(t, bs, keyStock)
	assert.Equal(t, "open", bs[keyPrice].State)
	assert.Equal(t, uint64(5), bs[keyPrice].Counters.Failures)
	assert.Equal(t, uint64(3), bs[keyPrice].Counters.Rejected)
	assert.Equal(t, uint64(8), bs[keyPrice].Counters.Fallbacks, "five failures and three refusals")
	assert.Equal(t, "closed", bs[keyStock].State)
	assert.Equal(t, uint64(13), bs[keyStock].Counters.Successes)

	m := in.metrics()
	for _, line := range []string{
		`breaker_state{name="pricing.GetPrice",state="open"} 1`,
		`breaker_state{name="pricing.GetPrice",state="closed"} 0`,
		`breaker_state{name="inventory.GetStock",state="closed"} 1`,
		`breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="error_ratio",to="open"} 1`,
		`breaker_rejected_total{name="pricing.GetPrice"} 3`,
		`breaker_fallbacks_total{name="pricing.GetPrice"} 8`,
		`breaker_window_error_ratio{name="pricing.GetPrice"} 0.5`,
		// Why it opened, for the whole outage; inventory has not
		// tripped, its trip series are there at 0.
		`breaker_trip_reason{name="pricing.GetPrice",reason="error_ratio"} 1`,
		`breaker_trip_window_calls{name="pricing.GetPrice"} 10`,
		`breaker_trip_window_failures{name="pricing.GetPrice"} 5`,
		`breaker_transitions_total{from="closed",name="inventory.GetStock",reason="error_ratio",to="open"} 0`,
	} {
		assert.Contains(t, m, line+"\n")
	}
	assert.NotContains(t, m, `breaker_trip_reason{name="inventory.GetStock"`)

	assert.Contains(t, in.logs.String(),
		`level=WARN msg="breaker opened" breaker.name=pricing.GetPrice breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=0.5 breaker.counted=10 breaker.failures=5 breaker.timeouts=0 breaker.cooldown=15s`+"\n")

	// Pricing heals. After the 15s cooldown the next three calls are
	// probes; all pass and the breaker closes.
	in.fault("pricing=ok")
	in.clk.Add(15 * time.Second)
	for i := 0; i < 3; i++ {
		assert.Equal(t, "pricing", in.product().PriceSource)
	}
	assert.Equal(t, "closed", in.breakers()[keyPrice].State)
	m = in.metrics()
	for _, line := range []string{
		`breaker_state{name="pricing.GetPrice",state="closed"} 1`,
		`breaker_transitions_total{from="open",name="pricing.GetPrice",reason="cooldown_elapsed",to="half_open"} 1`,
		`breaker_transitions_total{from="half_open",name="pricing.GetPrice",reason="probes_passed",to="closed"} 1`,
		`breaker_probes_total{name="pricing.GetPrice",result="passed"} 3`,
		`breaker_not_closed_seconds_total{name="pricing.GetPrice"} 15`,
	} {
		assert.Contains(t, m, line+"\n")
	}
	assert.Contains(t, in.logs.String(), `msg="breaker closed" breaker.name=pricing.GetPrice breaker.state=closed breaker.from=half_open breaker.reason=probes_passed`)
}

// Stock is essential: while the inventory breaker is open the product
// page is a 503 that says when to retry, and pricing is not called.
func TestService_InventoryOutageIsA503WithRetryAfter(t *testing.T) {
	in := start(t)
	in.fault("inventory=error")
	for i := 0; i < 10; i++ {
		code, body := in.get("/product?sku=42")
		require.Equal(t, http.StatusBadGateway, code, body)
	}
	resp, err := in.client.Get(in.base + "/product?sku=42")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "15", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(body), "breaker: inventory.GetStock is open (error_ratio, 10/10 failed, 0 timeouts, retry in 15s)")

	bs := in.breakers()
	assert.Equal(t, "open", bs[keyStock].State)
	assert.NotContains(t, bs, keyPrice, "pricing was never called")
}

// An unknown SKU is the caller's mistake: a 404 that the inventory
// breaker ignores, however many there are.
func TestService_UnknownSKUIsIgnoredByTheBreaker(t *testing.T) {
	in := start(t)
	for i := 0; i < 30; i++ {
		code, _ := in.get("/product?sku=nope")
		require.Equal(t, http.StatusNotFound, code)
	}
	bs := in.breakers()
	assert.Equal(t, "closed", bs[keyStock].State)
	assert.Equal(t, uint64(30), bs[keyStock].Counters.Ignored)
	assert.Contains(t, in.metrics(), `breaker_calls_total{name="inventory.GetStock",outcome="ignored"} 30`+"\n")
}

func TestService_BadRequests(t *testing.T) {
	in := start(t)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/product", http.StatusBadRequest},
		{"POST", "/faults", http.StatusBadRequest},
		{"POST", "/faults?billing=error", http.StatusBadRequest},
		{"POST", "/faults?pricing=broken", http.StatusBadRequest},
		{"POST", "/faults?pricing=error&billing=error", http.StatusBadRequest},
		{"POST", "/faults?inventory=error:0", http.StatusBadRequest},
		{"POST", "/faults?inventory=error:1.5", http.StatusBadRequest},
		{"POST", "/faults?inventory=error:most", http.StatusBadRequest},
		{"POST", "/faults?inventory=ok:0.5", http.StatusBadRequest},
		{"POST", "/faults?inventory=error:0.5&pricing=slow:2", http.StatusBadRequest},
		{"GET", "/nowhere", http.StatusNotFound},
		{"POST", "/product?sku=42", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(c.method, in.base+c.path, nil)
		require.NoError(t, err)
		resp, err := in.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c.want, resp.StatusCode, "%s %s", c.method, c.path)
	}
	// A refused request changed nothing.
	code, body := in.get("/faults")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"inventory":"ok","pricing":"ok"}`, body)
}

// The fault switch takes a share of the calls: error:0.3 fails 3 calls
// of every 10, spread through them, so a partial outage (one that
// throttling answers, or that stays under the trip ratio) can be shown.
// A bad share is refused, naming what is wrong.
func TestService_FaultSwitchTakesAShareOfTheCalls(t *testing.T) {
	in := start(t)
	in.fault("inventory=error:0.3")
	code, body := in.get("/faults")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"inventory":"error:0.3","pricing":"ok"}`, body)
	var failed []int
	for i := 1; i <= 20; i++ {
		code, body := in.get("/product?sku=42")
		switch code {
		case http.StatusOK:
		case http.StatusBadGateway:
			failed = append(failed, i)
		default:
			t.Fatalf("call %d: %d %s", i, code, body)
		}
	}
	assert.Equal(t, []int{1, 4, 7, 11, 14, 17}, failed, "3 of every 10, the first one hit")
	bs := in.breakers()
	assert.Equal(t, "closed", bs[keyStock].State, "30% is under the policy's error ratio")
	assert.Equal(t, uint64(6), bs[keyStock].Counters.Failures)
	assert.Equal(t, uint64(14), bs[keyStock].Counters.Successes)
	assert.Contains(t, in.logs.String(), `msg="fault injected" downstream=inventory fault=error:0.3`)

	// Setting the switch again starts its count again; error alone is
	// every call.
	in.fault("inventory=error")
	code, body = in.get("/faults")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"inventory":"error","pricing":"ok"}`, body)

	resp, err := in.client.Post(in.base+"/faults?inventory=error:1.5", "", nil)
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, `inventory: fault "error:1.5": the share must be a number in (0, 1], such as 0.7`+"\n", string(msg))
}

func TestParseSetting(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"ok", "ok"}, {"error", "error"}, {"slow", "slow"},
		{"error:0.7", "error:0.7"}, {"slow:0.25", "slow:0.25"}, {"error:1", "error"},
	} {
		s, err := parseSetting(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.out, s.String(), c.in)
	}
	for in, want := range map[string]string{
		"broken":     `unknown fault "broken": want ok, error or slow`,
		"ok:0.5":     `fault "ok:0.5": ok takes no share`,
		"error:0":    `fault "error:0": the share must be a number in (0, 1]`,
		"error:-0.1": `fault "error:-0.1": the share must be`,
		"error:NaN":  `fault "error:NaN": the share must be`,
		"error:":     `fault "error:": the share must be`,
	} {
		_, err := parseSetting(in)
		assert.ErrorContains(t, err, want, in)
	}
	// Every run of calls gets its share, give or take one.
	for _, share := range []float64{0.1, 0.25, 0.3, 0.5, 0.7, 0.9, 1} {
		s := setting{fault: failing, share: share}
		hits := 0
		for n := uint64(0); n < 1000; n++ {
			if s.hit(n) {
				hits++
			}
			if want := share * float64(n+1); float64(hits) < want-1 || float64(hits) > want+1 {
				t.Fatalf("share %v: %d hits in %d calls", share, hits, n+1)
			}
		}
	}
}

// Inventory has a deadline: a hung inventory makes no page wait more than
// 200ms, and its breaker trips on the timeouts after ten calls (the
// policy's minimum), where without a deadline every page would take as
// long as inventory and the breaker would see nothing. The real clock:
// the deadline is what cuts the fake's 1s answer.
func TestService_AHungInventoryIsCutByItsDeadline(t *testing.T) {
	in := launch(&instance{t: t, logs: &syncBuffer{}}, nil, nil)
	in.fault("inventory=slow")
	for i := 1; i <= 10; i++ {
		began := time.Now()
		code, body := in.get("/product?sku=42")
		took := time.Since(began)
		require.Equal(t, http.StatusBadGateway, code, "call %d: %s", i, body)
		assert.Contains(t, body, "context deadline exceeded")
		assert.Less(t, took, slowFor*3/4, "call %d waited for inventory", i)
	}
	code, body := in.get("/product?sku=42")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "breaker: inventory.GetStock is open (error_ratio, 10/10 failed, 10 timeouts")
	m := in.metrics()
	for _, line := range []string{
		`breaker_timeout_seconds{name="inventory.GetStock"} 0.2`,
		`breaker_latency_censored_total{name="inventory.GetStock"} 10`,
		`breaker_calls_total{name="inventory.GetStock",outcome="timeout"} 10`,
	} {
		assert.Contains(t, m, line+"\n")
	}
	assert.Contains(t, m, `breaker_latency_seconds_count{name="inventory.GetStock"}`, "a latency series for inventory")
	assert.Contains(t, in.logs.String(), `breaker.reason=error_ratio breaker.ratio=1 breaker.counted=10 breaker.failures=10 breaker.timeouts=10`)
}

// A hard error outage of inventory, on the mock clock: every call is a 503
// at once, and with StrictProbes off (the default) the three probes at the
// end of each cooldown pass on their answers, errors as they are, so the
// breaker closes and trips again ten calls later. It is one outage: the
// cooldown keeps doubling across the closes, each close's log record says
// how long the outage has lasted, its trips and refusals, and when it
// settles if the breaker stays closed; /breakers shows it until the
// breaker has stayed closed for max_open_for (1m). README.md quotes these
// records.
func TestService_AHardErrorOutageIsOneOutageAcrossItsCloses(t *testing.T) {
	in := start(t)
	in.fault("inventory=error")
	failTen := func() {
		t.Helper()
		for i := 0; i < 10; i++ {
			code, body := in.get("/product?sku=42")
			require.Equal(t, http.StatusBadGateway, code, "call %d: %s", i+1, body)
		}
	}
	refuse := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			code, body := in.get("/product?sku=42")
			require.Equal(t, http.StatusServiceUnavailable, code, body)
		}
	}
	probe := func() {
		t.Helper()
		for i := 0; i < 3; i++ {
			code, body := in.get("/product?sku=42")
			require.Equal(t, http.StatusBadGateway, code, "probe %d: %s", i+1, body)
		}
	}
	failTen() // the first trip: cooldown 15s
	refuse(5)
	in.clk.Add(15 * time.Second)
	probe() // pass on their errors: closed, 15s into the outage
	failTen()
	refuse(5)
	in.clk.Add(30 * time.Second) // the cooldown doubled across the close
	probe()
	require.Equal(t, "closed", in.breakers()[keyStock].State)

	resp, err := in.client.Get(in.base + "/breakers")
	require.NoError(t, err)
	var snap ops.GroupSnapshot
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	resp.Body.Close()
	var o *breaker.Outage
	for _, st := range snap.Breakers {
		if st.Name == keyStock {
			o = st.Outage
		}
	}
	require.NotNil(t, o, "closed, but the outage is not over")
	assert.Equal(t, 45*time.Second, o.Duration, "from the first trip, its close included")
	assert.Equal(t, 2, o.Trips)
	assert.Equal(t, uint64(10), o.Refused)
	assert.Equal(t, 6, o.ProbesPassedOnError)
	assert.True(t, o.Recovering())
	assert.Equal(t, in.clk.Now().Add(time.Minute), o.SettlesAt.In(time.UTC))

	var closes []string
	for _, l := range strings.Split(in.logs.String(), "\n") {
		if strings.Contains(l, `msg="breaker closed" breaker.name=inventory.GetStock`) ||
			strings.Contains(l, `msg="breaker opened" breaker.name=inventory.GetStock`) {
			closes = append(closes, regexp.MustCompile(`^time=\S+ `).ReplaceAllString(l, ""))
		}
	}
	assert.Equal(t, []string{
		`level=WARN msg="breaker opened" breaker.name=inventory.GetStock breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=1 breaker.counted=10 breaker.failures=10 breaker.timeouts=0 breaker.cooldown=15s`,
		`level=INFO msg="breaker closed" breaker.name=inventory.GetStock breaker.state=closed breaker.from=half_open breaker.reason=probes_passed breaker.trip_reason=error_ratio breaker.ratio=0 breaker.counted=0 breaker.failures=0 breaker.timeouts=0 breaker.outage_since=2026-01-02T03:04:05.000Z breaker.outage_for=15s breaker.trips=1 breaker.refused=5 breaker.settles_at=2026-01-02T03:05:20.000Z`,
		`level=WARN msg="breaker opened" breaker.name=inventory.GetStock breaker.state=open breaker.from=closed breaker.reason=error_ratio breaker.ratio=1 breaker.counted=10 breaker.failures=10 breaker.timeouts=0 breaker.cooldown=30s breaker.doublings=1 breaker.outage_since=2026-01-02T03:04:05.000Z breaker.outage_for=15s breaker.trips=2 breaker.refused=5`,
		`level=INFO msg="breaker closed" breaker.name=inventory.GetStock breaker.state=closed breaker.from=half_open breaker.reason=probes_passed breaker.trip_reason=error_ratio breaker.ratio=0 breaker.counted=0 breaker.failures=0 breaker.timeouts=0 breaker.doublings=1 breaker.outage_since=2026-01-02T03:04:05.000Z breaker.outage_for=45s breaker.trips=2 breaker.refused=10 breaker.settles_at=2026-01-02T03:05:50.000Z`,
	}, closes)

	// Inventory stays healthy: a minute closed and the outage is over.
	in.fault("inventory=ok")
	in.product()
	in.clk.Add(time.Minute)
	in.product()
	resp, err = in.client.Get(in.base + "/breakers")
	require.NoError(t, err)
	snap = ops.GroupSnapshot{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	resp.Body.Close()
	for _, st := range snap.Breakers {
		if st.Name == keyStock {
			assert.Nil(t, st.Outage, "settled")
		}
	}
}

// staticSource delivers one policy document and holds it.
type staticSource struct{ doc live.Document }

func (s staticSource) Watch(ctx context.Context, deliver func(live.Document)) error {
	deliver(s.doc)
	<-ctx.Done()
	return ctx.Err()
}

// throttlePolicy gives inventory a throttle, with an error ratio above
// 1 - 1/K (0.5 at the default K of 2) so that the throttle acts before the
// ratio rule trips the breaker.
const throttlePolicy = `{
  "default":   {"min_requests": 10, "open_for": "15s", "max_open_for": "1m"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "200ms", "error_ratio": 0.8, "throttle": {"enabled": true}},
    "pricing.GetPrice":   {"call_timeout": "300ms"}
  }
}`

// A partial outage is what the throttle is for, and the share of the
// fault switch shows it: inventory failing 70% of its calls stays under
// the policy's error ratio, so the breaker stays closed, and the throttle
// refuses a share of the calls at once (a 503 naming it) instead of
// sending all of them, or none. At 30% it refuses nothing: with K 2 it
// acts only while fewer than half the calls succeed. Twenty calls a
// second on the mock clock, so the window slides as it would.
func TestService_AThrottleAnswersAPartialOutage(t *testing.T) {
	for _, c := range []struct {
		fault     string
		throttles bool
	}{{"inventory=error:0.7", true}, {"inventory=error:0.3", false}} {
		t.Run(c.fault, func(t *testing.T) {
			in := &instance{t: t, clk: clock.NewMock(), logs: &syncBuffer{}}
			in.clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			var draws atomic.Uint64
			// Evenly spread draws: a share p of them is below p.
			draw := func() float64 { return (float64(draws.Add(1)%100) + 0.5) / 100 }
			launch(in, staticSource{live.Document{Origin: "test", Version: "throttle", Data: []byte(throttlePolicy)}}, nil,
				breaker.WithClock(in.clk), breaker.WithRand(draw))
			for deadline := time.Now().Add(5 * time.Second); in.policy().Policy.Version != "throttle"; time.Sleep(10 * time.Millisecond) {
				require.True(t, time.Now().Before(deadline), "the throttle policy was not applied")
			}
			in.fault(c.fault)
			codes := map[int]int{}
			for i := 0; i < 400; i++ {
				code, body := in.get("/product?sku=42")
				codes[code]++
				if code == http.StatusServiceUnavailable {
					require.Contains(t, body, "breaker: inventory.GetStock is closed (throttled)")
				}
				in.clk.Add(50 * time.Millisecond)
			}
			t.Logf("%s: %d ok, %d failed, %d throttled", c.fault, codes[http.StatusOK], codes[http.StatusBadGateway], codes[http.StatusServiceUnavailable])
			bs := in.breakers()
			assert.Equal(t, "closed", bs[keyStock].State, "under the error ratio: %v", codes)
			assert.Equal(t, uint64(codes[http.StatusServiceUnavailable]), bs[keyStock].Counters.Throttled)
			if !c.throttles {
				assert.Zero(t, codes[http.StatusServiceUnavailable], "nothing throttled: %v", codes)
				return
			}
			assert.Greater(t, codes[http.StatusServiceUnavailable], 100, "a share refused at once: %v", codes)
			assert.Greater(t, codes[http.StatusOK]+codes[http.StatusBadGateway], 50, "a share still sent: %v", codes)
			assert.Contains(t, in.metrics(), `breaker_throttled_total{name="inventory.GetStock"} `+strconv.Itoa(codes[http.StatusServiceUnavailable])+"\n")
		})
	}
}
