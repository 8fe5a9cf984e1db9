package testutil

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// RefusedAddr returns a loopback address nothing listens on: a port that
// was just bound and released.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
