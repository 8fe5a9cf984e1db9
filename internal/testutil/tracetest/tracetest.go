// Package tracetest is a calltrace.Recorder writing to memory, read back
// through calltrace's Decoder, for the tests of the integrations that
// record. It is a package of its own, apart from testutil, which
// calltrace's own tests import.
package tracetest

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/govkit/breaker/calltrace"
	"github.com/stretchr/testify/require"
)

// Recording is a recorder writing to memory until the test reads it.
type Recording struct {
	t   testing.TB
	Rec *calltrace.Recorder
	buf bytes.Buffer // written by the recorder's goroutine until Close
}

// New returns a recording that is closed when the test ends.
func New(t testing.TB) *Recording {
	t.Helper()
	r := &Recording{t: t}
	rec, err := calltrace.NewRecorder(&r.buf, calltrace.Options{})
	require.NoError(t, err)
	r.Rec = rec
	t.Cleanup(func() { rec.Close() })
	return r
}

// Records closes the recorder and returns the trace it wrote, decoded;
// the test fails if a line does not decode or a record was dropped.
func (r *Recording) Records() []calltrace.Record {
	r.t.Helper()
	require.NoError(r.t, r.Rec.Close())
	require.Zero(r.t, r.Rec.Dropped(), "records dropped")
	dec := calltrace.NewDecoder(bytes.NewReader(r.buf.Bytes()))
	var out []calltrace.Record
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(r.t, err)
		out = append(out, rec)
	}
}

// Time is t as a trace holds it: Unix microseconds, in UTC.
func Time(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }
