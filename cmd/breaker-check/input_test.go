package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An input file is read no further than the largest input of its kind:
// a wrong path such as /dev/zero, or a runaway file, is refused with a
// message that names it, instead of being read into memory until the
// command dies.
func TestInputFiles_AreReadNoFurtherThanTheirLimit(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	def := writeFile(t, "default.json", `{"default": {}}`)
	traffic := writeFile(t, "traffic.json", `{"keys": {"a": {"rate": 1}}}`)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"policy", []string{"-policy", "/dev/zero", "-traffic", traffic}, "-policy: /dev/zero: more than 1048576 bytes (1 MiB), the largest accepted"},
		{"traffic", []string{"-policy", def, "-traffic", "/dev/zero"}, "-traffic: /dev/zero: more than 67108864 bytes (64 MiB), the largest accepted"},
		{"snapshot", []string{"-snapshot", "/dev/zero"}, "-snapshot: /dev/zero: more than 67108864 bytes (64 MiB), the largest accepted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, c.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, c.want)
		})
	}

	// A policy of exactly the limit is read (and judged by its content).
	exact := writeFile(t, "exact.json", `{"default": {}}`+strings.Repeat(" ", 1<<20-len(`{"default": {}}`)))
	code, _, stderr := runCmd(t, "-policy", exact, "-traffic", traffic)
	require.NotEqual(t, exitUsage, code, stderr)
}

// A snapshot URL that answers more than the limit is refused, not cut at
// the limit and then reported as a snapshot that ends early.
func TestSnapshotURL_AnswerOverTheLimitIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A JSON object that is still open at the limit.
		if _, err := w.Write([]byte("{")); err != nil {
			return
		}
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for i := 0; i <= maxInput>>20; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	code, _, stderr := runCmd(t, "-snapshot", srv.URL+"/breakers")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-snapshot: "+srv.URL+"/breakers: more than 67108864 bytes (64 MiB), the largest accepted")
}
