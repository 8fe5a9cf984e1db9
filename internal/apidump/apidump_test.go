package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestGoldenFiles fails when the exported API of a package differs from
// its file in api/, so that no change to the API reaches the main branch
// without a diff of the golden files for review.
func TestGoldenFiles(t *testing.T) {
	root, err := findRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := filepath.Glob(filepath.Join(root, apiDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]bool{}
	for _, name := range checked {
		stale[filepath.Base(name)] = true
	}
	for _, p := range pkgs {
		name := apiDir + "/" + p.file()
		delete(stale, p.file())
		want, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s has no golden file %s", p.path, name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := unifiedDiff(name+" (checked in)", name+" (from the source)", string(want), p.golden()); d != "" {
			t.Errorf("the exported API of %s has changed:\n%s", p.path, d)
		}
	}
	for name := range stale {
		t.Errorf("%s/%s is the golden file of no package", apiDir, name)
	}
	if t.Failed() {
		t.Logf("if the change is intended, run from the repository root\n\t%s\nand commit the files in %s/ with it", regenerate, apiDir)
	}
}

// TestCollectFindsLibraryPackages checks the walk against the repository's
// layout: every library package of every module, and nothing that is a
// command, an example or internal.
func TestCollectFindsLibraryPackages(t *testing.T) {
	root, err := findRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pkgs {
		got = append(got, p.path)
	}
	for _, want := range []string{
		"github.com/govkit/breaker",
		"github.com/govkit/breaker/breakerhttp",
		"github.com/govkit/breaker/breakergrpc",
		"github.com/govkit/breaker/breakerotel",
		"github.com/govkit/breaker/breakerprom",
		"github.com/govkit/breaker/replay",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("collect found no package %s; found %q", want, got)
		}
	}
	for _, p := range got {
		for _, dir := range []string{"internal", "cmd", "examples", "benchmarks", "testdata"} {
			if strings.Contains(p+"/", "/"+dir+"/") {
				t.Errorf("collect returned %s, which is under %s/", p, dir)
			}
		}
	}
}

func TestImportPathFromNearestGoMod(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		name = filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m // the root\n\ngo 1.23\n")
	write("a/b/x.go", "package b\n")
	write("sub/go.mod", "module \"example.com/m/sub\"\n")
	write("sub/c/x.go", "package c\n")
	for dir, want := range map[string]string{
		".":     "example.com/m",
		"a/b":   "example.com/m/a/b",
		"sub":   "example.com/m/sub",
		"sub/c": "example.com/m/sub/c",
	} {
		got, err := importPath(root, filepath.Join(root, dir))
		if err != nil || got != want {
			t.Errorf("importPath(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
}
