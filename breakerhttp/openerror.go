package breakerhttp

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/govkit/breaker"
)

// WriteOpenError answers 503 Service Unavailable with a Retry-After header
// if err matches [breaker.ErrOpen], and reports whether it did; otherwise
// it writes nothing. Use it in a handler that proxies to a guarded
// downstream:
//
//	resp, err := client.Do(outbound)
//	if breakerhttp.WriteOpenError(w, err) {
//		return
//	}
//
// Retry-After is the time until the breaker lets probes through, in whole
// seconds rounded up, and at least 1: a client that retries at once would
// only be refused again, and 0 would invite exactly that. It is 1 when the
// time is not known (half-open, forced open).
//
// The body is a short fixed text. The refusal's details (the breaker's
// name, the rule that tripped, its window) are for the server's logs, not
// for clients: they name internal services.
func WriteOpenError(w http.ResponseWriter, err error) bool {
	if err == nil || !errors.Is(err, breaker.ErrOpen) {
		return false
	}
	wait := time.Duration(0)
	var oe *breaker.OpenError
	if errors.As(err, &oe) {
		wait = oe.RetryAfter()
	}
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(wait), 10))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte("service unavailable: a downstream is failing, retry later\n"))
	return true
}

func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
