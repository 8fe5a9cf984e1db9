package breakerhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
)

// Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzDefaultClassify$' -fuzztime 90s ./breakerhttp/

// statusOutcome is DefaultClassify's documented table for a response that
// arrived whole.
func statusOutcome(code int) breaker.Outcome {
	switch {
	case code == http.StatusTooManyRequests:
		return breaker.Failure
	case code >= 100 && code <= 399:
		return breaker.Success
	case code >= 400 && code <= 499:
		return breaker.Ignored
	}
	return breaker.Failure // 5xx, and any status outside 100-599
}

// FuzzDefaultClassify: every (response, error) pair maps to one of the
// four outcomes, as the table says, whatever the status, body and error
// message: an error or a missing response is a timeout, whatever status
// came with it; a 5xx is a failure for any body.
func FuzzDefaultClassify(f *testing.F) {
	for _, code := range []int{200, 204, 101, 302, 399, 400, 404, 429, 499, 500, 503, 599, 600, 99, 0, -1, 1 << 30} {
		f.Add(code, []byte("status body"), uint8(0), "")
	}
	f.Add(500, []byte(`{"error":"ok"}`), uint8(0), "")
	f.Add(200, []byte(nil), uint8(1), "connection reset by peer")
	f.Add(200, []byte("abc"), uint8(2), "")
	f.Add(503, []byte("abc"), uint8(3), "unexpected EOF")
	f.Fuzz(func(t *testing.T, code int, body []byte, shape uint8, msg string) {
		resp := &http.Response{StatusCode: code, Body: io.NopCloser(bytes.NewReader(body))}
		var err error
		want := statusOutcome(code)
		switch shape % 4 {
		case 1: // the base failed: no response
			resp, err, want = nil, errors.New(msg), breaker.Timeout
		case 2: // neither response nor error
			resp, want = nil, breaker.Timeout
		case 3: // the body broke off
			err, want = errors.New(msg), breaker.Timeout
		}
		if got := DefaultClassify(resp, err); got != want {
			t.Fatalf("DefaultClassify(status %d, body %q, err %v) = %v, want %v", code, body, err, got, want)
		}
	})
}

// fuzzBase answers every request with the fuzzer's response: a status and
// a body that breaks off after cut bytes if broken, or an error.
type fuzzBase struct {
	code   int
	body   []byte
	cut    int
	broken bool
	fail   error
}

func (b *fuzzBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	if b.fail != nil {
		return nil, b.fail
	}
	var rc io.ReadCloser = http.NoBody
	switch {
	case b.broken:
		rc = io.NopCloser(io.MultiReader(bytes.NewReader(b.body[:b.cut]), errReader{}))
	case len(b.body) > 0:
		rc = io.NopCloser(bytes.NewReader(b.body))
	}
	return &http.Response{StatusCode: b.code, Body: rc, Request: r, Header: http.Header{}}, nil
}

var errBrokenBody = errors.New("body broke off")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBrokenBody }

// FuzzTransportOutcome sends one request through a Transport whose base
// answers with the fuzzer's status and body (whole, cut short, or not at
// all), reads the body to its end, and checks that the breaker counted
// exactly the outcome the table gives: a 500 is one failure whatever its
// body, a body that breaks off is a timeout whatever the status.
func FuzzTransportOutcome(f *testing.F) {
	f.Add(200, []byte("ok"), uint16(0), false, false)
	f.Add(500, []byte("oops"), uint16(0), false, false)
	f.Add(500, []byte(""), uint16(0), false, false)
	f.Add(503, []byte("unavailable"), uint16(3), true, false)
	f.Add(429, []byte("slow down"), uint16(0), false, false)
	f.Add(404, []byte("no such thing"), uint16(0), false, false)
	f.Add(200, []byte("abc"), uint16(1), true, false)
	f.Add(200, []byte(nil), uint16(0), false, true)
	f.Add(700, []byte("?"), uint16(0), false, false)
	f.Fuzz(func(t *testing.T, code int, body []byte, cut uint16, broken, fail bool) {
		clk := testutil.NewClock()
		g, err := breaker.NewGroup(breaker.GroupConfig{Policies: breaker.GroupPolicy{Default: testutil.Policy()}}, breaker.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		base := &fuzzBase{code: code, body: body, broken: broken}
		if len(body) > 0 {
			base.cut = int(cut) % (len(body) + 1)
		}
		want := statusOutcome(code)
		switch {
		case fail:
			base.fail, want = errors.New("connection refused"), breaker.Timeout
		case broken:
			want = breaker.Timeout
		}
		tr := New(base, g)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://downstream.test/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if (err != nil) != fail {
			t.Fatalf("RoundTrip: %v, want an error: %v", err, fail)
		}
		if resp != nil {
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !broken && (rerr != nil || !bytes.Equal(got, body)) {
				t.Fatalf("body %q, %v; want %q", got, rerr, body)
			}
			if resp.StatusCode != code {
				t.Fatalf("status %d, want %d as the base gave it", resp.StatusCode, code)
			}
		}
		b, err := g.Get("downstream.test")
		if err != nil {
			t.Fatal(err)
		}
		c := testutil.OutcomesOf(b)
		var wantCounts testutil.Outcomes
		switch want {
		case breaker.Success:
			wantCounts.Successes = 1
		case breaker.Failure:
			wantCounts.Failures = 1
		case breaker.Timeout:
			wantCounts.Timeouts = 1
		case breaker.Ignored:
			wantCounts.Ignored = 1
		}
		if c != wantCounts {
			t.Fatalf("status %d, body %d bytes, broken %v, fail %v: counted %+v, want %+v (%v)", code, len(body), broken, fail, c, wantCounts, want)
		}
	})
}
