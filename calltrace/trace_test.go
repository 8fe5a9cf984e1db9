package calltrace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/govkit/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestRecord_RoundTrip(t *testing.T) {
	recs := []Record{
		{Time: t0, Key: "inventory.GetStock", Duration: 1523 * time.Microsecond, Outcome: breaker.Success},
		{Time: t0.Add(time.Millisecond), Key: "inventory.GetStock", Duration: 600 * time.Millisecond, Outcome: breaker.Timeout, Probe: true},
		{Time: t0.Add(2 * time.Millisecond), Key: "inventory.GetStock", Refused: true},
		{Time: t0.Add(3 * time.Millisecond), Key: `pricing "quoted"\ké`, Duration: 0, Outcome: breaker.Failure},
		{Time: t0.Add(4 * time.Millisecond), Key: "x", Duration: time.Second, Outcome: breaker.Ignored},
	}
	var buf bytes.Buffer
	for _, r := range recs {
		buf.Write(r.AppendJSON(nil))
		buf.WriteString("\n\n")
	}
	assert.Equal(t, `{"t":1796040000000000,"k":"inventory.GetStock","d":1523,"o":"success"}`, strings.SplitN(buf.String(), "\n", 2)[0])
	d := NewDecoder(&buf)
	for i, want := range recs {
		got, err := d.Next()
		require.NoError(t, err, "record %d", i)
		assert.Equal(t, want, got, "record %d", i)
		assert.Equal(t, 2*i+1, d.Line())
	}
	_, err := d.Next()
	assert.Equal(t, io.EOF, err)
}

func TestDecoder_BadLinesNameLineAndField(t *testing.T) {
	good := `{"t":1,"k":"a","d":1,"o":"success"}`
	for _, tc := range []struct {
		line, field, problem string
	}{
		{`not json`, "", "want a JSON object"},
		{`{"t":1,"k":"a","d":1,"o":"success"`, "", "want ',' or '}'"},
		{`{"t":1,"k":"a","d":1,"o":"success"} x`, "", "unexpected text"},
		{`{"k":"a","d":1,"o":"success"}`, "t", "required"},
		{`{"t":1,"d":1,"o":"success"}`, "k", "required"},
		{`{"t":1,"k":"","d":1,"o":"success"}`, "k", "must not be empty"},
		{`{"t":-5,"k":"a","d":1,"o":"success"}`, "t", "must not be negative"},
		{`{"t":"now","k":"a","d":1,"o":"success"}`, "t", "non-negative integer"},
		{`{"t":1,"k":"a","d":-1,"o":"success"}`, "d", "must not be negative"},
		{`{"t":1,"k":"a","d":1.5,"o":"success"}`, "", "want ',' or '}'"},
		{`{"t":1,"k":"a","o":"success"}`, "d", "required unless refused"},
		{`{"t":1,"k":"a","d":1}`, "o", "required unless refused"},
		{`{"t":1,"k":"a","d":1,"o":"ok"}`, "o", `want "success", "failure", "timeout" or "ignored"`},
		{`{"t":1,"k":"a","refused":true,"o":"failure"}`, "o", "a refused call has no outcome"},
		{`{"t":1,"k":"a","refused":true,"probe":true}`, "probe", "not a probe"},
		{`{"t":1,"k":"a","d":1,"o":"success","probe":1}`, "probe", "want true or false"},
		{`{"t":1,"k":"a","d":1,"o":"success","status":200}`, "status", "unknown field"},
		{`{"t":1,"t":2,"k":"a","d":1,"o":"success"}`, "t", "appears twice"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(good + "\n" + good + "\n" + tc.line + "\n"))
			for range 2 {
				_, err := d.Next()
				require.NoError(t, err)
			}
			_, err := d.Next()
			var le *LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, 3, le.Line)
			assert.Equal(t, tc.field, le.Field)
			assert.Contains(t, le.Problem, tc.problem)
			assert.Contains(t, err.Error(), "trace: line 3")
		})
	}
}

// stalledWriter blocks every write until released.
type stalledWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// A writer that stops (a full disk, a stuck pipe) never holds up a call:
// once the buffer is full, records are dropped and counted, and Close
// still stops the goroutine once the writer moves again.
func TestRecorder_StalledWriterDropsAndCounts(t *testing.T) {
	w := &stalledWriter{release: make(chan struct{})}
	// A buffer of 1 record. The writer goroutine blocks in the writer at
	// its first flush: when it finds the channel empty, or when its bufio
	// buffer fills. How many records it takes before that depends on the
	// scheduler (on a loaded machine, a few), but never more than its
	// bufio buffer holds; everything else waits in the channel (one) or
	// is dropped.
	r, err := NewRecorder(w, Options{Buffer: 1})
	require.NoError(t, err)
	rec := Record{Time: t0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Success}
	const n = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			r.Record(rec)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked on a stalled writer")
	}
	// Every record the goroutine did not write is dropped, but the one the
	// channel holds and the one the goroutine may have taken and not yet
	// written.
	written, dropped := r.Written(), r.Dropped()
	assert.Positive(t, dropped)
	assert.LessOrEqual(t, uint64(n)-written-dropped, uint64(2))
	close(w.release)
	require.NoError(t, r.Close())
	assert.Equal(t, uint64(n), r.Dropped()+r.Written())
	assert.Equal(t, int(r.Written())+1, strings.Count(w.buf.String(), "\n"), "the records and the origin line")
	r.Record(rec)
	assert.Equal(t, uint64(n+1), r.Dropped()+r.Written(), "after Close a record is dropped and counted")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRecorder_CloseReportsWriteError(t *testing.T) {
	r, err := NewRecorder(failingWriter{}, Options{})
	require.NoError(t, err)
	r.Record(Record{Time: t0, Key: "k"})
	assert.ErrorContains(t, r.Close(), "disk full")
	assert.ErrorContains(t, r.Close(), "disk full", "Close twice")
}

func TestNewRecorder_BadOptions(t *testing.T) {
	_, err := NewRecorder(io.Discard, Options{Sample: 1.5})
	assert.ErrorContains(t, err, "Options.Sample")
	_, err = NewRecorder(io.Discard, Options{Buffer: -1})
	assert.ErrorContains(t, err, "Options.Buffer")
	// A buffer too large to make panicked in make (or took gigabytes).
	for _, n := range []int{MaxBuffer + 1, math.MaxInt} {
		_, err = NewRecorder(io.Discard, Options{Buffer: n})
		assert.ErrorContains(t, err, "Options.Buffer must be at most", "%d", n)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.5} {
		_, err = NewRecorder(io.Discard, Options{Sample: v})
		assert.ErrorContains(t, err, "Options.Sample", "%v", v)
	}
	_, err = NewRecorder(nil, Options{})
	assert.ErrorContains(t, err, "nil writer")
}

var errDown = errors.New("503")

// Do records what the breaker saw: outcomes, the refusals once it is open,
// the half-open probe; a nil Recorder records nothing and still calls.
func TestRecorder_DoRecordsOutcomesRefusalsAndProbes(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(t0)
	pol := breaker.DefaultPolicy()
	pol.Jitter = 0
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: pol}}, breaker.WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()

	var nilRec *Recorder
	require.NoError(t, nilRec.Do(ctx, g, "other", func(context.Context) error { return nil }))

	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Clock: clk})
	require.NoError(t, err)
	slow := func(context.Context) error { clk.Add(2 * time.Millisecond); return nil }
	failing := func(context.Context) error { return errDown }
	for range 20 {
		require.NoError(t, r.Do(ctx, g, "inv", slow))
	}
	for range 20 {
		require.ErrorIs(t, r.Do(ctx, g, "inv", failing), errDown)
	}
	require.ErrorIs(t, r.Do(ctx, g, "inv", slow), breaker.ErrOpen)
	clk.Add(pol.OpenFor)
	require.NoError(t, r.Do(ctx, g, "inv", slow))
	require.NoError(t, r.Close())

	var got []Record
	d := NewDecoder(&buf)
	for {
		rec, err := d.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, rec)
	}
	require.Len(t, got, 42)
	assert.Equal(t, Record{Time: t0, Key: "inv", Duration: 2 * time.Millisecond, Outcome: breaker.Success}, got[0])
	assert.Equal(t, breaker.Failure, got[20].Outcome)
	assert.True(t, got[40].Refused)
	assert.True(t, got[41].Probe)
	assert.Equal(t, uint64(0), r.Dropped())
}

// Sampling keeps evenly spaced calls: one in four of 100.
func TestRecorder_SampleKeepsEveryNth(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Sample: 0.25})
	require.NoError(t, err)
	for range 100 {
		require.NoError(t, r.Do(context.Background(), g, "k", func(context.Context) error { return nil }))
	}
	require.NoError(t, r.Close())
	assert.Equal(t, 25, strings.Count(buf.String(), `"d":`))
}

// BenchmarkRecorderDo compares Do with a nil Recorder (off) with the
// group's own Do, and with recording on.
func BenchmarkRecorderDo(b *testing.B) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(b, err)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.Run("group.Do", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = g.Do(ctx, "k", fn)
		}
	})
	b.Run("off", func(b *testing.B) {
		var r *Recorder
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = r.Do(ctx, g, "k", fn)
		}
	})
	b.Run("on", func(b *testing.B) {
		r, err := NewRecorder(io.Discard, Options{})
		require.NoError(b, err)
		defer r.Close()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = r.Do(ctx, g, "k", fn)
		}
	})
}

// Track records calls made through a Breaker with Call and with a
// fallback: the fallback's answer hides the refusal from the caller, not
// from the trace.
func TestTrack_CallAndFallback(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(t0)
	pol := breaker.DefaultPolicy()
	pol.MinRequests = 1
	b, err := breaker.New("pricing", pol, breaker.WithClock(clk))
	require.NoError(t, err)
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()

	fn, done := Track(r, "pricing", func(context.Context) (int, error) { clk.Add(time.Millisecond); return 0, errDown })
	_, err = breaker.Call(ctx, b, fn)
	done(err)
	require.ErrorIs(t, err, errDown)

	fn, done = Track(r, "pricing", func(context.Context) (int, error) { return 1, nil })
	v, err := breaker.FallbackOnFailure(ctx, b, fn, func(context.Context, error) (int, error) { return 42, nil })
	done(err)
	require.NoError(t, err)
	assert.Equal(t, 42, v, "refused, served by the fallback")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	fn, done = Track(r, "pricing", func(context.Context) (int, error) { return 1, nil })
	_, err = breaker.Call(cancelled, b, fn)
	done(err)
	require.ErrorIs(t, err, context.Canceled)

	var nilRec *Recorder
	fn, done = Track(nilRec, "pricing", func(context.Context) (int, error) { return 7, nil })
	done(nil)
	v, _ = fn(ctx)
	assert.Equal(t, 7, v)

	require.NoError(t, r.Close())
	d := NewDecoder(&buf)
	first, err := d.Next()
	require.NoError(t, err)
	assert.Equal(t, Record{Time: t0, Key: "pricing", Duration: time.Millisecond, Outcome: breaker.Failure}, first)
	second, err := d.Next()
	require.NoError(t, err)
	assert.True(t, second.Refused)
	_, err = d.Next()
	assert.Equal(t, io.EOF, err, "the call whose caller had gone is not recorded")
}

// FuzzDecoder checks that no input makes the decoder panic, that every
// error names its line, and that whatever it reads writes back to a line
// that reads the same.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte(`{"t":1764504000000000,"k":"inventory.GetStock","d":1523,"o":"success"}` + "\n" + `{"t":1,"k":"a","refused":true}`))
	f.Add([]byte(`{"t":1,"k":"a\"b\\u00e9","d":0,"o":"timeout","probe":true}`))
	f.Add([]byte("{}\n\n{\"t\":-1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(bytes.NewReader(data))
		for {
			rec, err := d.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line < 1 {
					t.Fatalf("error %v does not name its line", err)
				}
				return
			}
			again, err := NewDecoder(bytes.NewReader(rec.AppendJSON(nil))).Next()
			if err != nil {
				t.Fatalf("line %q: %v", rec.AppendJSON(nil), err)
			}
			if again != rec {
				t.Fatalf("round trip: %+v became %+v", rec, again)
			}
		}
	})
}

// A line that ends just after a backslash inside a string ({"t":0,"k":"0\)
// is refused with its line number, as any bad line is.
// Regression (a03f5a4, found by FuzzDecoder): the decoder read past the line and panicked.
func TestDecoder_RefusesALineEndingInsideAnEscape(t *testing.T) {
	for _, line := range []string{`{"t":0,"k":"0\`, `{"t":0,"k":"\`, `{"\`, `{"t":0,"k":"a","o":"\`} {
		_, err := NewDecoder(strings.NewReader(line)).Next()
		var le *LineError
		require.ErrorAs(t, err, &le, line)
		assert.Equal(t, 1, le.Line)
	}
}

// A key with control characters or bytes that are not UTF-8 is written as
// valid JSON, and decodes back as itself, each invalid byte as U+FFFD.
// Regression (a03f5a4, found by FuzzDecoder): keys were quoted as Go (\a, \xcc).
func TestRecord_KeysWithControlOrInvalidBytesWriteValidJSON(t *testing.T) {
	for key, want := range map[string]string{
		"bell\a":          "bell\a",
		"nul\x00tab\t":    "nul\x00tab\t",
		"del\x7f":         "del\x7f",
		"é and 😀":         "é and 😀",
		"bad \xcc byte":   "bad \ufffd byte",
		`quote " back \ `: `quote " back \ `,
	} {
		line := Record{Time: t0, Key: key, Duration: time.Millisecond, Outcome: breaker.Success}.AppendJSON(nil)
		assert.True(t, json.Valid(line), "%q", line)
		got, err := NewDecoder(bytes.NewReader(line)).Next()
		require.NoError(t, err, "%q", line)
		assert.Equal(t, want, got.Key)
	}
}

// readAll decodes a whole trace, failing the test on any error.
func readAll(t *testing.T, data []byte) []Record {
	t.Helper()
	var out []Record
	d := NewDecoder(bytes.NewReader(data))
	for {
		rec, err := d.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err, "the recorder wrote a line its decoder refuses")
		out = append(out, rec)
	}
}

// A clock stepped back while a call runs (an NTP correction, a VM
// restored from a snapshot) made the recorder write a negative "d", and
// the decoder refused the whole trace. The call's duration is 0, as on the
// breaker's own timeline, which also takes a step of more than 146 years
// ahead as a pause.
func TestRecorder_ClockSteppedBackMidCallRecordsZeroDuration(t *testing.T) {
	for _, c := range []struct {
		name string
		to   time.Time // where the clock is when the call ends
		want time.Duration
	}{
		{"stepped back an hour", t0.Add(-time.Hour), 0},
		{"stepped back to the zero time", time.Time{}, 0},
		{"jumped 200 years ahead", t0.AddDate(200, 0, 0), 0},
		{"ran two seconds", t0.Add(2 * time.Second), 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewMock()
			clk.Set(t0)
			g, err := breaker.NewGroup(breaker.GroupConfig{})
			require.NoError(t, err)
			var buf bytes.Buffer
			r, err := NewRecorder(&buf, Options{Clock: clk})
			require.NoError(t, err)
			jump := func(context.Context) error { clk.Set(c.to); return nil }
			require.NoError(t, r.Do(context.Background(), g, "inv", jump))
			require.NoError(t, r.Close())
			got := readAll(t, buf.Bytes())
			require.Len(t, got, 1)
			assert.Equal(t, Record{Time: t0, Key: "inv", Duration: c.want, Outcome: breaker.Success}, got[0])
		})
	}
}

// Every Record is written as a line the decoder reads: a time outside the
// format's range is written as the nearer end of it, a duration below 0
// or beyond the format's bound likewise, and an outcome outside the four
// as a failure, as the breaker counts it.
func TestRecord_AppendJSONWritesOnlyWhatDecodes(t *testing.T) {
	last := time.UnixMicro(MaxTime).UTC()
	epoch := time.UnixMicro(0).UTC()
	for _, c := range []struct {
		name string
		in   Record
		want Record
	}{
		{"zero time", Record{Key: "k", Outcome: breaker.Success}, Record{Time: epoch, Key: "k", Outcome: breaker.Success}},
		{"before 1970", Record{Time: t0.AddDate(-100, 0, 0), Key: "k", Refused: true}, Record{Time: epoch, Key: "k", Refused: true}},
		{"after MaxTime", Record{Time: last.Add(time.Microsecond), Key: "k", Refused: true}, Record{Time: last, Key: "k", Refused: true}},
		{"far future", Record{Time: time.Unix(math.MaxInt64/2, 0), Key: "k", Refused: true}, Record{Time: last, Key: "k", Refused: true}},
		{"far past", Record{Time: time.Unix(math.MinInt64/2, 0), Key: "k", Refused: true}, Record{Time: epoch, Key: "k", Refused: true}},
		{"negative duration", Record{Time: t0, Key: "k", Duration: -time.Second, Outcome: breaker.Failure}, Record{Time: t0, Key: "k", Outcome: breaker.Failure}},
		{"longest duration", Record{Time: t0, Key: "k", Duration: math.MaxInt64, Outcome: breaker.Timeout}, Record{Time: t0, Key: "k", Duration: maxDuration.Truncate(time.Microsecond), Outcome: breaker.Timeout}},
		{"unknown outcome", Record{Time: t0, Key: "k", Duration: time.Millisecond, Outcome: 9}, Record{Time: t0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Failure}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readAll(t, append(c.in.AppendJSON(nil), '\n'))
			require.Len(t, got, 1)
			assert.Equal(t, c.want, got[0])
		})
	}
}

// A record the format cannot hold (an empty key, a key so long that its
// line is over MaxLine) is dropped and counted rather than written as a
// line that would make the decoder refuse the whole trace.
func TestRecorder_RecordTheFormatCannotHoldIsDroppedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{})
	require.NoError(t, err)
	ok := Record{Time: t0, Key: "k", Duration: time.Millisecond, Outcome: breaker.Success}
	r.Record(ok)
	r.Record(Record{Time: t0, Key: "", Refused: true})
	r.Record(Record{Time: t0, Key: strings.Repeat("\x01", MaxLine/6+1), Refused: true})
	r.Record(Record{Time: t0, Key: strings.Repeat("k", MaxLine), Refused: true})
	r.Record(ok)
	require.NoError(t, r.Close())
	assert.Equal(t, []Record{ok, ok}, readAll(t, buf.Bytes()))
	assert.Equal(t, uint64(2), r.Written())
	assert.Equal(t, uint64(3), r.Dropped())
}

// The longest line the recorder writes is one the decoder reads.
func TestRecorder_LongestLineDecodes(t *testing.T) {
	base := len(Record{Time: t0, Key: "", Refused: true}.AppendJSON(nil))
	for _, extra := range []int{-1, 0, 1} {
		var buf bytes.Buffer
		r, err := NewRecorder(&buf, Options{})
		require.NoError(t, err)
		key := strings.Repeat("k", MaxLine-base+extra)
		r.Record(Record{Time: t0, Key: key, Refused: true})
		require.NoError(t, r.Close())
		got := readAll(t, buf.Bytes())
		if extra <= 0 {
			require.Len(t, got, 1, "a line of %d bytes", base+len(key))
			assert.Equal(t, key, got[0].Key)
		} else {
			assert.Empty(t, got)
			assert.Equal(t, uint64(1), r.Dropped())
		}
	}
}

// The decoder's error quotes the value it refuses: a negative or too
// large "d" or "t" was reported as "got nothing".
func TestDecoder_ErrorQuotesTheBadNumber(t *testing.T) {
	for line, want := range map[string]string{
		`{"t":1,"k":"a","d":-1,"o":"success"}`:                   `got -1`,
		`{"t":1,"k":"a","d":-3600000000,"o":"success"}`:          `got -3600000000`,
		`{"t":1,"k":"a","d":9223372036854775807,"o":"success"}`:  `got 9223372036854775807`,
		`{"t":1,"k":"a","d":99999999999999999999,"o":"success"}`: `got "99999999999999999999"`,
		`{"t":-5,"k":"a","d":1,"o":"success"}`:                   `got -5`,
		`{"t":-62135596800000000,"k":"a","refused":true}`:        `got -62135596800000000`,
	} {
		_, err := NewDecoder(strings.NewReader(line)).Next()
		require.Error(t, err, line)
		assert.Contains(t, err.Error(), want, line)
		assert.NotContains(t, err.Error(), "nothing", line)
	}
}

// scriptedClock returns its readings in turn, then the last one for ever.
type scriptedClock struct {
	mu       sync.Mutex
	readings []time.Time
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.readings[0]
	if len(c.readings) > 1 {
		c.readings = c.readings[1:]
	}
	return now
}

// fuzzTime makes a clock reading of any kind: the zero time, or any
// instant time.Unix can make, far before 1970 and far after 2112 included.
func fuzzTime(sec int64, nsec int64, zero bool) time.Time {
	if zero {
		return time.Time{}
	}
	return time.Unix(sec, nsec)
}

// FuzzRecorder checks that whatever its clock reads (stepping back,
// jumping far forward, the zero time, instants before 1970 or after the
// format's range) and whatever record it is given, the recorder writes
// only lines its decoder reads, one for each record written, with a
// duration that is never negative.
func FuzzRecorder(f *testing.F) {
	now := t0.Unix()
	f.Add("inv", now, int64(0), now, int64(0), now-3600, int64(0), uint8(0), uint8(0))          // stepped back an hour mid-call
	f.Add("inv", now, int64(0), now, int64(0), now+400*365*86400, int64(0), uint8(0), uint8(1)) // jumped four centuries
	f.Add("inv", int64(0), int64(0), now, int64(0), now, int64(0), uint8(1), uint8(2))          // the zero time first
	f.Add("inv", now, int64(0), int64(math.MaxInt64), int64(999999999), int64(math.MinInt64), int64(0), uint8(0), uint8(3))
	f.Add("", now, int64(0), now, int64(1), now, int64(2), uint8(6), uint8(9))
	f.Fuzz(func(t *testing.T, key string, s0, n0, s1, n1, s2, n2 int64, zeros, outcome uint8) {
		clk := &scriptedClock{readings: []time.Time{
			fuzzTime(s0, n0, zeros&1 != 0), fuzzTime(s1, n1, zeros&2 != 0), fuzzTime(s2, n2, zeros&4 != 0),
		}}
		var buf bytes.Buffer
		r, err := NewRecorder(&buf, Options{Clock: clk, Classifier: func(error) breaker.Outcome { return breaker.Outcome(outcome) }})
		require.NoError(t, err)
		// A call timed by the clock, through Track; then the same readings
		// as a record given whole.
		fn, done := Track(r, key, func(context.Context) (int, error) { return 0, errDown })
		_, err = fn(context.Background())
		done(err)
		r.Record(Record{Time: clk.readings[0], Key: key, Duration: time.Unix(s2, n2).Sub(time.Unix(s1, n1)), Outcome: breaker.Outcome(outcome), Probe: zeros&8 != 0, Refused: zeros&16 != 0})
		require.NoError(t, r.Close())
		assert.Equal(t, uint64(2), r.Written()+r.Dropped())
		got := readAll(t, buf.Bytes())
		assert.Len(t, got, int(r.Written()))
		for _, rec := range got {
			assert.GreaterOrEqual(t, rec.Duration, time.Duration(0))
			assert.Equal(t, string([]rune(key)), rec.Key, "the key is kept, each byte that is not UTF-8 as U+FFFD")
		}
	})
}

// A call that returned nil is a success, as the breaker counts it, without
// asking the classifier: a classifier written for the breaker is never
// given nil, and one that reads err.Error() made every successful call
// panic when the recorder gave it nil.
func TestRecorder_SuccessIsNotGivenToTheClassifier(t *testing.T) {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	require.NoError(t, err)
	var buf bytes.Buffer
	byMessage := func(err error) breaker.Outcome {
		if strings.Contains(err.Error(), "not found") {
			return breaker.Ignored
		}
		return breaker.Failure
	}
	r, err := NewRecorder(&buf, Options{Classifier: byMessage})
	require.NoError(t, err)
	require.NoError(t, r.Do(context.Background(), g, "inv", func(context.Context) error { return nil }))
	require.NoError(t, r.Close())
	got := readAll(t, buf.Bytes())
	require.Len(t, got, 1)
	assert.Equal(t, breaker.Success, got[0].Outcome)
}

// A trace written by a Recorder that watches its group holds, besides
// the calls, the breakers' time origin (its first line) and their
// transitions, each opening with the cooldown the breaker drew: what a
// replay of the policy that ran needs to refuse what it refused. A
// Decoder returns the calls from Next and keeps the rest.
func TestRecorder_DoRecordsTheGroupsTransitionsAndOrigin(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(t0.Add(123456 * time.Microsecond))
	origin := clk.Now()
	p := breaker.DefaultPolicy()
	p.ConsecutiveFailures = 3
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: p}}, breaker.WithClock(clk), breaker.WithRand(func() float64 { return 0.75 }))
	require.NoError(t, err)
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Clock: clk, Origin: origin})
	require.NoError(t, err)
	fail := errors.New("down")
	for range 4 {
		clk.Add(10 * time.Millisecond)
		_ = r.Do(context.Background(), g, "inv", func(context.Context) error { return fail })
	}
	b, ok := g.Lookup("inv")
	require.True(t, ok)
	cooldown := b.Status().Cooldown
	require.Equal(t, time.Duration(float64(p.OpenFor)*(1-p.Jitter+2*p.Jitter*0.75)), cooldown)
	require.NoError(t, r.Close())

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 6, "the origin, three failures, the opening, a refusal")
	assert.Equal(t, `{"t":1796040000123456,"origin":true}`, lines[0])
	// The opening is recorded as the third failure ends, before that
	// call's own line, which is written once Do returns.
	assert.Equal(t, `{"t":1796040000153456,"k":"inv","to":"open","cooldown":33000000,"doublings":0}`, lines[3])

	d := NewDecoder(strings.NewReader(buf.String()))
	var calls []Record
	for {
		rec, err := d.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		calls = append(calls, rec)
	}
	assert.Len(t, calls, 4)
	assert.True(t, calls[3].Refused)
	got, ok := d.Origin()
	require.True(t, ok)
	assert.True(t, origin.Equal(got))
	assert.Equal(t, []Transition{{Time: t0.Add(153456 * time.Microsecond), Key: "inv", To: breaker.Open, Cooldown: cooldown}}, d.Transitions())

	// Watch is idempotent, and stop ends the recording of transitions.
	var buf2 bytes.Buffer
	r2, err := NewRecorder(&buf2, Options{Clock: clk})
	require.NoError(t, err)
	stop := r2.Watch(g)
	r2.Watch(g)()
	b.Reset()
	stop()
	b.Reset()
	require.NoError(t, r2.Close())
	assert.Equal(t, 1, strings.Count(buf2.String(), `"to":"closed"`), "one transition recorded, once")
	assert.NotContains(t, buf2.String(), `"origin"`, "a Clock of its own and no Origin: no origin line")
}

func TestDecoder_TransitionAndOriginLinesAreChecked(t *testing.T) {
	for _, c := range []struct{ line, field, problem string }{
		{`{"t":1,"k":"x","to":"opened"}`, "to", `want "closed", "open" or "half_open", got "opened"`},
		{`{"t":1,"k":"x","to":"closed","cooldown":5}`, "cooldown", "only a transition to open has a cooldown"},
		{`{"t":1,"k":"x","to":"open","d":5}`, "d", "a transition is not a call"},
		{`{"t":1,"k":"x","to":"open","cooldown":-1}`, "cooldown", "must be in [0, "},
		{`{"t":1,"k":"x","to":"open","doublings":63}`, "doublings", "must be in [0, 62], got 63"},
		{`{"t":1,"origin":false}`, "origin", "want true"},
		{`{"t":1,"k":"x","origin":true}`, "k", `an origin line has "t" only`},
		{`{"t":1,"k":"x","d":1,"o":"success","cooldown":3}`, "cooldown", "a call has no cooldown"},
		{`{"to":"open","k":"x"}`, "t", "required"},
	} {
		_, err := NewDecoder(strings.NewReader(c.line)).Next()
		var le *LineError
		require.ErrorAs(t, err, &le, c.line)
		assert.Equal(t, c.field, le.Field, c.line)
		assert.Contains(t, le.Problem, c.problem, c.line)
	}
	_, err := NewDecoder(strings.NewReader("{\"t\":1,\"origin\":true}\n{\"t\":2,\"origin\":true}\n")).Next()
	assert.ErrorContains(t, err, `line 2: field "origin": a second origin, 2, where an earlier line gave 1`)
}

// A refusal by the throttle (the breaker closed, refusing at random) is
// recorded apart from an open breaker's: "throttled": true beside
// "refused": true. Every refusal was written the same, so a replay read a
// throttling breaker's refusals as an open breaker, one span each.
func TestRecorder_ThrottledRefusalsAreToldFromOpenOnes(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(t0)
	pol := breaker.DefaultPolicy()
	pol.Jitter = 0
	pol.ErrorRatio = 0 // the ratio rule off: the throttle alone acts on a partial fault
	pol.ConsecutiveFailures = 30
	pol.Throttle = breaker.Throttle{Enabled: true, K: 2, MinRequests: 20}
	// Every draw refuses while the throttle's probability is above 0.
	g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: pol}},
		breaker.WithClock(clk), breaker.WithRand(func() float64 { return 0 }))
	require.NoError(t, err)
	b, err := g.Get("inv")
	require.NoError(t, err)
	ctx := context.Background()
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Options{Clock: clk})
	require.NoError(t, err)
	ok := func(context.Context) error { clk.Add(time.Millisecond); return nil }
	failing := func(context.Context) error { clk.Add(time.Millisecond); return errDown }
	// 85% of the calls fail, in runs shorter than ConsecutiveFailures:
	// the throttle refuses, through Do and through Track.
	doThrottled, trackThrottled := 0, 0
	for i := 0; i < 2000 && (doThrottled == 0 || trackThrottled == 0); i++ {
		call := ok
		if i%20 < 17 {
			call = failing
		}
		if i%2 == 0 {
			if IsThrottled(r.Do(ctx, g, "inv", call)) {
				doThrottled++
			}
			continue
		}
		fn, done := Track(r, "inv", func(ctx context.Context) (int, error) { return 1, call(ctx) })
		_, err := breaker.Call(ctx, b, fn)
		done(err)
		if IsThrottled(err) {
			trackThrottled++
		}
	}
	require.Positive(t, doThrottled, "Do met the throttle")
	require.Positive(t, trackThrottled, "Track met the throttle")
	// Then every call fails: the breaker opens (once the throttle, which
	// refuses nearly every call, lets enough through) and refuses as open.
	for i := 0; i < 5000 && b.State() != breaker.Open; i++ {
		clk.Add(10 * time.Millisecond)
		_ = r.Do(ctx, g, "inv", failing)
	}
	require.Equal(t, breaker.Open, b.State())
	openErr := r.Do(ctx, g, "inv", ok)
	require.ErrorIs(t, openErr, breaker.ErrOpen)
	require.False(t, IsThrottled(openErr))
	require.NoError(t, r.Close())
	require.Zero(t, r.Dropped())

	var throttled int
	var last Record
	d := NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		rec, err := d.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if rec.Throttled {
			require.True(t, rec.Refused)
			throttled++
		}
		last = rec
	}
	assert.GreaterOrEqual(t, throttled, doThrottled+trackThrottled, "every throttled refusal recorded as one")
	assert.True(t, last.Refused && !last.Throttled, "the open breaker's refusal, as open: %+v", last)
	assert.Contains(t, buf.String(), `,"refused":true,"throttled":true}`+"\n")
}

// The field decodes, is checked, and a trace without it (written before
// it existed) reads every refusal as an open breaker's.
func TestDecoder_Throttled(t *testing.T) {
	rec := Record{Time: t0, Key: "inv", Refused: true, Throttled: true}
	line := string(rec.AppendJSON(nil))
	assert.Equal(t, `{"t":1796040000000000,"k":"inv","refused":true,"throttled":true}`, line)
	old := `{"t":1796040000000001,"k":"inv","refused":true}`
	d := NewDecoder(strings.NewReader(line + "\n" + old + "\n" + `{"t":1796040000000002,"k":"inv","refused":true,"throttled":false}` + "\n"))
	got, err := d.Next()
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	for range 2 {
		got, err = d.Next()
		require.NoError(t, err)
		assert.True(t, got.Refused)
		assert.False(t, got.Throttled)
	}
	for _, tc := range []struct{ line, field, problem string }{
		{`{"t":1,"k":"a","d":1,"o":"success","throttled":true}`, "throttled", `a throttled call is refused: give "refused": true`},
		{`{"t":1,"k":"a","throttled":true}`, "throttled", "a throttled call is refused"},
		{`{"t":1,"k":"a","refused":true,"throttled":"yes"}`, "throttled", "want true or false"},
		{`{"t":1,"k":"a","refused":true,"throttled":true,"throttled":true}`, "throttled", "appears twice"},
		{`{"t":1,"k":"a","to":"open","throttled":true}`, "throttled", "a transition is not a call"},
		{`{"t":1,"origin":true,"throttled":true}`, "throttled", "an origin line has"},
	} {
		_, err := NewDecoder(strings.NewReader(tc.line)).Next()
		var le *LineError
		require.ErrorAs(t, err, &le, tc.line)
		assert.Equal(t, tc.field, le.Field, tc.line)
		assert.Contains(t, le.Problem, tc.problem, tc.line)
	}
}
