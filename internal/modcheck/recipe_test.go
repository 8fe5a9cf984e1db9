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

// TestConsumerRecipe builds a consumer's module from the README's install
// section as it is written: a checkout where the README's `git clone` puts
// it, then either the README's go.work beside the consumer's go.mod, or the
// README's require and replace lines in that go.mod with no workspace.
// Each recipe must build a package that imports the modules it names, and
// the go.work one must run the commands the README runs from the
// consumer's module. Nothing is fetched: GOPROXY=off, and the third-party
// modules come from the module cache the repository's own build filled.
func TestConsumerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two consumer modules")
	}
	install := readmeSection(t, "Install")
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)

	clone := ""
	for _, b := range install.blocks {
		for _, line := range b.lines {
			if words := strings.Fields(line); len(words) == 4 && words[0] == "git" && words[1] == "clone" {
				clone = words[3]
			}
		}
	}
	require.NotEmpty(t, clone, "the install section clones the repository: git clone URL DIR")

	// consumer makes an empty module beside the checkout, as the README
	// lays them out, and returns its directory.
	consumer := func(t *testing.T) string {
		base := t.TempDir()
		dir := filepath.Join(base, "myservice")
		require.NoError(t, os.Mkdir(dir, 0o755))
		checkout := filepath.Join(dir, filepath.FromSlash(clone))
		require.NoError(t, os.MkdirAll(filepath.Dir(checkout), 0o755))
		require.NoError(t, os.Symlink(root, checkout))
		return dir
	}

	t.Run("go.work", func(t *testing.T) {
		t.Parallel()
		work := blockWith(t, install, "use (")
		goLine := strings.TrimSpace(strings.SplitN(work, "\n", 2)[0])
		require.True(t, strings.HasPrefix(goLine, "go 1."), "the go.work block starts with its go line, got %q", goLine)
		dir := consumer(t)
		writeFile(t, filepath.Join(dir, "go.work"), work)
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/myservice\n\n"+goLine+"\n")

		var used []string // module directories the go.work uses, relative to the consumer
		inUse := false
		for _, line := range strings.Split(work, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "use (":
				inUse = true
			case line == ")":
				inUse = false
			case inUse && line != "." && line != "" && !strings.HasPrefix(line, "//"):
				used = append(used, line)
			}
		}
		require.NotEmpty(t, used)
		var imports []string
		for _, u := range used {
			imports = append(imports, libraryPackages(t, filepath.Join(dir, filepath.FromSlash(u)))...)
		}
		writeConsumer(t, dir, imports)

		env := []string{"GOWORK=" + filepath.Join(dir, "go.work"), "GOFLAGS=-buildvcs=false"}

		// The commands, as the install section runs them from the
		// consumer's module: each is built with the consumer's package
		// (which compiles it), and the cheap one is run.
		build := []string{"build", "./..."}
		var cheap [][]string
		for _, b := range install.blocks {
			for _, line := range b.lines {
				words := shellWords(t, line)
				if len(words) < 3 || words[0] != "go" || words[1] != "run" {
					continue
				}
				build = append(build, words[2])
				if len(words) == 4 && words[3] == "-list" {
					cheap = append(cheap, words[1:])
				}
			}
		}
		require.Greater(t, len(build), 2, "the install section runs the commands from the consumer's module")
		goIn(t, dir, env, build...)
		var ran bool
		for _, args := range cheap {
			out := goIn(t, dir, env, args...)
			assert.Contains(t, out, "seeds000", "go %s lists the shipped scenarios", strings.Join(args, " "))
			ran = true
		}
		assert.True(t, ran, "the install section runs a command from the consumer's module")
	})

	t.Run("replace", func(t *testing.T) {
		t.Parallel()
		lines := blockWith(t, install, "require (")
		require.Contains(t, lines, "replace (", "the go.mod recipe replaces the modules it requires")
		dir := consumer(t)
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/myservice\n\ngo 1.26.0\n\n"+lines)

		var imports []string
		inRequire := false
		for _, line := range strings.Split(lines, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "require (":
				inRequire = true
			case line == ")":
				inRequire = false
			case inRequire && line != "":
				path := strings.Fields(line)[0]
				rel := strings.TrimPrefix(strings.TrimPrefix(path, "github.com/govkit/breaker"), "/")
				imports = append(imports, libraryPackages(t, filepath.Join(root, filepath.FromSlash(rel)))...)
			}
		}
		require.NotEmpty(t, imports)
		writeConsumer(t, dir, imports)
		// -mod=mod lets the build add the third-party requirements, as the
		// README's `go mod tidy` does.
		goIn(t, dir, []string{"GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false"}, "build", "./...")
	})
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

// blockWith returns the one fenced block of the section with a line that
// reads want.
func blockWith(t *testing.T, s page, want string) string {
	t.Helper()
	var found []string
	for _, b := range s.blocks {
		for _, line := range b.lines {
			if strings.TrimSpace(line) == want {
				found = append(found, strings.Join(b.lines, "\n")+"\n")
				break
			}
		}
	}
	require.Len(t, found, 1, "one block of the install section has a line %q", want)
	return found[0]
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

// goIn runs the go command in dir with env added and returns its output;
// it fails the test with that output on an error. Modules come from the
// module cache only (GOPROXY=off, no checksum database): when one is
// missing there, as on a machine that has not built the repository, the
// command is tried again with the proxy that `go env` names.
func goIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	run := func(proxy string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		cmd.Env = append(cmd.Env, "GOPROXY="+proxy, "GOSUMDB=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("off")
	if err != nil && strings.Contains(out, "disabled by GOPROXY=off") {
		proxy, perr := goEnv("GOPROXY")
		require.NoError(t, perr)
		t.Logf("go %s: a module is missing from the module cache; trying again with GOPROXY=%s:\n%s", strings.Join(args, " "), proxy, out)
		out, err = run(proxy)
	}
	require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), dir, out)
	return out
}
