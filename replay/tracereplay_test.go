package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var traceT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func traceOf(recs ...calltrace.Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.Write(r.AppendJSON(nil))
		b.WriteByte('\n')
	}
	return b.String()
}

func tat(sec float64) time.Time { return traceT0.Add(time.Duration(sec * float64(time.Second))) }

// A hand-built trace whose counterfactual is known call by call.
func TestReplayTrace_CounterfactualAccounting(t *testing.T) {
	const k = "inventory.GetStock"
	ms := time.Millisecond
	var recs []calltrace.Record
	for i := range 5 { // 0.0-0.4: five failures; the candidate opens after the fifth
		recs = append(recs, calltrace.Record{Time: tat(0.1 * float64(i)), Key: k, Duration: 10 * ms, Outcome: breaker.Failure})
	}
	recs = append(recs,
		calltrace.Record{Time: tat(1), Key: k, Duration: 10 * ms, Outcome: breaker.Success}, // candidate open: success lost
		calltrace.Record{Time: tat(2), Key: k, Duration: 10 * ms, Outcome: breaker.Success}, // success lost
		calltrace.Record{Time: tat(3), Key: k, Duration: 10 * ms, Outcome: breaker.Timeout}, // failure avoided
		calltrace.Record{Time: tat(4), Key: k, Refused: true},                               // refused by both
		calltrace.Record{Time: tat(11), Key: k, Refused: true},                              // candidate half-open admits: unknown
		calltrace.Record{Time: tat(12), Key: k, Duration: 10 * ms, Outcome: breaker.Success, Probe: true},
		calltrace.Record{Time: tat(13), Key: k, Duration: 10 * ms, Outcome: breaker.Success},
		calltrace.Record{Time: tat(13), Key: "pricing", Duration: 10 * ms, Outcome: breaker.Success},
	)
	pol := breaker.DefaultPolicy()
	pol.MinRequests, pol.OpenFor, pol.Jitter, pol.Probes = 5, 10*time.Second, 0, 1

	rep, err := ReplayTrace(strings.NewReader(traceOf(recs...)), breaker.GroupPolicy{Default: pol})
	require.NoError(t, err)
	require.Len(t, rep.Keys, 2)
	assert.Equal(t, 13, rep.Calls)
	got := rep.Keys[0]
	assert.Equal(t, k, got.Key)
	assert.Equal(t, "pricing", rep.Keys[1].Key, "keys in order")
	want := KeyReport{Key: k, Calls: 12, Refused: 2, Failed: 6, Probes: 1,
		BothAdmitted: 7, BothRefused: 1, FailuresAvoided: 1, SuccessesLost: 2, Unknown: 1}
	assert.Equal(t, want.Calls, got.Calls)
	assert.Equal(t, want.Refused, got.Refused)
	assert.Equal(t, want.Failed, got.Failed)
	assert.Equal(t, want.Probes, got.Probes)
	assert.Equal(t, want.BothAdmitted, got.BothAdmitted)
	assert.Equal(t, want.BothRefused, got.BothRefused)
	assert.Equal(t, want.FailuresAvoided, got.FailuresAvoided)
	assert.Equal(t, want.SuccessesLost, got.SuccessesLost)
	assert.Equal(t, want.IgnoredRefused, got.IgnoredRefused)
	assert.Equal(t, want.Unknown, got.Unknown)
	assert.Equal(t, []Span{{4 * time.Second, 13 * time.Second}}, got.Recorded)

	require.Len(t, got.Transitions, 3)
	assert.Equal(t, breaker.Open, got.Transitions[0].To)
	assert.Equal(t, 410*ms, got.Transitions[0].At, "after the fifth failure ends")
	assert.Equal(t, breaker.HalfOpen, got.Transitions[1].To)
	assert.Equal(t, 11*time.Second, got.Transitions[1].At, "at the first call after the cooldown")
	assert.Equal(t, breaker.Closed, got.Transitions[2].To)
	assert.Equal(t, 12*time.Second+10*ms, got.Transitions[2].At, "when the probe's success comes in")

	var out bytes.Buffer
	require.NoError(t, rep.WriteText(&out))
	for _, s := range []string{
		"failures avoided 1, successes lost 2",
		"unknown 1",
		"really     refused calls from 0:04.0 to 0:13.0",
		"candidate  0:00.4  open",
		"candidate  0:12.0  closed",
	} {
		assert.Contains(t, out.String(), s)
	}
}

// Calls out of order (lines are written as calls end) replay as they
// started, and the same trace gives the same report.
func TestReplayTrace_OrderAndDeterminism(t *testing.T) {
	var recs []calltrace.Record
	for i := 0; i < 400; i++ {
		o := breaker.Success
		if i%3 != 0 {
			o = breaker.Failure
		}
		recs = append(recs, calltrace.Record{Time: tat(float64(i) * 0.01), Key: "k", Duration: time.Duration(i%7) * time.Millisecond, Outcome: o})
	}
	fwd := traceOf(recs...)
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	rev := traceOf(recs...)
	a, err := ReplayTrace(strings.NewReader(fwd), breaker.GroupPolicy{})
	require.NoError(t, err)
	b, err := ReplayTrace(strings.NewReader(rev), breaker.GroupPolicy{})
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.NotEmpty(t, a.Keys[0].Transitions)
}

func TestReplayTrace_BadTraceNamesLineAndField(t *testing.T) {
	good := traceOf(calltrace.Record{Time: traceT0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Success})
	_, err := ReplayTrace(strings.NewReader(good+good+`{"t":1,"k":"k","d":"5ms","o":"success"}`+"\n"), breaker.GroupPolicy{})
	var le *calltrace.LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 3, le.Line)
	assert.Equal(t, "d", le.Field)

	bad := breaker.DefaultPolicy()
	bad.ErrorRatio = 2
	_, err = ReplayTrace(strings.NewReader(good), breaker.GroupPolicy{Default: bad})
	assert.ErrorContains(t, err, "error_ratio")
}

// syntheticTrace generates, line by line, an hour of one service's calls
// at 1,000 a second over 10 keys, with a 2-minute fault on one key every
// 10 minutes: what a recorder writes for a busy service.
var syntheticKeys = func() (k [10]string) {
	for i := range k {
		k[i] = fmt.Sprintf("svc.Method%d", i)
	}
	return k
}()

type syntheticTrace struct {
	n, total int
	buf      []byte
	off      int
}

func (s *syntheticTrace) Read(p []byte) (int, error) {
	for s.off == len(s.buf) {
		if s.n == s.total {
			return 0, io.EOF
		}
		s.buf, s.off = s.buf[:0], 0
		for i := 0; i < 1000 && s.n < s.total; i++ {
			n := s.n
			s.n++
			t := time.Duration(n) * time.Millisecond
			key := n % 10
			rec := calltrace.Record{Time: traceT0.Add(t), Key: syntheticKeys[key], Duration: time.Duration(5+n%17) * time.Millisecond, Outcome: breaker.Success}
			if key == 3 && t%(10*time.Minute) < 2*time.Minute && (n/10)%5 < 3 {
				rec.Outcome = breaker.Timeout
				rec.Duration = 600 * time.Millisecond
			}
			s.buf = append(rec.AppendJSON(s.buf), '\n')
		}
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// BenchmarkReplayTrace/1h-1000rps replays an hour of traffic at 1,000
// calls a second (3.6 million lines) through a candidate policy.
func BenchmarkReplayTrace(b *testing.B) {
	// The cost of making the trace, to subtract from the replay's.
	b.Run("generate-only/1h-1000rps", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := io.Copy(io.Discard, &syntheticTrace{total: 3_600_000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("1h-1000rps", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			rep, err := ReplayTrace(&syntheticTrace{total: 3_600_000}, breaker.GroupPolicy{})
			if err != nil || rep.Calls != 3_600_000 {
				b.Fatal(err, rep)
			}
		}
	})
}

// Each key gets the candidate's policy as a group would give it: its own
// override, its method's for a per-target key, or the default.
func TestReplayTrace_PolicyPerKey(t *testing.T) {
	tr := traceOf(
		calltrace.Record{Time: traceT0, Key: "a", Duration: time.Millisecond, Outcome: breaker.Success},
		calltrace.Record{Time: traceT0, Key: "b@10.0.0.7", Duration: time.Millisecond, Outcome: breaker.Success},
		calltrace.Record{Time: traceT0, Key: "c", Duration: time.Millisecond, Outcome: breaker.Success},
	)
	gp, err := breaker.ParseGroupPolicy([]byte(`{"default": {"min_requests": 7}, "overrides": {"b": {"min_requests": 5}, "c": {"probes": 1}}}`))
	require.NoError(t, err)
	rep, err := ReplayTrace(strings.NewReader(tr), gp)
	require.NoError(t, err)
	require.Len(t, rep.Keys, 3)
	assert.Equal(t, 7, rep.Keys[0].Policy.MinRequests)
	assert.Equal(t, 5, rep.Keys[1].Policy.MinRequests, "the method's override")
	assert.Equal(t, 1, rep.Keys[2].Policy.Probes)
	assert.Equal(t, 7, rep.Keys[2].Policy.MinRequests, "an override is read onto the default")
}

// The chart is well-formed SVG with a panel per key that has something to
// show, the eventful ones first.
func TestTraceReport_WriteSVG(t *testing.T) {
	t.Parallel()
	rep, err := ReplayTrace(&syntheticTrace{total: 50_000}, breaker.GroupPolicy{})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteSVG(&buf))
	out := buf.String()
	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	assert.Equal(t, 10, strings.Count(out, `font-size="14" font-weight="bold"`), "one panel per key")
	first := strings.Index(out, `font-size="14" font-weight="bold">`)
	assert.Contains(t, out[first:first+60], "svc.Method3", "the key with failures comes first")
	assert.NotContains(t, out, "NaN")
	assert.NotContains(t, out, "Inf")
}

// Scenario: a trace's keys come from request data. One holding a
// right-to-left override (U+202E) was written as it is to the text
// report, which a terminal showed reversed, as another key, and to the
// chart; one holding a control character made the chart XML that no
// browser reads. Keys are written by ops.Printable in both.
func TestTraceReport_KeysThatDoNotShowAsThemselvesAreEscaped(t *testing.T) {
	const poser, ctl = "inventory.GetStock@\u202e7.0.0.01", "orders.Create\x01"
	var recs []calltrace.Record
	for i := range 30 {
		for _, k := range []string{poser, ctl} {
			recs = append(recs, calltrace.Record{Time: tat(0.1 * float64(i)), Key: k, Duration: time.Millisecond, Outcome: breaker.Failure})
		}
	}
	rep, err := ReplayTrace(strings.NewReader(traceOf(recs...)), breaker.GroupPolicy{})
	require.NoError(t, err)
	require.Len(t, rep.Keys, 2)
	assert.Equal(t, poser, rep.Keys[0].Key, "the report keeps the key itself")

	var txt, svg bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	require.NoError(t, rep.WriteSVG(&svg))
	for name, out := range map[string]string{"text": txt.String(), "svg": svg.String()} {
		assert.NotContains(t, out, "\u202e", name)
		assert.NotContains(t, out, "\x01", name)
	}
	assert.Contains(t, txt.String(), "\n\"inventory.GetStock@\\u202e7.0.0.01\"\n")
	assert.Contains(t, txt.String(), "\n\"orders.Create\\x01\"\n")
	assert.Contains(t, svg.String(), `>&quot;inventory.GetStock@\u202e7.0.0.01&quot;</text>`)
	assert.Contains(t, svg.String(), `>&quot;orders.Create\x01&quot;</text>`)
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart is XML")
	}
}

func TestReplayTrace_Bounds(t *testing.T) {
	day := traceOf(
		calltrace.Record{Time: traceT0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Success},
		calltrace.Record{Time: traceT0.Add(25 * time.Hour), Key: "k", Duration: time.Millisecond, Outcome: breaker.Success},
	)
	_, err := ReplayTrace(strings.NewReader(day), breaker.GroupPolicy{})
	assert.ErrorContains(t, err, "more than 24h0m0s")

	_, err = ReplayTrace(strings.NewReader(`{"t":4503599627370497,"k":"k","d":1,"o":"success"}`), breaker.GroupPolicy{})
	var le *calltrace.LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "t", le.Field)
}

// A trace's memory is its calls': each key read took a chunk of 16,384
// calls (256 KiB) up front, so a trace of a few thousand keys called once
// each (keys built from request data) took gigabytes.
func TestReplayTrace_ManyKeysTakeMemoryForTheirCallsOnly(t *testing.T) {
	const keys = 2000
	var b strings.Builder
	for i := range keys {
		b.Write(calltrace.Record{Time: traceT0, Key: fmt.Sprintf("k%d", i), Duration: time.Millisecond, Outcome: breaker.Success}.AppendJSON(nil))
		b.WriteByte('\n')
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := ReplayTrace(strings.NewReader(b.String()), breaker.GroupPolicy{})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Len(t, rep.Keys, keys)
	perKey := (after.TotalAlloc - before.TotalAlloc) / keys
	t.Logf("%d bytes allocated per key", perKey)
	assert.Less(t, perKey, uint64(32<<10), "bytes allocated per key of one call")
}

// FuzzReplayTrace checks that no trace makes the replay panic, and that
// every recorded call lands in exactly one bucket of the accounting.
func FuzzReplayTrace(f *testing.F) {
	f.Add([]byte(traceOf(
		calltrace.Record{Time: traceT0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Failure},
		calltrace.Record{Time: traceT0.Add(time.Second), Key: "k", Refused: true},
		calltrace.Record{Time: traceT0.Add(2 * time.Second), Key: "k", Duration: time.Second, Outcome: breaker.Success, Probe: true},
	)))
	f.Add([]byte(`{"t":0,"k":"a","d":4294967295,"o":"timeout"}` + "\n" + `{"t":5,"k":"a@b","refused":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pol := breaker.DefaultPolicy()
		pol.MinRequests, pol.OpenFor, pol.Probes = 1, time.Second, 1
		rep, err := ReplayTrace(bytes.NewReader(data), breaker.GroupPolicy{Default: pol})
		if err != nil {
			return
		}
		n := 0
		for _, k := range rep.Keys {
			sum := k.BothAdmitted + k.BothRefused + k.FailuresAvoided + k.SuccessesLost + k.IgnoredRefused + k.Unknown
			if sum != k.Calls {
				t.Fatalf("key %q: %d calls, %d accounted for", k.Key, k.Calls, sum)
			}
			n += k.Calls
		}
		if n != rep.Calls {
			t.Fatalf("%d calls, %d in keys", rep.Calls, n)
		}
		var out bytes.Buffer
		if err := rep.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteSVG(&out); err != nil {
			t.Fatal(err)
		}
	})
}

// manualClock is a clock the test moves by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

// recordService runs a service's calls through a real group of breakers
// on policy p, recording them with calltrace, and returns the trace:
// 50 calls a second for 4 minutes, each taking 5 ms, failing at 70% from
// 0:40 to 2:00 and from 2:30 to 3:00 (outcomes from a fixed seed). Its
// breakers draw their cooldown jitter from math/rand: the trace, not the
// test, knows the cooldowns. The group's time starts 1.37 s before the
// first call, so its buckets are not aligned on it.
func recordService(t *testing.T, p breaker.Policy) []byte {
	t.Helper()
	clk := &manualClock{t: time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)}
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, breaker.WithClock(clk))
	require.NoError(t, err)
	origin := clk.Now()
	var buf bytes.Buffer
	rec, err := calltrace.NewRecorder(&buf, calltrace.Options{Clock: clk, Origin: origin, Buffer: calltrace.MaxBuffer})
	require.NoError(t, err)
	outcomes := rand.New(rand.NewPCG(1, 2))
	start := origin.Add(1370 * time.Millisecond)
	failing := errors.New("inventory: unavailable")
	for i := range 50 * 240 {
		at := time.Duration(i) * 20 * time.Millisecond
		clk.t = start.Add(at)
		bad := (at >= 40*time.Second && at < 120*time.Second) || (at >= 150*time.Second && at < 180*time.Second)
		fail := bad && outcomes.Float64() < 0.7
		_ = rec.Do(context.Background(), g, "inventory", func(context.Context) error {
			clk.t = clk.t.Add(5 * time.Millisecond)
			if fail {
				return failing
			}
			return nil
		})
	}
	require.NoError(t, rec.Close())
	require.Zero(t, rec.Dropped())
	return buf.Bytes()
}

// Replaying the policy that ran reproduces what happened: a real
// breaker's traffic, recorded with calltrace, replayed through its own
// policy, is refused where the breaker refused it. It was not: the
// replay drew jitter of its own (cooldowns of 8.2 s and 21.4 s where the
// breaker had 10.0 s and 18.05 s) and aligned its buckets on the first
// call, and the policy that ran "refused 136: failures avoided 0,
// successes lost 13". The trace now records each opening's cooldown and
// the breakers' time origin, and the report leads with the share
// reproduced.
func TestReplayTrace_ActivePolicyReproducesTheRecordedRefusals(t *testing.T) {
	p := breaker.DefaultPolicy()
	p.OpenFor, p.MaxOpenFor = 10*time.Second, 40*time.Second
	trace := recordService(t, p)
	active := breaker.GroupPolicy{Default: p}
	rep, err := ReplayTraceWith(bytes.NewReader(trace), active, TraceOptions{Active: active})
	require.NoError(t, err)
	require.Len(t, rep.Keys, 1)
	k := rep.Keys[0]
	assert.Greater(t, k.Refused, 1000, "the breaker refused calls in both faults")
	assert.Greater(t, rep.Transitions, 6, "and the trace holds its transitions")
	assert.False(t, rep.Origin.IsZero())
	share := float64(rep.Reproduced) / float64(rep.Refused)
	t.Logf("reproduced %d of %d recorded refusals (%.4f), %d more; candidate: %d refused by both, %d failures avoided, %d successes lost, %d unknown",
		rep.Reproduced, rep.Refused, share, rep.Extra, k.BothRefused, k.FailuresAvoided, k.SuccessesLost, k.Unknown)
	assert.Equal(t, rep.Refused, rep.Reproduced, "every recorded refusal reproduced")
	assert.Zero(t, rep.Extra, "and no call refused that the breaker admitted")
	assert.Equal(t, k.Refused, k.BothRefused)
	assert.Zero(t, k.Unknown+k.FailuresAvoided+k.SuccessesLost+k.IgnoredRefused, "the candidate that is the policy that ran agrees call by call")

	var out bytes.Buffer
	require.NoError(t, rep.WriteText(&out))
	first := strings.SplitN(out.String(), "\n", 3)
	assert.Equal(t, fmt.Sprintf("self-check  replaying the policy that ran (the given active policy) refuses 100.0%% of the calls the recorded breakers refused (%s of %s), and 0 calls they admitted", thousands(int64(rep.Refused)), thousands(int64(rep.Refused))), first[0])
	assert.Equal(t, fmt.Sprintf("            the trace holds the breakers' %d transitions with their cooldowns and their time origin", rep.Transitions), first[1])

	// Without what the trace records of the breaker, the replay of the
	// same policy drifts from it.
	var calls []string
	for _, line := range strings.Split(string(trace), "\n") {
		if line != "" && !strings.Contains(line, `"to":`) && !strings.Contains(line, `"origin":`) {
			calls = append(calls, line)
		}
	}
	bare, err := ReplayTraceWith(strings.NewReader(strings.Join(calls, "\n")), active, TraceOptions{Active: active})
	require.NoError(t, err)
	t.Logf("without transitions and origin: reproduced %d of %d, %d more", bare.Reproduced, bare.Refused, bare.Extra)
	assert.Equal(t, rep.Refused, bare.Refused)
	assert.Less(t, bare.Reproduced, rep.Reproduced)
}

// throttlingPolicy is docs/policy.md's advice for a partial fault:
// throttling first, the ratio rule at 0.8 for a failure that turns hard.
func throttlingPolicy() breaker.Policy {
	p := breaker.DefaultPolicy()
	p.ErrorRatio = 0.8
	p.OpenFor, p.MaxOpenFor = 10*time.Second, 40*time.Second
	p.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 20}
	return p
}

// recordThrottling runs 50 calls a second for 3 minutes through a real
// breaker on p, recorded with calltrace: 60% of the calls fail from 0:20
// to 1:00 (the throttle refuses some), every call from 1:00 to 1:30 (the
// breaker opens, and reopens), none after. The breaker draws its
// throttle's decisions and its jitter from math/rand, so only the trace
// knows them.
func recordThrottling(t *testing.T, p breaker.Policy) []byte {
	t.Helper()
	clk := &manualClock{t: time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)}
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, breaker.WithClock(clk))
	require.NoError(t, err)
	origin := clk.Now()
	var buf bytes.Buffer
	rec, err := calltrace.NewRecorder(&buf, calltrace.Options{Clock: clk, Origin: origin, Buffer: calltrace.MaxBuffer})
	require.NoError(t, err)
	outcomes := rand.New(rand.NewPCG(3, 4))
	start := origin.Add(870 * time.Millisecond)
	failing := errors.New("pricing: unavailable")
	for i := range 50 * 180 {
		at := time.Duration(i) * 20 * time.Millisecond
		clk.t = start.Add(at)
		fail := (at >= 20*time.Second && at < 60*time.Second && outcomes.Float64() < 0.6) ||
			(at >= 60*time.Second && at < 90*time.Second)
		_ = rec.Do(context.Background(), g, "pricing", func(context.Context) error {
			clk.t = clk.t.Add(5 * time.Millisecond)
			if fail {
				return failing
			}
			return nil
		})
	}
	require.NoError(t, rec.Close())
	require.Zero(t, rec.Dropped())
	return buf.Bytes()
}

// A throttling breaker's trace replays the recorded openings' cooldowns
// exactly, and the policy that ran refuses what the breaker refused. The
// throttle's random draws came from the source the cooldown jitter came
// from, and took the draw a recorded opening's cooldown was matched to
// (10.8 s replayed for a recorded 11.5 s), so the self-check was off; the
// throttle now draws from a source of its own, and the replay of the
// policy that ran follows the recorded throttle's decisions. Throttled
// refusals are read as the throttle's: they open no span of an open
// breaker.
func TestReplayTrace_ThrottlingPolicyReplaysTheRecordedCooldowns(t *testing.T) {
	p := throttlingPolicy()
	trace := recordThrottling(t, p)
	dec := calltrace.NewDecoder(bytes.NewReader(trace))
	throttled := 0
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if rec.Throttled {
			throttled++
		}
	}
	var recorded []calltrace.Transition
	for _, tr := range dec.Transitions() {
		if tr.To == breaker.Open {
			recorded = append(recorded, tr)
		}
	}
	require.Positive(t, throttled, "the recorded throttle refused calls")
	require.NotEmpty(t, recorded, "the recorded breaker opened")

	active := breaker.GroupPolicy{Default: p}
	rep, err := ReplayTraceWith(bytes.NewReader(trace), active, TraceOptions{Active: active})
	require.NoError(t, err)
	require.Len(t, rep.Keys, 1)
	k := rep.Keys[0]
	assert.Equal(t, throttled, k.Throttled)
	assert.Equal(t, throttled, rep.Throttled)
	t.Logf("%d refusals recorded, %d of them throttled; %d reproduced, %d more; %d recorded openings",
		rep.Refused, rep.Throttled, rep.Reproduced, rep.Extra, len(recorded))
	assert.Equal(t, rep.Refused, rep.Reproduced, "every recorded refusal reproduced, the throttle's included")
	assert.Zero(t, rep.Extra, "and no call refused that the breaker admitted")
	for _, s := range k.Recorded {
		assert.GreaterOrEqual(t, s.To-s.From, 5*time.Second, "a span of an open breaker, not a throttled refusal: %v", s)
	}

	// The replay of the policy that ran opens when the breaker did, for
	// as long, to the trace's microsecond.
	calls := traceCallsOf(t, trace)
	t0 := rep.Start.UnixNano()
	var opens []opening
	for _, tr := range recorded {
		opens = append(opens, opening{at: tr.Time.UnixNano() - t0, cooldown: tr.Cooldown, doublings: tr.Doublings})
	}
	act, err := replayKey("pricing", calls, p, rep.Start, len(k.Seconds), int64(rep.Length), rep.Origin.UnixNano()-t0, opens, true)
	require.NoError(t, err)
	var replayed []Transition
	for _, tr := range act.Transitions {
		if tr.To == breaker.Open {
			replayed = append(replayed, tr)
		}
	}
	require.Len(t, replayed, len(recorded))
	for i, tr := range recorded {
		assert.InDelta(t, tr.Time.Sub(rep.Start), replayed[i].At, float64(time.Microsecond), "opening %d at the recorded instant", i)
		assert.InDelta(t, tr.Cooldown, replayed[i].Cooldown, float64(time.Microsecond), "opening %d for the recorded cooldown", i)
	}

	// The candidate draws its throttle's decisions from its own source:
	// it refuses other calls at random, and an opening within a second
	// of a recorded one still takes that opening's jitter draw (its
	// cooldown over the base cooldown at its doublings).
	factor := func(cooldown time.Duration, doublings int) float64 {
		return float64(cooldown) / float64(min(p.OpenFor<<doublings, p.MaxOpenFor))
	}
	matched := 0
	for _, tr := range k.Transitions {
		if tr.To != breaker.Open {
			continue
		}
		for _, o := range recorded {
			if d := tr.At - o.Time.Sub(rep.Start); d >= -time.Second && d <= time.Second {
				assert.InDelta(t, factor(o.Cooldown, o.Doublings), factor(tr.Cooldown, tr.Doublings), 1e-6, "the candidate's opening at %v", tr.At)
				matched++
			}
		}
	}
	assert.Positive(t, matched, "the candidate opens near a recorded opening")
}

// traceCallsOf reads a trace's calls as the replay holds them, relative
// to the first call, in order of start.
func traceCallsOf(t *testing.T, trace []byte) []traceCall {
	t.Helper()
	dec := calltrace.NewDecoder(bytes.NewReader(trace))
	var calls []traceCall
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		c := traceCall{at: rec.Time.UnixNano(), dur: uint32(rec.Duration.Microseconds()), outcome: rec.Outcome}
		if rec.Probe {
			c.flags |= flagProbe
		}
		if rec.Refused {
			c.flags |= flagRefused
		}
		if rec.Throttled {
			c.flags |= flagThrottled
		}
		calls = append(calls, c)
	}
	t0 := calls[0].at
	for _, c := range calls {
		t0 = min(t0, c.at)
	}
	for i := range calls {
		calls[i].at -= t0
	}
	slices.SortStableFunc(calls, func(a, b traceCall) int { return cmp.Compare(a.at, b.at) })
	return calls
}

// Throttled refusals are the throttle's, the breaker closed: the report
// counts them apart, marks their seconds "t" rather than open, and draws
// them apart on the chart. Each was read as a span of an open breaker.
// A trace written before the field existed reads as it did.
func TestTraceReport_ThrottledRefusalsAreShownApart(t *testing.T) {
	const k = "pricing"
	ms := time.Millisecond
	var recs []calltrace.Record
	for i := range 400 { // 0:00-0:04: every fourth call throttled, the others admitted, half of them failing
		at := tat(0.01 * float64(i))
		if i%4 == 3 {
			recs = append(recs, calltrace.Record{Time: at, Key: k, Refused: true, Throttled: true})
			continue
		}
		o := breaker.Success
		if i%2 == 0 {
			o = breaker.Failure
		}
		recs = append(recs, calltrace.Record{Time: at, Key: k, Duration: 5 * ms, Outcome: o})
	}
	trace := traceOf(recs...)
	pol := breaker.DefaultPolicy()
	pol.MinRequests = 1000 // the candidate never opens
	rep, err := ReplayTrace(strings.NewReader(trace), breaker.GroupPolicy{Default: pol})
	require.NoError(t, err)
	kr := rep.Keys[0]
	assert.Equal(t, 100, kr.Refused)
	assert.Equal(t, 100, kr.Throttled)
	assert.Empty(t, kr.Recorded, "no span of an open breaker")
	assert.Equal(t, 100, rep.Throttled)

	var out bytes.Buffer
	require.NoError(t, rep.WriteText(&out))
	text := out.String()
	for _, s := range []string{
		"recorded   400 calls, 200 failed or timed out, 100 refused (100 by the throttle), 0 probes\n",
		"really     never open\n",
		"really     throttled 100 calls, closed, from 0:00 to 0:04\n",
		"t closed and throttling (refusing some calls)",
		"100 of the recorded refusals were a throttle's",
	} {
		assert.Contains(t, text, s)
	}
	assert.Regexp(t, `(?m)^  0:01 +100 +50 \| +25 +0 \| t\.$`, text, "the recorded breaker closed and throttling, not open")
	assert.NotContains(t, text, "refused calls from")

	var svg bytes.Buffer
	require.NoError(t, rep.WriteSVG(&svg))
	assert.Contains(t, svg.String(), "recorded: throttled")
	assert.Contains(t, svg.String(), "blue: closed, throttling")
	assert.Contains(t, svg.String(), `fill="`+throttleColor+`"`)

	// A throttling candidate: its throttle's refusals are counted apart
	// and its closed, throttling seconds marked t.
	thr := breaker.DefaultPolicy()
	thr.ErrorRatio = 0.9
	thr.Throttle = breaker.Throttle{Enabled: true, K: 1.1, MinRequests: 20}
	crep, err := ReplayTrace(strings.NewReader(trace), breaker.GroupPolicy{Default: thr})
	require.NoError(t, err)
	ck := crep.Keys[0]
	require.Positive(t, ck.CandidateThrottled)
	assert.Empty(t, ck.Transitions, "the candidate stays closed")
	out.Reset()
	require.NoError(t, crep.WriteText(&out))
	assert.Contains(t, out.String(), fmt.Sprintf("  candidate  refuses %d (%d by its throttle): ", ck.CandidateThrottled, ck.CandidateThrottled))
	assert.Regexp(t, `(?m)\| tt$`, out.String(), "both throttling in a second")

	// The same trace without the field: every refusal an open breaker's.
	old, err := ReplayTrace(strings.NewReader(strings.ReplaceAll(trace, `,"throttled":true`, "")), breaker.GroupPolicy{Default: pol})
	require.NoError(t, err)
	assert.Zero(t, old.Keys[0].Throttled)
	assert.Len(t, old.Keys[0].Recorded, 100, "one span per refusal, as read before")
	out.Reset()
	require.NoError(t, old.WriteText(&out))
	assert.NotContains(t, out.String(), "by the throttle")
	svg.Reset()
	require.NoError(t, old.WriteSVG(&svg))
	assert.NotContains(t, svg.String(), "throttl")
}
