package breakerprom

import (
	"os"
	"os/exec"
	"testing"
)

// needTool returns the path of an external program a test runs, such as
// promtool or prometheus. Without it the test is skipped, saying what to
// install, except under CI=true (set by .ci/run, which installs the
// tools), where a missing program fails the test: CI must not pass by
// skipping what it exists to run.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not on PATH, and CI=true: install Debian's %s package (.ci/run does)", name, pkg)
	}
	t.Skipf("skipped: %s is not on PATH; install it (Debian: apt-get install %s) to run this test", name, pkg)
	return ""
}

// runTool runs a program and fails the test, with its output, if it
// fails.
func runTool(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", path, args, err, out)
	}
	return string(out)
}
