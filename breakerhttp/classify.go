package breakerhttp

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/govkit/breaker"
)

// DefaultClassify is the default classifier of a [Transport]:
//
//	err matching breaker.ErrOpen             Ignored
//	err != nil (no response, a failed body)  Timeout
//	resp == nil                              Timeout
//	429 Too Many Requests                    Failure
//	5xx (503 included)                       Failure
//	other 4xx                                Ignored
//	1xx, 2xx, 3xx                            Success
//	a status outside 100-599                 Failure
//
// Any error is a timeout: the request got no answer, or only part of one,
// whether the connection was refused or reset, a deadline passed, or the
// body broke off. Nothing answered, so it proves the downstream has not
// recovered, and a half-open probe fails. A 5xx is an answer: it counts
// as a failure, and a probe passes with it unless Policy.StrictProbes is
// set. A 429 counts too: the downstream is shedding load, and callers that
// keep sending make it worse. The other 4xx are about the request (bad
// input, a missing resource, no permission) and say nothing of the
// downstream's health, so they are not counted.
//
// An error matching breaker.ErrOpen is a refusal by a breaker in the base
// RoundTripper, another Transport say: the request never reached the
// downstream, and that breaker already judges it. Counted, an inner
// breaker that opened would trip this one, which would then refuse
// requests the inner one does not guard.
//
// The caller's own cancellation never reaches the classifier; see
// [WithClassifier].
func DefaultClassify(resp *http.Response, err error) breaker.Outcome {
	switch {
	case err != nil && errors.Is(err, breaker.ErrOpen):
		return breaker.Ignored
	case err != nil, resp == nil:
		return breaker.Timeout
	case resp.StatusCode == http.StatusTooManyRequests:
		return breaker.Failure
	case resp.StatusCode >= 100 && resp.StatusCode < 400:
		return breaker.Success
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return breaker.Ignored
	}
	return breaker.Failure
}

// report passes an outcome the Transport has already decided to the
// breaker. breaker.Mark puts it ahead of whatever classifier the group has,
// and the error is a fresh one that wraps nothing, so the message says
// what happened without handing any cause to code that inspects it.
func report(done func(error), o breaker.Outcome, resp *http.Response, err error) {
	if o == breaker.Success {
		done(nil)
		return
	}
	done(breaker.Mark(errors.New(describe(resp, err)), o))
}

// describe says what happened, for group classifiers and debuggers; it is
// built only for calls that did not succeed.
func describe(resp *http.Response, err error) string {
	switch {
	case err != nil:
		return "breakerhttp: " + err.Error()
	case resp == nil:
		return "breakerhttp: no response"
	}
	return "breakerhttp: status " + strconv.Itoa(resp.StatusCode)
}
