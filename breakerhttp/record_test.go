package breakerhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/internal/testutil/tracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outage recorded through the Transport, against a real server: the
// failed requests that opened the breaker, the requests it refused (which
// never reached the server), the half-open probes that closed it, and a
// request after them, each under the breaker's key, on the group's clock,
// with the outcome the breaker counted. A hand-made RoundTripper around
// Recorder.Record could not see the probes, nor the refusals.
func TestTransport_RecordsAnOutageWithItsRefusalsAndProbes(t *testing.T) {
	trace := tracetest.New(t)
	f := newFixture(t, testutil.Policy(), WithRecorder(trace.Rec))
	d := newDownstream(t)
	b := f.breaker(d)
	host := d.Listener.Addr().String()
	t0 := f.clk.Now()
	ctx := context.Background()

	for i := 0; i < 4; i++ {
		status, err := f.get(ctx, d.URL+"/status/500")
		require.NoError(t, err)
		require.Equal(t, 500, status)
	}
	require.Equal(t, breaker.Open, b.State())
	for i := 0; i < 2; i++ {
		_, err := f.get(ctx, d.URL+"/status/200")
		require.ErrorIs(t, err, breaker.ErrOpen)
	}
	require.Equal(t, int64(4), d.hits.Load(), "a refused request reached the server")

	f.clk.Add(10 * time.Second)
	_, err := f.get(ctx, d.URL+"/status/200")
	require.NoError(t, err)
	// The second probe's body is read 300ms after its headers: the call,
	// and its recorded duration, ends with the body.
	resp, err := f.client.Get(d.URL + "/status/200")
	require.NoError(t, err)
	f.clk.Add(300 * time.Millisecond)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, breaker.Closed, b.State())
	_, err = f.get(ctx, d.URL+"/status/200")
	require.NoError(t, err)

	failed := calltrace.Record{Time: tracetest.Time(t0), Key: host, Outcome: breaker.Failure}
	refused := calltrace.Record{Time: tracetest.Time(t0), Key: host, Refused: true}
	got := trace.Records()
	assert.Equal(t, []calltrace.Record{
		failed, failed, failed, failed,
		refused, refused,
		{Time: tracetest.Time(t0.Add(10 * time.Second)), Key: host, Outcome: breaker.Success, Probe: true},
		{Time: tracetest.Time(t0.Add(10 * time.Second)), Key: host, Duration: 300 * time.Millisecond, Outcome: breaker.Success, Probe: true},
		{Time: tracetest.Time(t0.Add(10300 * time.Millisecond)), Key: host, Outcome: breaker.Success},
	}, got)

	var admitted, refusals, probes uint64
	for _, r := range got {
		switch {
		case r.Refused:
			refusals++
		case r.Probe:
			probes++
			admitted++
		default:
			admitted++
		}
	}
	c := b.Counters()
	assert.Equal(t, c.Admitted, admitted, "admitted requests in the trace")
	assert.Equal(t, c.Rejected, refusals, "refusals in the trace")
	assert.Equal(t, c.ProbesPassed, probes, "probes in the trace")
}

// Each request is recorded with the outcome the Transport reported to its
// breaker, decided when the exchange ends: by status, by a connection
// reset, by a body that broke off while it was read.
func TestTransport_RecordsTheOutcomeTheBreakerCounted(t *testing.T) {
	rows := []struct {
		path string
		want breaker.Outcome
	}{
		{"/status/200", breaker.Success},
		{"/status/404", breaker.Ignored},
		{"/status/429", breaker.Failure},
		{"/status/503", breaker.Failure},
		{"/reset", breaker.Timeout},
		{"/truncate", breaker.Timeout},
	}
	for _, row := range rows {
		t.Run(strings.TrimPrefix(row.path, "/"), func(t *testing.T) {
			trace := tracetest.New(t)
			f := newFixture(t, testutil.Policy(), WithRecorder(trace.Rec))
			d := newDownstream(t)
			_, _ = f.get(context.Background(), d.URL+row.path)
			got := trace.Records()
			require.Len(t, got, 1)
			assert.Equal(t, row.want, got[0].Outcome)
			assert.False(t, got[0].Refused)
			assert.Equal(t, testutil.OutcomesOf(f.breaker(d)), outcomesOf(got), "the trace and the breaker disagree")
		})
	}
}

// outcomesOf counts a trace's calls as a breaker's counters do: the
// admitted ones by outcome, and the refused ones.
func outcomesOf(recs []calltrace.Record) testutil.Outcomes {
	var o testutil.Outcomes
	for _, r := range recs {
		switch {
		case r.Refused:
			o.Rejected++
		case r.Outcome == breaker.Success:
			o.Successes++
		case r.Outcome == breaker.Failure:
			o.Failures++
		case r.Outcome == breaker.Timeout:
			o.Timeouts++
		case r.Outcome == breaker.Ignored:
			o.Ignored++
		}
	}
	return o
}

// Only requests a breaker judged are recorded: not one that no breaker
// guards (a key of ""), nor one whose caller had gone before it reached
// its breaker. A nil recorder records nothing and the requests go as
// without it.
func TestTransport_RecordsOnlyWhatABreakerJudged(t *testing.T) {
	trace := tracetest.New(t)
	d := newDownstream(t)
	f := newFixture(t, testutil.Policy(), WithRecorder(trace.Rec), WithKey(func(r *http.Request) string {
		if r.URL.Path == "/status/204" {
			return ""
		}
		return hostKey(r)
	}))
	_, err := f.get(context.Background(), d.URL+"/status/204")
	require.NoError(t, err)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.get(gone, d.URL+"/status/200")
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, trace.Records())

	off := newFixture(t, testutil.Policy(), WithRecorder(nil))
	status, err := off.get(context.Background(), d.URL+"/status/200")
	require.NoError(t, err)
	assert.Equal(t, 200, status)
}

// A base that panics is recorded as the breaker counted it: a failure.
func TestTransport_RecordsAPanickingBaseAsAFailure(t *testing.T) {
	trace := tracetest.New(t)
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}})
	require.NoError(t, err)
	panicky := roundTripFunc(func(*http.Request) (*http.Response, error) { panic("base bug") })
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)
	assert.Panics(t, func() { _, _ = New(panicky, g, WithRecorder(trace.Rec)).RoundTrip(req) })
	got := trace.Records()
	require.Len(t, got, 1)
	assert.Equal(t, "downstream.test", got[0].Key)
	assert.Equal(t, breaker.Failure, got[0].Outcome)
}

// Many goroutines through one recording Transport, for the race detector:
// every request is recorded once.
func TestTransport_RecordsEveryConcurrentRequestOnce(t *testing.T) {
	trace := tracetest.New(t)
	p := testutil.Policy()
	p.MinRequests = 1000 // stays closed
	f := newFixture(t, p, WithRecorder(trace.Rec))
	d := newDownstream(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := f.get(context.Background(), d.URL+"/status/500")
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	got := trace.Records()
	assert.Equal(t, testutil.Outcomes{Failures: workers * each}, outcomesOf(got))
	assert.Equal(t, testutil.OutcomesOf(f.breaker(d)), outcomesOf(got))
}

// Recording adds one allocation to a request, the record in flight, to
// the two the Transport adds (see
// TestTransport_AddsAtMostTwoAllocationsPerRequest); queueing it for the
// writer allocates nothing.
func TestTransport_RecordingAddsOneAllocationPerRequest(t *testing.T) {
	rec, err := calltrace.NewRecorder(io.Discard, calltrace.Options{})
	require.NoError(t, err)
	defer rec.Close()
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	resp := &http.Response{StatusCode: http.StatusOK}
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp.Body = nopBody{}
		return resp, nil
	}), g, WithRecorder(rec))
	req, err := http.NewRequest(http.MethodGet, "http://downstream.test/", nil)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(200, func() {
		got, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = got.Body.Read(nil)
		got.Body.Close()
	})
	assert.LessOrEqual(t, allocs, 3.0, "allocations the Transport adds to a recorded request")
	require.NoError(t, rec.Close())
	assert.NotZero(t, rec.Written())
}

// A calltrace.Recorder given to the group as its observer
// (breaker.WithObserver) records each request as WithRecorder does: the
// same records, request by request, the refusals and the probes included,
// with the outcome the breaker counted, at the same times. The breaker's
// one seam for what watches calls sees what the Transport's own recorder
// sees.
func TestTransport_TheGroupsObserverRecordsWhatWithRecorderRecords(t *testing.T) {
	viaOption, viaObserver := tracetest.New(t), tracetest.New(t)
	clk := testutil.NewClock()
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}},
		breaker.WithClock(clk), breaker.WithObserver(viaObserver.Rec))
	require.NoError(t, err)
	tr := New(&http.Transport{}, g, WithRecorder(viaOption.Rec))
	t.Cleanup(tr.CloseIdleConnections)
	f := &fixture{t: t, clk: clk, group: g, tr: tr, client: &http.Client{Transport: tr}}
	d := newDownstream(t)
	ctx := context.Background()
	for _, path := range []string{"/status/200", "/status/404", "/reset", "/status/500", "/status/503", "/status/500", "/status/500"} {
		clk.Add(time.Millisecond)
		_, _ = f.get(ctx, d.URL+path)
	}
	require.Equal(t, breaker.Open, f.breaker(d).State())
	_, err = f.get(ctx, d.URL+"/status/200")
	require.ErrorIs(t, err, breaker.ErrOpen)
	clk.Add(10 * time.Second)
	resp, err := f.client.Get(d.URL + "/status/200") // a probe, its body read later
	require.NoError(t, err)
	clk.Add(300 * time.Millisecond)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	want := viaOption.Records()
	require.Len(t, want, 9)
	assert.True(t, want[7].Refused)
	assert.True(t, want[8].Probe)
	assert.Equal(t, 300*time.Millisecond, want[8].Duration)
	assert.Equal(t, want, viaObserver.Records())
}
