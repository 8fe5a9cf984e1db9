package testutil

import (
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fdGrace is how long the check of NoLeaks waits for the descriptor count
// to come back down: the runtime may hold a descriptor a little longer
// than the code that closed it.
const fdGrace = 2 * time.Second

// NoLeaks takes stock of the goroutines and the open file descriptors and
// returns the check for the end of an experiment, to call once the
// experiment has closed its connections and stopped its servers. The
// check fails t if a goroutine started since is still running (goleak) or
// if more descriptors are open than before. Where the process's
// descriptors cannot be counted (see OpenFDs), only goroutines are
// checked.
func NoLeaks(t testing.TB) func() {
	t.Helper()
	return noLeaksWithin(t, fdGrace)
}

func noLeaksWithin(t testing.TB, grace time.Duration) func() {
	t.Helper()
	// The network poller opens its own descriptors on first use; make sure
	// they exist before counting.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.Close()
	before := OpenFDs(t)
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, ignore)
		if before < 0 {
			return
		}
		deadline := time.Now().Add(grace)
		for {
			n := OpenFDs(t)
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("file descriptors: %d before the experiment, %d after", before, n)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// OpenFDs counts the process's open file descriptors, or returns -1 where
// /proc/self/fd does not exist (any system but Linux).
func OpenFDs(t testing.TB) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return -1
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	require.NoError(t, err)
	return len(names) - 1 // the directory itself was open while it was read
}
