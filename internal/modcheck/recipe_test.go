package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsumerRecipe follows the README's install section as a new user
// pastes it: a checkout where its `git clone` puts it, a new module made by
// `go mod init` (so its go line is the toolchain's, newer than the
// repository's), a package importing every library package of the modules
// the recipe names, and then each command of the section's sh blocks, in
// order, as written. Afterwards:
//   - `go mod tidy` has required each module of the repository the package
//     imports directly, not as indirect, with the third-party modules
//     they need, so that the build works with no workspace and
//     `-mod=readonly`, and a second tidy changes nothing;
//   - the commands run as tools (`go tool breaker-replay -list` lists the
//     shipped scenarios; the others are built);
//   - with the `go.work` the section's `go work init` writes, the module
//     still builds, and `go mod tidy` there works and leaves go.mod as it
//     was.
//
// Modules come from the module cache first (GOPROXY=off); one missing
// there is fetched from the proxy `go env` names (`go mod tidy` needs the
// test dependencies of grpc-go, which a build does not download). Without
// a network, the test skips saying so, except in CI (CI=true), where it
// fails.
func TestConsumerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a consumer module")
	}
	install := readmeSection(t, "Install")
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)

	clone := ""
	var scripts [][]string // the sh blocks' command lines, continuations joined
	for _, b := range install.blocks {
		for _, line := range b.lines {
			if words := strings.Fields(line); len(words) == 4 && words[0] == "git" && words[1] == "clone" {
				clone = words[3]
			}
		}
		if b.info == "sh" {
			scripts = append(scripts, commandLines(b.lines))
		}
	}
	require.NotEmpty(t, clone, "the install section clones the repository: git clone URL DIR")
	require.Len(t, scripts, 3, "the install section's sh blocks: the replace lines, the tools, the go.work")
	setup, tools, work := scripts[0], scripts[1], scripts[2]

	base := t.TempDir()
	dir := filepath.Join(base, "myservice")
	require.NoError(t, os.Mkdir(dir, 0o755))
	checkout := filepath.Join(dir, filepath.FromSlash(clone))
	require.NoError(t, os.MkdirAll(filepath.Dir(checkout), 0o755))
	require.NoError(t, os.Symlink(root, checkout))

	r := &recipeRunner{t: t, dir: dir}
	r.sh("go mod init example.com/myservice")
	var mine modFile
	require.NoError(t, goJSON(dir, &mine, "mod", "edit", "-json"))
	highest := highestGoLine(t, root)
	require.GreaterOrEqual(t, compareGo(mine.Go, highest), 0, "go mod init writes the toolchain's go line")
	if compareGo(mine.Go, highest) == 0 {
		t.Logf("the consumer's go line %s equals the repository's highest: the recipe is not tried against a newer one", mine.Go)
	} else {
		t.Logf("the consumer's go line is %s, the repository's highest %s", mine.Go, highest)
	}

	// The modules the recipe points at the checkout, and their packages.
	replaced := map[string]string{} // module path -> directory, relative to the consumer
	for _, line := range setup {
		for _, w := range shellWords(t, line) {
			if arg, ok := strings.CutPrefix(w, "-replace="); ok {
				old, dest, ok := strings.Cut(arg, "=")
				require.True(t, ok, "-replace=old=new: %s", w)
				require.NotContains(t, old, "@", "the replace lines cover every version, so a module required at any version is found: %s", w)
				replaced[old] = dest
			}
		}
	}
	mods := workModules(t)
	for path, rel := range mods {
		if strings.HasPrefix(rel, "examples") || rel == "benchmarks" {
			continue // not for import
		}
		assert.Contains(t, replaced, path, "the recipe points module %s at the checkout", path)
	}
	var imports []string
	imported := map[string]bool{} // modules whose packages the consumer imports
	for path, dest := range replaced {
		pkgs := libraryPackages(t, filepath.Join(dir, filepath.FromSlash(dest)))
		if len(pkgs) > 0 {
			imported[path] = true
		}
		imports = append(imports, pkgs...)
	}
	sort.Strings(imports)
	require.NotEmpty(t, imports)
	writeConsumer(t, dir, imports)

	for _, line := range setup {
		r.sh(line)
	}
	if t.Skipped() {
		return
	}
	var tidied modFileFull
	require.NoError(t, goJSON(dir, &tidied, "mod", "edit", "-json"))
	direct := map[string]bool{}
	for _, req := range tidied.Require {
		if !req.Indirect {
			direct[req.Path] = true
		}
	}
	for path := range imported {
		assert.True(t, direct[path], "go mod tidy requires %s, whose packages the consumer imports, directly", path)
	}
	required := map[string]bool{}
	for _, req := range tidied.Require {
		required[req.Path] = true
	}
	for _, third := range []string{"google.golang.org/grpc", "github.com/prometheus/client_golang"} {
		assert.True(t, required[third], "go mod tidy requires %s, which the integrations need", third)
	}
	r.goOff("build", "./...")
	before := readFile(t, filepath.Join(dir, "go.mod"))
	r.sh("go mod tidy")
	assert.Equal(t, before, readFile(t, filepath.Join(dir, "go.mod")), "a second go mod tidy changes nothing")

	// The commands, as tools.
	var ran bool
	for _, line := range tools {
		words := shellWords(t, line)
		if len(words) >= 3 && words[0] == "go" && words[1] == "tool" {
			if words[len(words)-1] == "-list" {
				out := r.sh(line)
				assert.Contains(t, out, "seeds000", "%s lists the shipped scenarios", line)
				ran = true
			} else {
				r.sh("go tool -n " + words[2]) // builds it
			}
			continue
		}
		r.sh(line)
	}
	assert.True(t, ran, "the install section runs go tool breaker-replay -list")
	var withTools modFileFull
	require.NoError(t, goJSON(dir, &withTools, "mod", "edit", "-json"))
	assert.Len(t, withTools.Tool, 2, "the commands are the module's tools")
	r.goOff("build", "./...")

	// The go.work, written by go work init.
	before = readFile(t, filepath.Join(dir, "go.mod"))
	for _, line := range work {
		require.True(t, strings.HasPrefix(line, "go work "), "the go.work block only runs go work: %s", line)
		r.sh(line)
	}
	require.FileExists(t, filepath.Join(dir, "go.work"))
	r.sh("go build ./...")
	r.sh("go mod tidy")
	assert.Equal(t, before, readFile(t, filepath.Join(dir, "go.mod")), "go mod tidy beside the go.work leaves go.mod as it was")
}

// recipeRunner runs the recipe's commands in a consumer's directory, in a
// shell environment like a new user's: no GOWORK or GOFLAGS of the test's
// own, the local toolchain, no checksum database.
type recipeRunner struct {
	t   *testing.T
	dir string
}

// sh runs one command line with sh and returns its output. The module
// cache is tried first (GOPROXY=off); a module missing there is fetched
// from the proxy that `go env` names. When that fails for want of a
// network, the test is skipped outside CI.
func (r *recipeRunner) sh(line string) string {
	r.t.Helper()
	if r.t.Skipped() {
		return ""
	}
	run := func(proxy string) (string, error) {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = r.dir
		cmd.Env = append(cleanEnv(), "GOPROXY="+proxy, "GOSUMDB=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("off")
	if err != nil && strings.Contains(out, "GOPROXY=off") {
		proxy, perr := goEnv("GOPROXY")
		require.NoError(r.t, perr)
		r.t.Logf("%s: a module is missing from the module cache; trying again with GOPROXY=%s", line, proxy)
		out, err = run(proxy)
		if err != nil && offline(out) {
			if os.Getenv("CI") == "true" {
				r.t.Fatalf("%s needs the module proxy, which cannot be reached:\n%s", line, out)
			}
			r.t.Skipf("%s needs the module proxy for third-party modules, and it cannot be reached (no network?); skipped outside CI:\n%s", line, out)
		}
	}
	require.NoError(r.t, err, "%s in %s:\n%s", line, r.dir, out)
	return out
}

// goOff runs a go command with no workspace and a read-only go.mod, as a
// container build of the module does.
func (r *recipeRunner) goOff(args ...string) {
	r.t.Helper()
	r.sh("GOWORK=off GOFLAGS=-mod=readonly go " + strings.Join(args, " "))
}

// cleanEnv is the test's environment without the go settings a test run
// may carry.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOWORK", "GOFLAGS", "GOPROXY", "GOSUMDB", "GOTOOLCHAIN":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// offline reports whether a go command's output says the network could
// not be reached.
func offline(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "network is unreachable", "i/o timeout", "connection refused", "TLS handshake timeout"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// commandLines splits a shell block into its command lines, a line ending
// in a backslash joined with the next.
func commandLines(lines []string) []string {
	var out []string
	cur := ""
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur += rest + " "
			continue
		}
		cur += line
		if strings.TrimSpace(cur) != "" && !strings.HasPrefix(cur, "#") {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

// modFileFull is the part of `go mod edit -json` the recipe's checks read.
type modFileFull struct {
	Go      string
	Require []struct {
		Path     string
		Version  string
		Indirect bool
	}
	Tool []struct{ Path string }
}

// highestGoLine is the highest go line of the modules of go.work.
func highestGoLine(t *testing.T, root string) string {
	t.Helper()
	high := ""
	for _, rel := range workModules(t) {
		var m modFile
		require.NoError(t, goJSON(filepath.Join(root, rel), &m, "mod", "edit", "-json"))
		if high == "" || compareGo(m.Go, high) > 0 {
			high = m.Go
		}
	}
	return high
}

// compareGo compares two go lines ("1.23", "1.26.0") by their numbers.
func compareGo(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			fmt.Sscan(as[i], &x)
		}
		if i < len(bs) {
			fmt.Sscan(bs[i], &y)
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// readmeSection is the README's section under the heading "## name", up to
// the next heading of that level.
func readmeSection(t *testing.T, name string) page {
	t.Helper()
	p := readPage(t, "README.md")
	start, end := -1, len(p.prose)
	for i, line := range p.prose {
		if line == "## "+name {
			start = i
		} else if start >= 0 && strings.HasPrefix(line, "## ") {
			end = i
			break
		}
	}
	require.GreaterOrEqual(t, start, 0, "README.md has a section %q", name)
	var s page
	for _, b := range p.blocks {
		if b.line-1 > start && b.line-1 < end {
			s.blocks = append(s.blocks, b)
		}
	}
	s.prose = p.prose[start:end]
	return s
}

// libraryPackages lists the import paths of the packages a consumer may
// import from the module in dir: its packages other than main, internal,
// examples, testdata and nested modules.
func libraryPackages(t *testing.T, dir string) []string {
	t.Helper()
	var m modFile
	require.NoError(t, goJSON(dir, &m, "mod", "edit", "-json"), "reading the go.mod in %s", dir)
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if !d.IsDir() {
			return nil
		}
		if rel != "." {
			base := d.Name()
			if base == "internal" || base == "testdata" || base == "examples" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if name := packageName(path); name != "" && name != "main" {
			p := m.Module.Path
			if rel != "." {
				p += "/" + rel
			}
			out = append(out, p)
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// packageName is the package clause of the first non-test .go file in
// dir, or "" when there is none.
func packageName(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "package "); ok {
				return strings.TrimSpace(name)
			}
		}
	}
	return ""
}

// writeConsumer writes the consumer's one package, which imports each
// package given.
func writeConsumer(t *testing.T, dir string, imports []string) {
	t.Helper()
	var src bytes.Buffer
	src.WriteString("// Package myservice uses the breaker's packages as a consumer does.\npackage myservice\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n")
	writeFile(t, filepath.Join(dir, "myservice.go"), src.String())
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
