package testutil

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RunCommand runs a command's run function (main's body, with its
// arguments and output passed in) with args, and returns the exit code it
// returned and what it wrote to standard output and standard error.
func RunCommand(t testing.TB, run func(args []string, stdout, stderr io.Writer) int, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// WriteFile writes content to a file called name in a directory of the
// test's own, removed when the test ends, and returns the file's path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// Golden compares got with the golden file at path, or, if update is
// true, writes got to it. A test binary defines the -update flag that
// update comes from; the failure message names it.
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test -update writes it")
	assert.Equal(t, string(want), got, "differs from %s (go test -update rewrites it after review)", path)
}

// FirstLine is the first line of a command's error output: its own
// message, before any usage text that would name every flag.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
