// Command modcheck checks that every module of the repository can be
// fetched and built the way a consumer does it: with no workspace, its
// requirements on the other modules of the repository resolved from a
// module proxy at the version they name, not from a path.
//
// Run it from the repository root:
//
//	go run ./internal/modcheck            # every module
//	go run ./internal/modcheck breakergrpc breakerotel  # only these directories
//
// It reads go.work, and checks that:
//   - no module's go.mod has a replace directive (development goes through
//     go.work only, since consumers never see replace directives);
//   - every requirement on a module of the repository names the version
//     that go.work's replace lines map to the working tree;
//   - the README states each module's minimum Go version (its go line);
//   - every module other than the root builds and vets with GOWORK=off
//     against a file-based module proxy holding the working tree's modules
//     at that version (third-party modules come from the local module
//     cache first, then from GOPROXY), and that doing so leaves its go.mod
//     as it is (no missing requirement, no go line below a dependency's).
//
// Its tests check what the README and docs/ tell a consumer: that every
// relative link and every go command of the pages resolves, and that the
// README's recipe for using a checkout before the first tag builds.
//
// See RELEASING.md for how the versions are tagged.
package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type workFile struct {
	Use []struct {
		DiskPath string
	}
	Replace []replacement
}

type replacement struct {
	Old struct{ Path, Version string }
	New struct{ Path, Version string }
}

type modFile struct {
	Module  struct{ Path string }
	Go      string
	Require []struct {
		Path    string
		Version string
	}
	Replace []replacement
}

// module is one module of the workspace.
type module struct {
	dir  string // relative to the repository root, "." for the root
	file modFile
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(1)
	}
}

func run() error {
	var work workFile
	if err := goJSON(".", &work, "work", "edit", "-json"); err != nil {
		return fmt.Errorf("reading go.work: %w", err)
	}
	var mods []module
	byPath := map[string]module{}
	for _, u := range work.Use {
		m := module{dir: filepath.Clean(u.DiskPath)}
		if err := goJSON(m.dir, &m.file, "mod", "edit", "-json"); err != nil {
			return fmt.Errorf("reading %s/go.mod: %w", m.dir, err)
		}
		mods = append(mods, m)
		byPath[m.file.Module.Path] = m
	}
	published := map[string]string{} // module path -> version go.work maps to the tree
	for _, r := range work.Replace {
		m, ok := byPath[r.Old.Path]
		if !ok {
			return fmt.Errorf("go.work replaces %s, which is not a module of the workspace", r.Old.Path)
		}
		if r.Old.Version == "" {
			return fmt.Errorf("go.work replaces %s at every version; name the version the modules require", r.Old.Path)
		}
		if filepath.Clean(r.New.Path) != m.dir {
			return fmt.Errorf("go.work maps %s %s to %s, but the module is in %s", r.Old.Path, r.Old.Version, r.New.Path, m.dir)
		}
		published[r.Old.Path] = r.Old.Version
	}

	var problems []string
	for _, m := range mods {
		for _, r := range m.file.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s: published go.mod files carry no replace directive (use go.work)", m.dir, r.Old.Path))
		}
		for _, req := range m.file.Require {
			if _, inRepo := byPath[req.Path]; !inRepo {
				continue
			}
			want, ok := published[req.Path]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, but go.work has no replace line for that version", m.dir, req.Path, req.Version))
			case req.Version != want:
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, but go.work maps %s to the tree", m.dir, req.Path, req.Version, want))
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	for _, m := range mods {
		if !statesGoVersion(string(readme), m.file.Module.Path, m.file.Go) {
			problems = append(problems, fmt.Sprintf("README.md: no line names `%s` with its minimum Go version %s (its go.mod's go line)", m.file.Module.Path, m.file.Go))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}

	tmp, err := os.MkdirTemp("", "modcheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxy := filepath.Join(tmp, "proxy")
	files, err := repoFiles()
	if err != nil {
		return err
	}
	var sums []string // go.sum lines of the published modules
	for path, version := range published {
		lines, err := publish(proxy, byPath[path], version, files)
		if err != nil {
			return fmt.Errorf("packing %s %s: %w", path, version, err)
		}
		sums = append(sums, lines...)
	}
	sort.Strings(sums)

	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	upstream, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=readonly -modcacherw",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOPROXY="+fileURL(proxy)+","+fileURL(filepath.Join(cache, "cache", "download"))+","+upstream,
		"GONOSUMDB=github.com/govkit/breaker",
	)
	failed := 0
	for _, m := range mods {
		if m.dir == "." || !selected(m.dir) {
			continue
		}
		start := time.Now()
		src := filepath.Join(tmp, "src", m.dir)
		if err := copyModule(src, m.dir, files, sums); err != nil {
			return err
		}
		var out bytes.Buffer
		err := runIn(src, env, &out, "build", "./...")
		if err == nil {
			err = runIn(src, env, &out, "vet", "./...")
		}
		if err == nil {
			err = sameFile(filepath.Join(m.dir, "go.mod"), filepath.Join(src, "go.mod"))
		}
		if err != nil {
			failed++
			fmt.Printf("FAIL %-45s go %-7s (%s)\n%s\n", m.file.Module.Path, m.file.Go, err, indent(out.String()))
			continue
		}
		fmt.Printf("ok   %-45s go %-7s %.1fs\n", m.file.Module.Path, m.file.Go, time.Since(start).Seconds())
	}
	if failed > 0 {
		return fmt.Errorf("%d module(s) do not build against published versions", failed)
	}
	return nil
}

// selected reports whether the command line names the module's directory,
// or names none: `go run ./internal/modcheck breakergrpc` builds breakergrpc/ alone.
func selected(dir string) bool {
	if len(os.Args) < 2 {
		return true
	}
	for _, a := range os.Args[1:] {
		if filepath.Clean(a) == dir {
			return true
		}
	}
	return false
}

// statesGoVersion reports whether some line of the README names the module
// in backquotes together with its Go version ("1.23" for "go 1.23.0" too).
func statesGoVersion(readme, path, goVersion string) bool {
	short := strings.TrimSuffix(goVersion, ".0")
	for _, line := range strings.Split(readme, "\n") {
		if strings.Contains(line, "`"+path+"`") && (strings.Contains(line, " "+goVersion) || strings.Contains(line, " "+short+" ")) {
			return true
		}
	}
	return false
}

// repoFiles lists the files a clone has (tracked, or new and not ignored),
// relative to the repository root.
func repoFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the tree, or a symlink (not allowed in a module)
		}
		files = append(files, filepath.ToSlash(f))
	}
	sort.Strings(files)
	return files, nil
}

// moduleFiles are the files of the module in dir: those under it and not
// under a nested module.
func moduleFiles(dir string, files []string) []string {
	var nested []string
	prefix := ""
	if dir != "." {
		prefix = filepath.ToSlash(dir) + "/"
	}
	for _, f := range files {
		if strings.HasPrefix(f, prefix) && strings.HasSuffix(f, "/go.mod") && f != prefix+"go.mod" {
			nested = append(nested, strings.TrimSuffix(f, "go.mod"))
		}
	}
	var out []string
next:
	for _, f := range files {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		for _, n := range nested {
			if strings.HasPrefix(f, n) {
				continue next
			}
		}
		out = append(out, strings.TrimPrefix(f, prefix))
	}
	return out
}

// publish writes the module in m.dir to a file-based proxy at version,
// and returns the go.sum lines a consumer would record for it.
func publish(proxy string, m module, version string, files []string) ([]string, error) {
	dir := filepath.Join(proxy, filepath.FromSlash(m.file.Module.Path), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return nil, err
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o644); err != nil {
		return nil, err
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		return nil, err
	}
	zw := zip.NewWriter(zf)
	for _, rel := range moduleFiles(m.dir, files) {
		w, err := zw.Create(m.file.Module.Path + "@" + version + "/" + rel)
		if err != nil {
			return nil, err
		}
		f, err := os.Open(filepath.Join(m.dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := zf.Close(); err != nil {
		return nil, err
	}
	prefix := m.file.Module.Path + "@" + version + "/"
	contents := map[string][]byte{}
	for _, rel := range moduleFiles(m.dir, files) {
		data, err := os.ReadFile(filepath.Join(m.dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		contents[prefix+rel] = data
	}
	return []string{
		m.file.Module.Path + " " + version + " " + hash1(contents),
		m.file.Module.Path + " " + version + "/go.mod " + hash1(map[string][]byte{"go.mod": gomod}),
	}, nil
}

// hash1 is the "h1:" hash go.sum records: the SHA-256 of a listing of the
// files' SHA-256 sums and names, sorted by name.
func hash1(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	listing := sha256.New()
	for _, name := range names {
		fmt.Fprintf(listing, "%x  %s\n", sha256.Sum256(files[name]), name)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(listing.Sum(nil))
}

// copyModule copies the module in dir to dst, as a consumer's checkout of
// it alone would be, and adds to its go.sum the lines for the repository's
// modules that releasing records (see RELEASING.md); every other line must
// already be there.
func copyModule(dst, dir string, files []string, sums []string) error {
	for _, rel := range moduleFiles(dir, files) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if rel == "go.sum" {
			data = append(data, []byte(strings.Join(sums, "\n")+"\n")...)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sameFile reports an error when building changed the module's go.mod:
// its requirements or go line are not what a consumer's build needs.
func sameFile(orig, built string) error {
	a, err := os.ReadFile(orig)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(built)
	if err != nil {
		return err
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("building without the workspace changed go.mod (a missing requirement, or a go line lower than a dependency's); it became:\n%s", b)
	}
	return nil
}

func goJSON(dir string, v any, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	return strings.TrimSpace(string(out)), err
}

func runIn(dir string, env []string, out io.Writer, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func fileURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return "file://" + filepath.ToSlash(abs)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
