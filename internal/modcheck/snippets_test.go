package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocSnippets compiles every ```go block of README.md and docs/*.md
// against the workspace's modules, so that a renamed field or function
// breaks the test, not a reader's paste. The convention:
//
//   - A block that starts with a package clause is a whole file and is
//     compiled as it is, in a package of its own.
//   - A block of declarations (func, type, var, const at the top) is a
//     file without its package clause and imports.
//   - Any other block is a fragment of a function body. It is wrapped in a
//     function that returns an error if the fragment returns a value (and
//     returns nothing otherwise), and every variable the fragment declares
//     at its top level is marked used, since a fragment shows a step, not
//     what the program does next.
//   - Imports are added for the package names a block uses, from
//     snippetImports (`breaker.`, `http.`, `grpc.` ...).
//   - The reader's own values that a fragment uses without declaring
//     (ctx, g, b, a client, a callback) are declared, with their types, in
//     snippetPrelude for every page and in pagePrelude for one page.
//   - A function body written `{ ... }` stands for the reader's code and is
//     compiled as `{ panic("elided") }`.
//
// Compiler errors name the page and line of the block (a //line
// directive precedes each fragment).
func TestDocSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the docs' snippets")
	}
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	tmp := t.TempDir()
	mod := filepath.Join(tmp, "docsnippets")
	require.NoError(t, os.Mkdir(mod, 0o755))
	writeFile(t, filepath.Join(mod, "go.mod"), "module docsnippets\n\ngo "+highestGoLine(t, root)+"\n")
	writeFile(t, filepath.Join(tmp, "go.work"), snippetWork(t, root, mod))

	count := 0
	for _, rel := range docFiles(t) {
		p := readPage(t, rel)
		pkg := pagePackage(rel)
		wrote := false
		for _, b := range p.blocks {
			if b.info != "go" {
				continue
			}
			count++
			src, kind, err := wrapSnippet(rel, b)
			if err != nil {
				t.Errorf("%s:%d: %v", rel, b.line, err)
				continue
			}
			dir := filepath.Join(mod, pkg)
			name := fmt.Sprintf("snippet_%d.go", b.line)
			if kind == "file" {
				dir = filepath.Join(mod, fmt.Sprintf("%s_%d", pkg, b.line))
				name = "main.go"
			} else {
				wrote = true
			}
			require.NoError(t, os.MkdirAll(dir, 0o755))
			writeFile(t, filepath.Join(dir, name), src)
		}
		if wrote {
			for name, src := range preludeFiles(pkg, rel) {
				writeFile(t, filepath.Join(mod, pkg, name), src)
			}
		}
	}
	require.Greater(t, count, 20, "the docs' Go blocks were found")

	build := func(proxy string) ([]byte, error) {
		cmd := exec.Command("go", "build", "-gcflags=-e", "./...")
		cmd.Dir = mod
		cmd.Env = append(cleanEnv(), "GOWORK="+filepath.Join(tmp, "go.work"), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "GOPROXY="+proxy)
		return cmd.CombinedOutput()
	}
	out, err := build("off")
	if err != nil && strings.Contains(string(out), "GOPROXY=off") {
		// A module the workspace needs is not in the module cache yet.
		proxy, perr := goEnv("GOPROXY")
		require.NoError(t, perr)
		out, err = build(proxy)
	}
	if err != nil {
		t.Errorf("a Go block of the docs does not compile (%d blocks; the convention is at the top of snippets_test.go):\n%s", count, out)
	}
}

// snippetWork is a go.work using the module of the snippets and every
// module of the repository's go.work, with its replace lines.
func snippetWork(t *testing.T, root, mod string) string {
	t.Helper()
	var work workFile
	require.NoError(t, goJSON(root, &work, "work", "edit", "-json"))
	var s strings.Builder
	fmt.Fprintf(&s, "go %s\n\nuse (\n\t%s\n", highestGoLine(t, root), mod)
	for _, u := range work.Use {
		fmt.Fprintf(&s, "\t%s\n", filepath.Join(root, u.DiskPath))
	}
	s.WriteString(")\n\nreplace (\n")
	for _, r := range work.Replace {
		fmt.Fprintf(&s, "\t%s %s => %s\n", r.Old.Path, r.Old.Version, filepath.Join(root, r.New.Path))
	}
	s.WriteString(")\n")
	return s.String()
}

// pagePackage names the package of a page's fragments: "readme",
// "docs_groups", ...
func pagePackage(rel string) string {
	name := strings.TrimSuffix(filepath.ToSlash(rel), ".md")
	name = strings.ToLower(strings.NewReplacer("/", "_", "-", "_", ".", "_").Replace(name))
	return name
}

// snippetImports maps the package names the docs use to their paths.
var snippetImports = map[string]string{
	"bytes":       "bytes",
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"io":          "io",
	"json":        "encoding/json",
	"http":        "net/http",
	"os":          "os",
	"slog":        "log/slog",
	"strings":     "strings",
	"testing":     "testing",
	"time":        "time",
	"breaker":     "github.com/govkit/breaker",
	"breakerhttp": "github.com/govkit/breaker/breakerhttp",
	"calltrace":   "github.com/govkit/breaker/calltrace",
	"candidate":   "github.com/govkit/breaker/candidate",
	"check":       "github.com/govkit/breaker/check",
	"live":        "github.com/govkit/breaker/live",
	"ops":         "github.com/govkit/breaker/ops",
	"breakergrpc": "github.com/govkit/breaker/breakergrpc",
	"breakerprom": "github.com/govkit/breaker/breakerprom",
	"breakerotel": "github.com/govkit/breaker/breakerotel",
	"breakeretcd": "github.com/govkit/breaker/breakeretcd",
	"replay":      "github.com/govkit/breaker/replay",
	"clock":       "github.com/benbjohnson/clock",
	"grpc":        "google.golang.org/grpc",
	"codes":       "google.golang.org/grpc/codes",
	"status":      "google.golang.org/grpc/status",
	"insecure":    "google.golang.org/grpc/credentials/insecure",
	"healthpb":    "google.golang.org/grpc/health/grpc_health_v1",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
	"promhttp":    "github.com/prometheus/client_golang/prometheus/promhttp",
	"otel":        "go.opentelemetry.io/otel",
	"clientv3":    "go.etcd.io/etcd/client/v3",
}

// snippetPrelude declares the reader's values that fragments on any page
// use without declaring them.
const snippetPrelude = `
import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"github.com/govkit/breaker/live"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
)

var (
	ctx          context.Context
	b            *breaker.Breaker
	g, group     *breaker.Group
	reg          *prometheus.Registry
	mux          *http.ServeMux
	target, addr string
	creds        credentials.TransportCredentials
	t            *testing.T
	f            *live.Follower
	src          live.Source
	file         *os.File
	rec          *calltrace.Recorder
)
`

// pagePrelude declares, for one page, what its fragments use without
// declaring it and no other page needs (or needs with another type).
var pagePrelude = map[string]string{
	"README.md": `
import "context"

var getStock func(ctx context.Context, sku string) (int, error)

// orders stands for a generated gRPC client with a server stream.
type orders interface {
	ListOrders(ctx context.Context, req *struct{}) (any, error)
}

var (
	client orders
	req    *struct{}
)
`,
	"docs/fallbacks.md": `
import (
	"context"
	"net/http"
	"time"

	"github.com/govkit/breaker"
)

// The downstreams' clients, with the signatures the page's calls need.
type stockClient struct{}

func (stockClient) GetStock(ctx context.Context, sku string) (int, error) { return 0, nil }

type poster struct{}

func (poster) Post(ctx context.Context, review string) error   { return nil }
func (poster) Charge(ctx context.Context, order string) error { return nil }

type stockCache struct{}

func (stockCache) Get(sku string) (int, bool) { return 0, false }

type TryLaterError struct{ After time.Duration }

func (e *TryLaterError) Error() string { return "try later" }

var (
	checkout              *breaker.Breaker
	placeOrder            func(context.Context) (string, error)
	tryLater              func(context.Context, error) (string, error)
	inventory             stockClient
	reviews, payments     poster
	cache                 stockCache
	sku, req, review      string
	order                 string
	client                *http.Client
	url                   string
	decodeStock           func(*http.Response) (int, error)
	cachedStock           func(context.Context, error) (int, error)
)
`,
	"docs/policy.md": "import \"github.com/govkit/breaker\"\n\nvar slowRecovery breaker.Policy\n",
	"docs/integrations.md": `
import "net/http"

var (
	client   *http.Client
	outbound *http.Request
	w        http.ResponseWriter
	url      string
)
`,
	"docs/live-policies.md": "import clientv3 \"go.etcd.io/etcd/client/v3\"\n\nvar cli *clientv3.Client\n",
	"docs/migrating.md": `
// rule stands for a sentinel-golang circuitbreaker.Rule, with its types.
var rule struct {
	RetryTimeoutMs, StatIntervalMs uint32
	MaxAllowedRtMs                 uint64
}
`,
	"docs/observability.md": `
import "github.com/govkit/breaker/ops"

var pager interface{ Send(ops.Severity, string) }
`,
	"docs/recorded-traffic.md": `
import (
	"context"
	"net/http"
)

var (
	fn          func(context.Context) error
	getPrice    func(context.Context) (float64, error)
	listPrice   func(context.Context, error) (float64, error)
	srv         *http.Server
	shutdownCtx context.Context
)
`,
	"docs/replay.md":            "import \"github.com/govkit/breaker\"\n\nvar policyAboutToShip breaker.Policy\n",
	"docs/testing-your-code.md": "import \"context\"\n\nvar failing func(context.Context) error\n",
}

// preludeFiles are the prelude files of a page's package: the common
// one and, if the page has one, the page's own (each with its imports).
func preludeFiles(pkg, rel string) map[string]string {
	head := "// Code generated by TestDocSnippets. DO NOT EDIT.\n\npackage " + pkg + "\n"
	out := map[string]string{"prelude.go": head + snippetPrelude}
	if extra, ok := pagePrelude[rel]; ok {
		out["prelude_page.go"] = head + extra
	}
	return out
}

func compactStrings(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

var elided = regexp.MustCompile(`\{\s*\.\.\.\s*\}`)

// wrapSnippet turns a Go block into a file of the page's package (kind
// "fragment" or "decls") or a file of its own (kind "file").
func wrapSnippet(rel string, b block) (src, kind string, err error) {
	pkg := pagePackage(rel)
	code := elided.ReplaceAllString(strings.Join(b.lines, "\n"), `{ panic("elided") }`)
	first := b.line + 1 // the block's first line
	directive := fmt.Sprintf("//line %s:%d\n", rel, first)
	if strings.HasPrefix(strings.TrimSpace(stripComments(code)), "package ") {
		return directive + code + "\n", "file", nil
	}
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", "package p\n"+code, parser.ParseComments); err == nil && len(f.Decls) > 0 {
		return fmt.Sprintf("package %s\n\n%s%s%s\n", pkg, importsFor(f), directive, code), "decls", nil
	}
	wrapped := "package p\nfunc _() {\n" + code + "\n}\n"
	f, err := parser.ParseFile(fset, "", wrapped, 0)
	if err != nil {
		return "", "", fmt.Errorf("neither a file, declarations nor statements: %v", err)
	}
	body := f.Decls[0].(*ast.FuncDecl).Body
	returnsValue := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			returnsValue = returnsValue || len(n.Results) > 0
		}
		return true
	})
	var declared []string
	for _, st := range body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
						declared = append(declared, id.Name)
					}
				}
			}
		case *ast.DeclStmt:
			if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, sp := range gd.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						if id.Name != "_" {
							declared = append(declared, id.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(declared)
	declared = compactStrings(declared)
	var s strings.Builder
	fmt.Fprintf(&s, "package %s\n\n%s", pkg, importsFor(f))
	result := ""
	if returnsValue {
		result = " error"
	}
	fmt.Fprintf(&s, "func snippet%d()%s {\n%s%s\n", b.line, result, directive, code)
	s.WriteString("//line snippets_test.go:1\n")
	for _, name := range declared {
		fmt.Fprintf(&s, "\t_ = %s\n", name)
	}
	if returnsValue {
		s.WriteString("\treturn nil\n")
	}
	s.WriteString("}\n")
	return s.String(), "fragment", nil
}

// importsFor is the import declaration for the known package names f
// uses as the left of a selector without declaring them.
func importsFor(f *ast.File) string {
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil {
				if _, known := snippetImports[id.Name]; known {
					used[id.Name] = true
				}
			}
		}
		return true
	})
	if len(used) == 0 {
		return ""
	}
	var lines []string
	for name := range used {
		path := snippetImports[name]
		if filepath.Base(path) == name || strings.HasSuffix(path, "/"+name) {
			lines = append(lines, fmt.Sprintf("%q", path))
		} else {
			lines = append(lines, fmt.Sprintf("%s %q", name, path))
		}
	}
	sort.Strings(lines)
	return "import (\n\t" + strings.Join(lines, "\n\t") + "\n)\n\n"
}

// stripComments drops the // comment lines at the top of a block.
func stripComments(code string) string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestWrapSnippet_Convention holds the wrapping rules the docs rely on.
func TestWrapSnippet_Convention(t *testing.T) {
	frag := block{line: 10, lines: []string{
		`p, err := breaker.ParsePolicy(nil)`,
		`if err != nil {`,
		`	return err`,
		`}`,
		`_ = g.Do(ctx, "k", func(ctx context.Context) error { ... })`,
	}}
	src, kind, err := wrapSnippet("docs/x.md", frag)
	require.NoError(t, err)
	assert.Equal(t, "fragment", kind)
	assert.Contains(t, src, "package docs_x\n")
	assert.Contains(t, src, `"github.com/govkit/breaker"`)
	assert.Contains(t, src, `"context"`)
	assert.Contains(t, src, "func snippet10() error {\n//line docs/x.md:11\n")
	assert.Contains(t, src, "\t_ = err\n\t_ = p\n\treturn nil\n}")
	assert.Contains(t, src, `{ panic("elided") }`)

	bare := block{line: 3, lines: []string{`fmt.Println("x")`, `return`}}
	src, _, err = wrapSnippet("README.md", bare)
	require.NoError(t, err)
	assert.Contains(t, src, "func snippet3() {\n")
	assert.Contains(t, src, `"fmt"`)

	decls := block{line: 5, lines: []string{`func routeOf(path string) string { return strings.ToLower(path) }`}}
	src, kind, err = wrapSnippet("README.md", decls)
	require.NoError(t, err)
	assert.Equal(t, "decls", kind)
	assert.Contains(t, src, `"strings"`)

	file := block{line: 7, lines: []string{"// Command x.", "package main", "", "func main() {}"}}
	_, kind, err = wrapSnippet("README.md", file)
	require.NoError(t, err)
	assert.Equal(t, "file", kind)

	_, _, err = wrapSnippet("README.md", block{line: 1, lines: []string{"this is not Go"}})
	assert.Error(t, err)
}
