// Package breakerhttp puts a circuit breaker in front of every request an
// [http.Client] sends, one breaker per downstream, so a sick downstream is
// failed fast instead of holding the caller's goroutines and connections.
//
// Install the [Transport] in a client:
//
//	g, _ := breaker.NewGroup(breaker.GroupConfig{})
//	client := &http.Client{Transport: breakerhttp.New(nil, g)}
//
// Requests are keyed by host by default (one breaker per downstream), or by
// any function of the request, such as host, method and route template,
// with [WithKey]; a request can name its own breaker through its context
// with [WithRequestKey]. Responses are classified by [DefaultClassify]: a 5xx or a
// 429 is a failure, any other 4xx says nothing about the downstream's
// health, and a request that got no response at all is a timeout. While a
// breaker is open the Transport returns an error matching [breaker.ErrOpen]
// without touching the network; [WriteOpenError] turns it into a 503 with
// Retry-After for servers that proxy. Half-open probes carry the header
// Breaker-Probe: 1 so they can be told apart in the downstream's logs and
// traces. [Fallback], given the Transport, turns a request's results into
// a value, serving a fallback on a refusal or a failed exchange.
//
// # Client settings
//
// The Transport and Fallback need two things of what stands between them
// and the caller: the *http.Response the Transport returned (its Body may
// be wrapped), and errors that wrap the Transport's rather than replace
// them. [http.Client] keeps both, whatever its settings, but for one case:
//
//   - Timeout: responses are fine (the client wraps their Body). A request
//     that Client.Timeout ends before its response comes back as the
//     client's own error, which names no breaker, unless the Transport's
//     error gets there first (the two deadlines expire together): Fallback
//     serves the fallback either way, but cannot count it in
//     Counters.Fallbacks when it gets the client's error. Give the Transport the deadline first:
//     Policy.CallTimeout shorter than Client.Timeout (it covers reading the
//     body too), or a context deadline on the request, with the caller's
//     own context given to Fallback.
//   - CheckRedirect and redirects: every hop is a request of its own,
//     guarded and counted (a 3xx is a success); Fallback judges the last
//     response. An error from CheckRedirect is returned as it is: it is
//     not the downstream's.
//   - Jar: no effect.
//
// A RoundTripper around the Transport, such as a tracing one, is fine if
// it returns the Transport's response and wraps its errors; Fallback reads
// a response it makes anew. One inside the Transport (its base) is part of
// the guarded call. A Transport around another one is an outer breaker
// around an inner one: the outer ignores the inner one's refusals (they
// are not its downstream's answer), and Fallback, given the outer one
// (the one the client uses), counts the fallback for such a refusal on the
// inner breaker, and for a failed exchange on the outer one.
//
// # Recording traffic
//
// [WithRecorder] records every guarded request to a [calltrace.Recorder],
// for breaker-replay to replay a candidate policy against: the breaker's
// key, the outcome and duration, whether the request was a half-open
// probe, and the requests the breaker refused, which never reached the
// base:
//
//	rec, err := calltrace.NewRecorder(file, calltrace.Options{})
//	client := &http.Client{Transport: breakerhttp.New(nil, g, breakerhttp.WithRecorder(rec))}
//
// A request is recorded when its exchange ends, and the recorder writes
// from a buffer on a goroutine of its own, so a service flushes its trace
// on shutdown in this order: stop making requests (for a server,
// [http.Server.Shutdown] returns once the handlers that make them have
// returned), then call [calltrace.Recorder.Close], which writes out what
// is buffered, then close the file. A request that ends after Close is
// dropped and counted ([calltrace.Recorder.Dropped]); one whose body is
// never read to the end nor closed never ends.
//
// The package uses only the standard library.
package breakerhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
)

// ProbeHeader is the request header that marks a half-open probe. Its value
// is "1".
const ProbeHeader = "Breaker-Probe"

// Transport is an [http.RoundTripper] that guards each request with a
// breaker of a [breaker.Group], then passes it to a base RoundTripper.
//
// What it does with a request:
//
//   - The breaker is the group's breaker for the request's key: the key
//     set on its context with [WithRequestKey] if there is one, or else
//     the key function's (see [WithKey]). A key of "" sends the request
//     on unguarded, without the probe header (see below).
//   - If the breaker refuses the request, RoundTrip closes the request's
//     body and returns the refusal, an error matching [breaker.ErrOpen]
//     from which errors.As extracts the *[breaker.OpenError]; the base is
//     not called.
//   - Otherwise the base gets a shallow copy of the request whose context
//     carries the breaker's Policy.CallTimeout deadline, if any, and, for a
//     half-open probe of that breaker, the header Breaker-Probe: 1. On
//     any other request, guarded or not, that header is removed, whatever
//     the casing of its key in the header map: it describes this hop, and
//     a proxy that copies an inbound request's headers must not pass an
//     upstream's probe off as its own. A request sent inside another
//     breaker's probe is not a probe of its own breaker. The caller's
//     request is never modified.
//   - The response is returned as the base returned it, whatever its
//     status: a 503 is an answer for the caller to read. Only its Body is
//     wrapped, so that the call ends when the body does (see below), and
//     the Transport notes the response until then, so that [Fallback],
//     given this Transport, knows it whatever wraps the Body later.
//
// The outcome of a request is decided when the exchange ends: when the
// base fails, or when a response without a body arrives, or else when its
// body is read to the end, fails, or is closed. The response is classified
// by the classifier (see [WithClassifier]); a request that fails after its
// caller cancelled its context is ignored before the classifier runs. The
// call stays open until then because the Policy.CallTimeout deadline must cover
// the body: a deadline cancelled when RoundTrip returns would cut the body
// off half read, and a downstream that sends its headers at once and then
// stalls would be judged healthy. So the duration that Policy.CallTimeout and
// Policy.SlowCall judge includes reading the body, and a body which is
// never closed is a call which never ends; the [http.RoundTripper] contract
// already asks callers to close it.
//
// The Transport reports each outcome it decides with [breaker.Mark], so
// the group's own classifier, if it has one, does not second-guess it.
//
// A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	base     http.RoundTripper
	group    *breaker.Group
	key      func(*http.Request) string
	classify func(*http.Response, error) breaker.Outcome
	rec      *calltrace.Recorder // nil: records nothing
	calls    *calls              // the responses Fallback may ask about
}

// Option configures a [Transport].
type Option func(*Transport)

// WithKey sets the function that names the breaker for a request. The
// default is the request's host (req.URL.Host, or req.Host when the URL has
// none), one breaker per downstream. A finer key, such as host, method and
// route template, isolates one bad endpoint from its neighbours:
//
//	breakerhttp.WithKey(func(r *http.Request) string {
//		return r.URL.Host + " " + r.Method + " " + routeOf(r.URL.Path) // "/users/{id}", not "/users/42"
//	})
//
// Use a template, not the raw path: a key per user id would create a
// breaker per user. A key of "" sends the request on unguarded. A nil f
// keeps the default.
func WithKey(f func(*http.Request) string) Option {
	return func(t *Transport) {
		if f != nil {
			t.key = f
		}
	}
}

// requestKeyCtx is the context key of [WithRequestKey]. A zero-size
// struct, so storing and reading it allocates nothing.
type requestKeyCtx struct{}

// WithRequestKey returns a copy of ctx that names the breaker for a request
// made with it: the [Transport] uses key instead of its key function
// ([WithKey]) for such a request. It suits a caller that knows better than
// any function of the request which downstream it is calling, say the
// method of a client library ("inventory.GetStock") over a host shared by
// many methods:
//
//	ctx = breakerhttp.WithRequestKey(ctx, "inventory.GetStock")
//	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
//
// A key of "" sends the request on unguarded, as it does from the key
// function. The innermost call wins when ctx already carries a key. A nil
// ctx is taken as [context.Background].
func WithRequestKey(ctx context.Context, key string) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, requestKeyCtx{}, key)
}

// requestKey returns the key set on ctx by [WithRequestKey], and whether
// there is one.
func requestKey(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	key, ok := ctx.Value(requestKeyCtx{}).(string)
	return key, ok
}

// WithClassifier replaces [DefaultClassify]. The function is called once
// for each guarded request, when the exchange ends, with:
//
//   - (nil, err) when the base returned err;
//   - (resp, nil) when the response has no body, or its body was read to
//     the end or closed;
//   - (resp, err) when reading the body failed with err.
//
// It is not called when the caller cancelled the request's context: that
// outcome is always [breaker.Ignored]. [Fallback] calls it once more, with
// (resp, nil), to judge a response before its body is read. It must be
// safe for concurrent use.
// A value outside the four outcomes counts as [breaker.Failure]. A nil f
// keeps the default.
func WithClassifier(f func(*http.Response, error) breaker.Outcome) Option {
	return func(t *Transport) {
		if f != nil {
			t.classify = f
		}
	}
}

// New returns a Transport that guards requests with breakers from g and
// sends them with base; a nil base means [http.DefaultTransport]. With a
// nil g, every guarded request fails with an error.
func New(base http.RoundTripper, g *breaker.Group, opts ...Option) *Transport {
	t := &Transport{base: base, group: g, key: hostKey, classify: DefaultClassify, calls: new(calls)}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	return t
}

func hostKey(r *http.Request) string {
	if r.URL != nil && r.URL.Host != "" {
		return r.URL.Host
	}
	return r.Host
}

func (t *Transport) baseRT() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

var errNilGroup = errors.New("breakerhttp: nil *breaker.Group")

// RoundTrip implements [http.RoundTripper]; see [Transport] for what it
// does.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, ok := requestKey(req.Context())
	if !ok {
		key = t.key(req)
	}
	if key == "" {
		out := req
		if hasProbeHeader(req.Header) {
			out = req.WithContext(req.Context()) // never change the caller's request
			out.Header = withoutProbeHeader(req.Header)
		}
		resp, err := t.baseRT().RoundTrip(out)
		if resp != nil {
			t.calls.clear(resp) // see slab
		}
		return resp, err
	}
	if t.group == nil {
		closeRequestBody(req)
		return nil, errNilGroup
	}
	b, err := t.group.Get(key)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	caller := req.Context()
	tr := t.track(key)
	ctx, done, err := b.Allow(caller)
	if err != nil {
		// Refused, or the caller had already gone. The network is not
		// touched, but a RoundTripper must close the body on every path.
		if errors.Is(err, breaker.ErrOpen) {
			tr.refused(err)
		}
		closeRequestBody(req)
		return nil, err
	}
	// The request goes as it came unless the breaker gave it a context of
	// its own (a probe's mark, a Policy.CallTimeout deadline) or its headers
	// must change: a copy for WithContext is an allocation of some 250
	// bytes per request, a third of what the Transport used to add.
	out := req
	if !sameContext(ctx, caller) {
		out = req.WithContext(ctx)
	}
	probe := breaker.IsProbe(ctx)
	tr.admitted(probe)
	if probe || hasProbeHeader(req.Header) {
		if out == req {
			out = req.WithContext(ctx) // never change the caller's request
		}
		out.Header = withoutProbeHeader(req.Header)
		if probe {
			out.Header[ProbeHeader] = []string{"1"}
		}
	}

	returned := false
	defer func() {
		if !returned {
			// The base panicked. Mirror Do: a failure, but a probe only
			// frees its slot, since it proved nothing either way.
			if probe {
				done(breaker.Ignore(errPanicked))
				tr.ended(breaker.Ignored)
			} else {
				done(errPanicked)
				tr.ended(breaker.Failure)
			}
		}
	}()
	resp, err := t.baseRT().RoundTrip(out)
	returned = true

	if err != nil {
		if resp != nil && resp.Body != nil {
			// Against the RoundTripper contract, but the caller gets only
			// the error and could never close this body.
			resp.Body.Close()
		}
		return nil, outcomeError(t.settle(caller, done, tr, nil, err), b, err)
	}
	if resp == nil {
		err := fmt.Errorf("breakerhttp: %T.RoundTrip returned neither a response nor an error", t.baseRT())
		return nil, outcomeError(t.settle(caller, done, tr, nil, err), b, err)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		if o := t.settle(caller, done, tr, resp, nil); o == breaker.Failure || o == breaker.Timeout {
			// An empty answer that failed: an empty body that remembers
			// the breaker and the outcome, for Fallback. Only such answers
			// pay for it.
			bd := settledBody(t, b, resp, o)
			resp.Body = bd
			t.calls.add(bd, int32(o)+1)
		} else {
			t.calls.clear(resp)
		}
		return resp, nil
	}
	if _, ok := resp.Body.(io.Writer); ok {
		// A protocol switch (101): the body is the connection itself and
		// may live for hours. The call it guarded is over, and net/http has
		// handed the connection to the caller, so ending the call (and
		// its deadline) here leaves the connection alone.
		t.settle(caller, done, tr, resp, nil)
		t.calls.clear(resp)
		return resp, nil
	}
	bd := &body{rc: resp.Body, t: t, b: b, resp: resp, caller: caller, done: done, tr: tr}
	resp.Body = bd
	t.calls.add(bd, 0)
	return resp, nil
}

var errPanicked = errors.New("breakerhttp: base RoundTripper panicked")

// sameContext reports whether a and b are the same context. Contexts are
// compared as interfaces, which panics for two values of one type that is
// not comparable; a context of such a type is a value the breaker never
// derives, so it is the caller's own either way.
func sameContext(a, b context.Context) (same bool) {
	defer func() {
		if recover() != nil {
			same = true
		}
	}()
	return a == b
}

// hasProbeHeader reports whether h holds the probe header under any
// casing. A Header is a plain map: code that fills it by hand, rather than
// with Set, can store "breaker-probe", which net/http sends as it is and
// the server canonicalizes, so looking up the canonical key alone would let
// such a header through. The canonical lookup answers for a forwarded
// request at once; a request without the header pays a walk over its keys,
// a handful as a rule, which allocates nothing.
func hasProbeHeader(h http.Header) bool {
	if _, ok := h[ProbeHeader]; ok {
		return true
	}
	for k := range h {
		if isProbeKey(k) {
			return true
		}
	}
	return false
}

// withoutProbeHeader returns a deep copy of h without the probe header
// under any casing; the caller's map is not touched.
func withoutProbeHeader(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		return make(http.Header, 1)
	}
	for k := range out {
		if isProbeKey(k) {
			delete(out, k) // deleting while ranging is allowed
		}
	}
	return out
}

func isProbeKey(k string) bool {
	return len(k) == len(ProbeHeader) && strings.EqualFold(k, ProbeHeader)
}

// settle classifies an ended exchange, reports it to the breaker, records
// it (if tr records) and returns the outcome.
func (t *Transport) settle(caller context.Context, done func(error), tr *tracked, resp *http.Response, err error) breaker.Outcome {
	var o breaker.Outcome
	switch {
	case err != nil && errors.Is(caller.Err(), context.Canceled):
		// The caller gave up; that says nothing about the downstream. The
		// caller's context rather than err decides, because the error of a
		// cancelled request is context.Cause, which need not be
		// context.Canceled.
		o = breaker.Ignored
	default:
		o = t.classify(resp, err)
	}
	report(done, o, resp, err)
	tr.ended(o)
	return o
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, if it has such a method, so that
// [http.Client.CloseIdleConnections] reaches through the Transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.baseRT().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
