package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// Fuzz targets for what the library takes from outside: policy documents
// and the errors of the calls it guards. Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzParsePolicy$' -fuzztime 90s .
//
// Inputs that once failed are kept under testdata/fuzz and run with the
// ordinary tests.

// policySeeds are documents worth mutating: valid ones of every field,
// and the shapes of every bug the decoder has had.
var policySeeds = []string{
	`{}`,
	`{"window": "5s", "buckets": 10, "min_requests": 20, "error_ratio": 0.5, "error_count": 0, "slow_call": "0s", "slow_ratio": 0, "consecutive_failures": 0, "call_timeout": "0s", "open_for": "30s", "max_open_for": "2m0s", "jitter": 0.2, "probes": 3, "warmup": "1m0s", "strict_probes": false}`,
	`{"error_ratio": 0.6, "open_for": "45s"}`,
	`{"slow_call": "1.5s", "slow_ratio": 0.6, "call_timeout": "800ms", "consecutive_failures": 7, "error_count": 40, "strict_probes": true}`,
	`{"jitter": 0, "warmup": "0s", "call_timeout": "0s"}`,
	`{"window": "24h", "buckets": 1000, "open_for": "24h", "max_open_for": "24h"}`,
	`{"window": "1ms", "buckets": 1}`,
	`{"error_ratio": 0, "consecutive_failures": 5}`,
	`{"max_open_for": "1m", "max_open_for": "3m"}`,
	`{"window": "5s", "wind\u006fw": "10s"}`,
	`{"windw": "5s"}`,
	`{"window": 5}`,
	`{"window": "5 seconds"}`,
	`{"window": null}`,
	`{"buckets": 2.5}`,
	`{"buckets": "10"}`,
	`{"buckets": 4294967296}`,
	`{"min_requests": 1e40}`,
	`{"min_requests": -0}`,
	`{"error_ratio": "NaN"}`,
	`{"error_ratio": 1e400}`,
	`{"error_ratio": 5e-324}`,
	`{"jitter": -0.0}`,
	`{"window": "-0s"}`,
	`{"window": "9223372036854775807ns"}`,
	`{"window": ".5s", "buckets": 5}`,
	`{"window": "1h0.000000001s"}`,
	`{"open_for": "10s", "max_open_for": "5s", "probs": 3}`,
	`{"strict_probes": "yes"}`,
	`{"window": "5s"} {"x": 1}`,
	`{"window": "5s",}`,
	`{"window": [[[[[[[[]]]]]]]]}`,
	`[1, 2]`,
	`null`,
	`"x"`,
	``,
	`{"\u00e9": 1, "a\nb": 2}`,
	"{\"\xff\": 1, \"\xfe\": 2}",
}

// checkRefusal requires err to be a *PolicyError whose problems each name
// a field and stay short, whatever the document held.
func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("%q: refused with %T %v, want a *PolicyError", data, err, err)
	}
	if len(pe.Problems) == 0 {
		t.Fatalf("%q: a PolicyError with no problems", data)
	}
	for _, p := range pe.Problems {
		if p.Field == "" || p.Problem == "" {
			t.Fatalf("%q: problem %+v does not name its field", data, p)
		}
		if n := len(p.Error()); n > 1024 {
			t.Fatalf("%q: a %d-byte problem: %.200s", data, n, p.Error())
		}
	}
	if n := len(err.Error()); n > (maxListed+1)*1024 {
		t.Fatalf("%q: a %d-byte message", data, n)
	}
}

// FuzzParsePolicy: ParsePolicy never panics; a document it accepts is a
// valid policy that survives encoding and decoding unchanged, and the one
// json.Unmarshal (Policy.UnmarshalJSON) gives too; a document it refuses
// is refused with a *PolicyError naming fields, by json.Unmarshal as well.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range policySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		q := DefaultPolicy()
		uerr := json.Unmarshal(data, &q)
		if err != nil {
			checkRefusal(t, data, err)
			if p != (Policy{}) {
				t.Fatalf("%q: refused, but returned %+v", data, p)
			}
			if uerr == nil {
				t.Fatalf("%q: ParsePolicy refused it (%v), json.Unmarshal accepted it", data, err)
			}
			if q != DefaultPolicy() {
				t.Fatalf("%q: json.Unmarshal refused it but changed the policy to %+v", data, q)
			}
			return
		}
		if verr := p.Validate(); verr != nil {
			t.Fatalf("%q: accepted an invalid policy: %v", data, verr)
		}
		if uerr != nil {
			t.Fatalf("%q: ParsePolicy accepted it, json.Unmarshal refused it: %v", data, uerr)
		}
		if q != p {
			t.Fatalf("%q: ParsePolicy gave %+v, json.Unmarshal %+v", data, p, q)
		}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		back, err := ParsePolicy(enc)
		if err != nil {
			t.Fatalf("%q: its encoding %s is refused: %v", data, enc, err)
		}
		if back != p {
			t.Fatalf("%q: round trip through %s gave %+v, want %+v", data, enc, back, p)
		}
	})
}

// groupSeeds are group documents worth mutating.
var groupSeeds = []string{
	`{}`,
	`{"default": {"error_ratio": 0.5}, "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}}`,
	`{"overrides": {"payment.Charge": {"open_for": "45s"}, "payment.Charge@10.0.0.9": {"min_requests": 5}}}`,
	`{"default": {"jitter": 0}, "overrides": {"a": {}, "b": {"probes": 1}}}`,
	`{"overrides": {}}`,
	`{"overrides": null}`,
	`{"overrides": {"a": null}}`,
	`{"default": null}`,
	`{"defaults": {}}`,
	`{"overrides": {"": {}}}`,
	`{"overrides": [1]}`,
	`{"default": {"window": "x"}}`,
	`{"default": {"error_ratio": 0.6}, "default": {"error_ratio": 0.7}}`,
	`{"overrides": {"a": {"open_for": "45s"}, "a": {"open_for": "50s"}}}`,
	`{"overrides": {"a": {"open_for": "45s", "open_for": "50s"}}}`,
	`{"default": {"open_for": "2m"}, "overrides": {"a": {"max_open_for": "1m"}}}`,
	`{"overrides": {"a\u0000b": {}, "<&>": {}}}`,
	`{"default": {}} {}`,
	`[]`,
	`null`,
}

// FuzzParseGroupPolicy: the properties of FuzzParsePolicy for a group
// document.
func FuzzParseGroupPolicy(f *testing.F) {
	for _, s := range groupSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gp, err := ParseGroupPolicy(data)
		var ugp GroupPolicy
		uerr := json.Unmarshal(data, &ugp)
		if err != nil {
			checkRefusal(t, data, err)
			if !reflect.DeepEqual(gp, GroupPolicy{}) {
				t.Fatalf("%q: refused, but returned %+v", data, gp)
			}
			if uerr == nil {
				t.Fatalf("%q: ParseGroupPolicy refused it (%v), json.Unmarshal accepted it", data, err)
			}
			return
		}
		if verr := gp.Validate(); verr != nil {
			t.Fatalf("%q: accepted an invalid document: %v", data, verr)
		}
		if uerr != nil || !reflect.DeepEqual(gp, ugp) {
			t.Fatalf("%q: ParseGroupPolicy gave %+v, json.Unmarshal %+v, %v", data, gp, ugp, uerr)
		}
		enc, err := json.Marshal(gp)
		if err != nil {
			t.Fatalf("%+v: %v", gp, err)
		}
		back, err := ParseGroupPolicy(enc)
		if err != nil {
			t.Fatalf("%q: its encoding %s is refused: %v", data, enc, err)
		}
		if !reflect.DeepEqual(back, gp) {
			t.Fatalf("%q: round trip through %s gave %+v, want %+v", data, enc, back, gp)
		}
	})
}

// groupKeys are the breakers FuzzGroupLoadPolicies keeps in its group: a
// method, one with a per-target key, and a per-target key whose method has
// no breaker of its own.
var groupKeys = []string{"orders.Create", "payment.Charge", "payment.Charge@10.0.0.7", "inventory.GetStock@10.0.0.9", "a"}

// FuzzGroupLoadPolicies: a document LoadPolicies refuses leaves the group
// exactly as it was, its policy document and every breaker's policy; one
// it accepts is what ParseGroupPolicy makes of it, and every breaker runs
// on its key's policy from it.
func FuzzGroupLoadPolicies(f *testing.F) {
	for _, s := range groupSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		clk := clock.NewMock()
		start := DefaultPolicy()
		start.ErrorRatio = 0.4
		pay := start
		pay.OpenFor, pay.MaxOpenFor = 45*time.Second, 3*time.Minute
		g, err := NewGroup(GroupConfig{Policies: GroupPolicy{Default: start, Overrides: map[string]Policy{"payment.Charge": pay}}}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		before := map[string]Policy{}
		for _, k := range groupKeys {
			b, err := g.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			_ = b.Do(context.Background(), func(context.Context) error { return nil })
			before[k] = b.Policy()
		}
		doc := g.Policies()

		err = g.LoadPolicies(data)
		after := map[string]Policy{}
		g.Range(func(k string, b *Breaker) bool { after[k] = b.Policy(); return true })
		if err != nil {
			checkRefusal(t, data, err)
			if got := g.Policies(); !reflect.DeepEqual(got, doc) {
				t.Fatalf("%q: refused (%v) but the group's document changed to %+v", data, err, got)
			}
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("%q: refused (%v) but breakers changed: %+v, were %+v", data, err, after, before)
			}
			return
		}
		gp, perr := ParseGroupPolicy(data)
		if perr != nil {
			t.Fatalf("%q: LoadPolicies accepted what ParseGroupPolicy refuses: %v", data, perr)
		}
		if got := g.Policies(); !reflect.DeepEqual(got, gp) {
			t.Fatalf("%q: the group holds %+v, the document says %+v", data, got, gp)
		}
		for _, k := range groupKeys {
			want := gp.Default
			m, _, _ := strings.Cut(k, "@")
			if p, ok := gp.Overrides[m]; ok {
				want = p
			}
			if p, ok := gp.Overrides[k]; ok {
				want = p
			}
			if after[k] != want {
				t.Fatalf("%q: breaker %s runs %+v, want %+v", data, k, after[k], want)
			}
		}
	})
}

// fuzzTimeoutErr has a Timeout method whose answer the fuzzer picks.
type fuzzTimeoutErr struct {
	msg     string
	timeout bool
}

func (e fuzzTimeoutErr) Error() string { return e.msg }
func (e fuzzTimeoutErr) Timeout() bool { return e.timeout }

// nothingAnswered are the errnos DefaultClassifier documents as "nothing
// answered".
var nothingAnswered = []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH, syscall.ENETUNREACH}

func errnoTimeout(e syscall.Errno) bool {
	for _, n := range nothingAnswered {
		if e == n {
			return true
		}
	}
	return e.Timeout() // EAGAIN, EWOULDBLOCK, ETIMEDOUT: a net.Error's Timeout
}

// FuzzDefaultClassifier builds an error from the fuzzer's choices, works
// out from how it was built what the documented table says of it, and
// checks DefaultClassifier says the same: nil is a success; a deadline, a
// Timeout() that says true, or a connection nothing answered is a
// timeout; anything else is a failure, whatever its message and however
// deeply it is wrapped. It is never Ignored: only the caller's own
// cancellation is, and the breaker settles that before any classifier.
func FuzzDefaultClassifier(f *testing.F) {
	f.Add("boom", uint8(0), uint8(0), uint16(0), false)
	f.Add("", uint8(1), uint8(3), uint16(0), false)
	f.Add("canceled", uint8(2), uint8(1), uint16(0), false)
	f.Add("dial", uint8(3), uint8(0), uint16(syscall.ECONNREFUSED), false)
	f.Add("read", uint8(5), uint8(2), uint16(syscall.ECONNRESET), false)
	f.Add("i/o timeout", uint8(4), uint8(1), uint16(0), true)
	f.Add("not a timeout", uint8(4), uint8(0), uint16(0), false)
	f.Add("", uint8(6), uint8(0), uint16(0), false)
	f.Add("joined", uint8(7), uint8(4), uint16(syscall.ETIMEDOUT), false)
	f.Add("%w %v \x00", uint8(3), uint8(7), uint16(syscall.EPIPE), true)
	f.Fuzz(func(t *testing.T, msg string, kind, depth uint8, errno uint16, timeout bool) {
		e := syscall.Errno(errno)
		var err error
		want := Failure
		switch kind % 8 {
		case 0:
			err = errors.New(msg)
		case 1:
			err, want = context.DeadlineExceeded, Timeout
		case 2:
			err = context.Canceled // not the caller's: a failure
		case 3:
			err = e
			if errnoTimeout(e) {
				want = Timeout
			}
		case 4:
			err = fuzzTimeoutErr{msg, timeout}
			if timeout {
				want = Timeout
			}
		case 5:
			err = &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: msg, Err: e}}
			if errnoTimeout(e) {
				want = Timeout
			}
		case 6:
			err, want = nil, Success
		case 7:
			err = errors.Join(errors.New(msg), e)
			if errnoTimeout(e) {
				want = Timeout
			}
		}
		if err != nil {
			for i := 0; i < int(depth%8); i++ {
				if i%2 == 0 {
					err = fmt.Errorf("%s: %w", msg, err)
				} else {
					err = errors.Join(err, errors.New(msg))
				}
			}
		}
		got := DefaultClassifier(err)
		if got > Timeout {
			t.Fatalf("%v: outcome %d is outside the four", err, got)
		}
		if got != want {
			t.Fatalf("DefaultClassifier(%#v) = %v, want %v", err, got, want)
		}
		_ = got.String()
	})
}
