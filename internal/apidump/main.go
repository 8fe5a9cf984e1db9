// Command apidump records the exported API of every library package in the
// repository as sorted text, one declaration a line, so that every change to
// the API is a visible diff of the files in api/.
//
// From anywhere in the repository:
//
//	go run ./internal/apidump      # print the API of every package
//	go run ./internal/apidump -w   # rewrite api/*.txt to match
//
// The test beside this file regenerates the text and fails when it differs
// from api/, so a change to the API cannot pass CI unnoticed.
//
// A library package is a directory with non-test .go files whose package is
// not main, outside internal/, cmd/, examples/, benchmarks/ and testdata/.
// Its import path is the module path in the nearest go.mod plus the
// directory's path below it, so a directory that becomes a module of its
// own keeps its path and its golden file.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// regenerate is the command that rewrites the golden files, quoted in
// their header and in the test's failure message.
const regenerate = "go run ./internal/apidump -w"

// apiDir is the golden files' directory, relative to the repository root.
const apiDir = "api"

// skipped directories hold no library packages.
var skipped = map[string]bool{
	"internal": true, "cmd": true, "examples": true, "benchmarks": true,
	"testdata": true, "vendor": true,
}

func main() {
	write := flag.Bool("w", false, "rewrite the golden files in "+apiDir+"/ instead of printing")
	flag.Parse()
	if err := run(*write); err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
}

func run(write bool) error {
	root, err := findRoot(".")
	if err != nil {
		return err
	}
	pkgs, err := collect(root)
	if err != nil {
		return err
	}
	if !write {
		for i, p := range pkgs {
			if i > 0 {
				fmt.Println()
			}
			fmt.Print(p.body())
		}
		return nil
	}
	return writeGolden(root, pkgs)
}

// A pkg is the exported API of one package.
type pkg struct {
	path  string   // import path
	name  string   // package name
	lines []string // sorted declarations
}

// file is the golden file's name: the import path with / replaced by _.
// One file per package rather than per module keeps each diff to the
// package that changed, and keeps the name when a directory becomes a
// module of its own.
func (p pkg) file() string {
	return strings.ReplaceAll(p.path, "/", "_") + ".txt"
}

func (p pkg) body() string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s // import %q\n", p.name, p.path)
	for _, l := range p.lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// golden is the content of the package's golden file.
func (p pkg) golden() string {
	return "# Exported API of " + p.path + ", one declaration a line.\n" +
		"# Generated: do not edit. From the repository root, regenerate with\n" +
		"#\t" + regenerate + "\n" +
		p.body()
}

// findRoot walks up from dir to the repository root: the nearest directory
// with a go.work or, failing that, the outermost directory with a go.mod.
func findRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root := ""
	for {
		if exists(filepath.Join(dir, "go.work")) {
			return dir, nil
		}
		if exists(filepath.Join(dir, "go.mod")) {
			root = dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if root == "" {
		return "", errors.New("no go.work or go.mod above the working directory")
	}
	return root, nil
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// collect returns the API of every library package under root, sorted by
// import path.
func collect(root string) ([]pkg, error) {
	var pkgs []pkg
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if dir != root && (skipped[name] || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		p, ok, err := load(root, dir)
		if ok {
			pkgs = append(pkgs, p)
		}
		return err
	})
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	return pkgs, err
}

// load parses the non-test .go files in dir; ok is false when there are
// none or the package is main.
func load(root, dir string) (p pkg, ok bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return pkg{}, false, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return pkg{}, false, err
		}
		files = append(files, f)
	}
	if len(files) == 0 || files[0].Name.Name == "main" {
		return pkg{}, false, nil
	}
	imp, err := importPath(root, dir)
	if err != nil {
		return pkg{}, false, err
	}
	return pkg{path: imp, name: files[0].Name.Name, lines: declarations(files)}, true, nil
}

// importPath is the module path of the nearest go.mod at or above dir
// (but not above root) joined with dir's path below that go.mod.
func importPath(root, dir string) (string, error) {
	for mod := dir; ; mod = filepath.Dir(mod) {
		data, err := os.ReadFile(filepath.Join(mod, "go.mod"))
		if err == nil {
			modPath, err := modulePath(data)
			if err != nil {
				return "", fmt.Errorf("%s: %w", filepath.Join(mod, "go.mod"), err)
			}
			rel, err := filepath.Rel(mod, dir)
			if err != nil {
				return "", err
			}
			return path.Join(modPath, filepath.ToSlash(rel)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if mod == root || filepath.Dir(mod) == mod {
			return "", fmt.Errorf("%s: no go.mod at or above it", dir)
		}
	}
}

// modulePath returns the path in a go.mod's module directive.
func modulePath(gomod []byte) (string, error) {
	for _, line := range strings.Split(string(gomod), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) != 2 || fields[0] != "module" {
			continue
		}
		if p, err := strconv.Unquote(fields[1]); err == nil {
			return p, nil
		}
		return fields[1], nil
	}
	return "", errors.New("no module directive")
}

// writeGolden rewrites the golden files that changed and removes those of
// packages that no longer exist.
func writeGolden(root string, pkgs []pkg) error {
	dir := filepath.Join(root, apiDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, p := range pkgs {
		keep[p.file()] = true
		name := filepath.Join(dir, p.file())
		if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, []byte(p.golden())) {
			continue
		}
		if err := os.WriteFile(name, []byte(p.golden()), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", filepath.Join(apiDir, p.file()))
	}
	stale, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return err
	}
	for _, name := range stale {
		if !keep[filepath.Base(name)] {
			if err := os.Remove(name); err != nil {
				return err
			}
			fmt.Println("removed", filepath.Join(apiDir, filepath.Base(name)))
		}
	}
	return nil
}
