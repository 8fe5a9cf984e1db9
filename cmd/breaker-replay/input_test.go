package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An input file is read no further than the largest input of its kind:
// a wrong path such as /dev/zero, or a runaway file, is refused with a
// message that names it, instead of being read into memory until the
// command dies. A trace is read line by line, each line bounded.
func TestInputFiles_AreReadNoFurtherThanTheirLimit(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	trace := writeFile(t, "calls.jsonl", `{"t":1764504000000000,"k":"a","d":1000,"o":"success"}`+"\n")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"scenario", []string{"-scenario", "/dev/zero"}, "-scenario: /dev/zero: more than 1048576 bytes (1 MiB), the largest accepted"},
		{"candidate policy", []string{"-scenario", "low-traffic", "-policy", "/dev/zero"}, "-policy: /dev/zero: more than 1048576 bytes (1 MiB), the largest accepted"},
		{"trace policy", []string{"-trace", trace, "-policy", "/dev/zero"}, "-policy: /dev/zero: more than 1048576 bytes (1 MiB), the largest accepted"},
		{"trace", []string{"-trace", "/dev/zero"}, "-trace /dev/zero: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, c.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, c.want)
		})
	}
}
