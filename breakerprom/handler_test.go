package breakerprom

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Names a registry sorts and the text format escapes: a double quote, a
// backslash, a line feed, UTF-8 beyond ASCII, and bytes that are not
// UTF-8, which both write in hex.
var awkwardNames = []string{`quote"d.Get`, `back\slash.Get`, "line\nfeed.Get", "prix.Café@10.0.0.1", "Zeta.Upper", "prix.Caf\xe9@10.0.0.2"}

// throttled is the breaker of richFixture that throttles.
const throttled = "orders.Create"

// richFixture is a group with breakers in every state and mode, the
// awkward names, per-target breakers, a candidate policy, timed
// breakers and one that throttles, on a mock clock that stands still while it is scraped.
func richFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	f := newFixture(t, opts...)
	gp := testutil.CandidatePolicies(payment, awkwardNames[0])
	timed := testutil.MetricsPolicy()
	timed.CallTimeout = time.Second
	gp.Overrides = map[string]breaker.Policy{inventory: timed, awkwardNames[1]: timed, throttled: throttlePolicy()}
	require.NoError(t, f.Group.SetPolicies(gp))

	// pricing trips, fails a probe, recovers; payment's candidate opens.
	f.Trip(pricing)
	f.Refused(pricing, 2)
	f.Recover(pricing)
	f.Calls(payment, 3, nil)
	f.Calls(payment, 1, errBoom)
	f.Calls(payment, 2, nil)
	// The awkward names: one open, one half-open, one forced open, one
	// in shadow, one timed and slow.
	f.Trip(awkwardNames[0])
	f.Trip(awkwardNames[2])
	require.NoError(t, f.Breaker(awkwardNames[3]).SetMode(breaker.ModeForcedOpen))
	require.NoError(t, f.Breaker(awkwardNames[4]).SetMode(breaker.ModeShadow))
	f.Trip(awkwardNames[4])
	f.SlowCall(inventory, 3*time.Second)
	f.Calls(inventory, 2, breaker.Ignore(errBoom))
	f.SlowCall(awkwardNames[1], 20*time.Millisecond)
	f.Trip(awkwardNames[5])
	f.At(45 * time.Second) // awkwardNames[2] is past its cooldown: half-open
	require.Equal(t, breaker.HalfOpen, f.Breaker(awkwardNames[2]).State())
	// One closed breaker throttles: its probability is a fraction.
	failUntilThrottled(t, f.MockGroup, throttled)
	for i := 0; i < 300; i++ {
		f.Calls("inventory.GetStock@10.0."+strconv.Itoa(i%7)+"."+strconv.Itoa(i), 1, nil)
	}
	return f
}

// registryText is what promhttp writes for a registry that holds cs: the
// registry's families in the text format.
func registryText(t *testing.T, cs ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		require.NoError(t, reg.Register(c))
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.FmtText)
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	return buf.String()
}

func handlerText(t *testing.T, h *Handler) string {
	t.Helper()
	var buf bytes.Buffer
	n, err := h.WriteTo(&buf)
	require.NoError(t, err)
	assert.Equal(t, int64(buf.Len()), n)
	return buf.String()
}

// The handler writes byte for byte what promhttp writes for the
// collector alone: every family, every sample, in the registry's order,
// with the same escaping, for the default options, a namespace with
// constant labels that sort before and after the name label, and a group
// without breakers.
func TestHandler_WritesWhatTheCollectorGathers(t *testing.T) {
	for _, tc := range []struct {
		desc string
		opts []Option
	}{
		{"defaults", nil},
		{"namespace and constant labels", []Option{WithNamespace("shop_breaker"),
			WithConstLabels(prometheus.Labels{"group": "outbound", "zone": "eu\"west\\1\n"})}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := richFixture(t, tc.opts...)
			h, err := NewHandler(f.Group, nil, tc.opts...)
			require.NoError(t, err)
			want := registryText(t, NewCollector(f.Group, tc.opts...))
			got := handlerText(t, h)
			require.Equal(t, want, got)
			assert.Greater(t, len(got), 2*flushAt, "long enough to be written in several pieces")
			for _, s := range []string{`name="quote\"d.Get"`, `name="back\\slash.Get"`, `name="line\nfeed.Get"`,
				`quantile="0.999"`, `name="line\nfeed.Get",state="half_open"`, `mode="forced_open",name="prix.Café@10.0.0.1"`, `name="prix.Caf\\xe9@10.0.0.2"`,
				"candidate_transitions_total{", "open_reason{", "trip_reason{", "trip_window_timeouts{", `reason="probe_timeout",to="open"`} {
				assert.Contains(t, got, s)
			}
			assert.Regexp(t, `throttled_total\{[^}]*name="orders.Create"[^}]*\} 1\n`, got)
			assert.Regexp(t, `throttle_probability\{[^}]*name="orders.Create"[^}]*\} 0\.[0-9]+\n`, got)
			// A second scrape, from the pooled buffers, writes the same.
			assert.Equal(t, got, handlerText(t, h))
		})
	}
	t.Run("empty group", func(t *testing.T) {
		f := newFixture(t)
		h, err := NewHandler(f.Group, nil)
		require.NoError(t, err)
		assert.Equal(t, registryText(t, NewCollector(f.Group)), handlerText(t, h))
	})
}

// A transition missing from breaker.PossibleTransitions (a reason added
// to the core and not to the list, which TestModel would catch) is still
// written, in the registry's order, by the handler as by the collector.
func TestHandler_WritesATransitionThatIsNotAPossibleOne(t *testing.T) {
	defer func(pt []breaker.TransitionCount, bf [][]int) { possibleTransitions, possibleByFrom = pt, bf }(possibleTransitions, possibleByFrom)
	possibleTransitions = slices.DeleteFunc(slices.Clone(possibleTransitions), func(t breaker.TransitionCount) bool {
		return t.Reason == breaker.ReasonErrorRatio || t.Reason == breaker.ReasonProbeFailed
	})
	possibleByFrom = byFrom(possibleTransitions)
	f := richFixture(t)
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	got := handlerText(t, h)
	require.Equal(t, registryText(t, NewCollector(f.Group)), got)
	assert.Contains(t, got, `breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="error_ratio",to="open"} 1`)
	assert.Contains(t, got, `breaker_transitions_total{from="closed",name="pricing.GetPrice",reason="error_count",to="open"} 0`)
}

// others is a registry of an application's own metrics.
func others(t *testing.T, names ...string) (*prometheus.Registry, []prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	var cs []prometheus.Collector
	for _, n := range names {
		var c prometheus.Collector
		switch {
		case strings.HasSuffix(n, "_total"):
			cnt := prometheus.NewCounterVec(prometheus.CounterOpts{Name: n, Help: "Help of " + n + "."}, []string{"code"})
			cnt.WithLabelValues("200").Add(3)
			c = cnt
		case strings.HasSuffix(n, "_seconds"):
			s := prometheus.NewSummary(prometheus.SummaryOpts{Name: n, Help: "Help of " + n + ".", Objectives: map[float64]float64{0.5: 0.01}})
			s.Observe(0.25)
			c = s
		default:
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: "Help of " + n + "."})
			g.Set(1.5)
			c = g
		}
		require.NoError(t, reg.Register(c))
		cs = append(cs, c)
	}
	return reg, cs
}

// The application's own metrics come in the same response, merged by
// name, as a registry holding them and the collector would write them.
func TestHandler_ServesTheOtherMetricsMergedByName(t *testing.T) {
	f := richFixture(t)
	reg, cs := others(t, "app_requests_total", "breaker_aaa", "breaker_mid_seconds", "zz_up")
	h, err := NewHandler(f.Group, reg)
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, ContentType, rec.Header().Get("Content-Type"))
	assert.Empty(t, rec.Header().Get("Content-Encoding"))
	assert.Equal(t, registryText(t, append(cs, NewCollector(f.Group))...), rec.Body.String())
}

// A family of the other metrics that has a name of the group's families,
// or writes one, fails the scrape with an error naming it, before
// anything is written.
func TestHandler_RefusesAnOtherFamilyWithABreakerName(t *testing.T) {
	f := newFixture(t)
	f.Calls(inventory, 1, nil)
	for _, name := range []string{"breaker_state", "breaker_latency_seconds", "breaker_latency_seconds_count"} {
		reg, _ := others(t, name)
		h, err := NewHandler(f.Group, reg)
		require.NoError(t, err)
		var buf bytes.Buffer
		n, err := h.WriteTo(&buf)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), strconv.Quote(name))
		assert.Zero(t, n)
		assert.Zero(t, buf.Len())

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		assert.Equal(t, http.StatusInternalServerError, rec.Code)
		assert.Contains(t, rec.Body.String(), strconv.Quote(name))
		assert.NotContains(t, rec.Body.String(), "# TYPE")
	}
}

// A namespace or a constant label that the text format cannot carry as
// it is is an error that names it; so is a missing group.
func TestNewHandler_BadOptionsAreErrorsNamingThem(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithNamespace("shop-breaker")}, `"shop-breaker"`},
		{[]Option{WithNamespace("9lives")}, `"9lives"`},
		{[]Option{WithConstLabels(prometheus.Labels{"bad-name": "x"})}, `"bad-name"`},
		{[]Option{WithConstLabels(prometheus.Labels{"__reserved": "x"})}, `"__reserved"`},
		{[]Option{WithConstLabels(prometheus.Labels{"state": "x"})}, `"state"`},
		{[]Option{WithConstLabels(prometheus.Labels{"quantile": "x"})}, `"quantile"`},
		{[]Option{WithConstLabels(prometheus.Labels{"group": "\xff"})}, `"group"`},
	} {
		_, err := NewHandler(g, nil, tc.opts...)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	_, err = NewHandler(nil, nil)
	assert.ErrorContains(t, err, "group")
}

// blockingWriter blocks its first Write until released, saying when it
// is blocked.
type blockingWriter struct {
	blocked, release chan struct{}
	first            bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if !w.first {
		w.first = true
		close(w.blocked)
		<-w.release
	}
	return len(p), nil
}

// A scrape holds no lock while it writes: with the response stalled
// (a slow scraper), calls go on through every breaker, a breaker trips,
// new breakers are made and old ones removed, and the policy changes.
func TestHandler_CallsGoOnWhileAScrapeWrites(t *testing.T) {
	f := richFixture(t)
	h, err := NewHandler(f.Group, nil)
	require.NoError(t, err)
	w := &blockingWriter{blocked: make(chan struct{}), release: make(chan struct{})}
	scraped := make(chan error)
	go func() {
		_, err := h.WriteTo(w)
		scraped <- err
	}()
	<-w.blocked

	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Calls(inventory, 5, nil)
		f.Calls(pricing, 2, nil)
		f.Trip(payment)
		f.Calls("inventory.GetStock@10.0.9.9", 1, nil)
		f.Group.Remove(awkwardNames[4])
		f.At(time.Minute)
		f.Calls(awkwardNames[2], 1, nil) // the probe: closes it
		assert.NoError(t, f.Group.SetPolicies(breaker.GroupPolicy{Default: testutil.MetricsPolicy()}))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls waited for a scrape that is writing")
	}
	close(w.release)
	require.NoError(t, <-scraped)
}

// The exposition passes promtool's checks.
func TestHandler_PromtoolCheckMetrics(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	f := richFixture(t, WithConstLabels(prometheus.Labels{"group": "outbound"}))
	h, err := NewHandler(f.Group, nil, WithConstLabels(prometheus.Labels{"group": "outbound"}))
	require.NoError(t, err)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(handlerText(t, h))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// appendFloat writes what the text encoder writes: strconv's shortest 'g'
// but for the special values.
func TestAppendFloat_WritesWhatTheEncoderWrites(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {2, "2"}, {999999, "999999"},
		{1e6, "1e+06"}, {1234567, "1.234567e+06"}, {0.5, "0.5"}, {5.12e-07, "5.12e-07"},
		{-3, "-3"}, {1.767323045e+09, "1.767323045e+09"}, {math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {123456.5, "123456.5"},
	} {
		assert.Equal(t, tc.want, string(appendFloat(nil, tc.f)), "%v", tc.f)
	}
	for i := 0; i < 2_000_000; i += 997 {
		f := float64(i)
		assert.Equal(t, strconv.FormatFloat(f, 'g', -1, 64), string(appendFloat(nil, f)))
	}
}
