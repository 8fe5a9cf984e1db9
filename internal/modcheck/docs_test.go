package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The documentation is checked as a reader would use it: every relative
// link of the README and of docs/ leads to a file, directory or heading
// that exists, and every `go run`, `go build` and `go test` command of
// their fenced blocks names packages, flags and tests that exist.

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// docFiles are the pages the checks read, relative to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(repoRoot, f)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// page is a Markdown file split into its prose (code blocks blanked, so
// that a link or heading in code is not taken for one) and its fenced
// blocks.
type page struct {
	prose  []string // the lines, with every line of a fenced block emptied
	blocks []block
}

type block struct {
	info  string // the fence's info string: "", "go", "sh", "json", ...
	line  int    // of the opening fence, 1-based
	lines []string
}

func readPage(t *testing.T, rel string) page {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	require.NoError(t, err)
	var p page
	var cur *block
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &block{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1}
			} else {
				p.blocks = append(p.blocks, *cur)
				cur = nil
			}
			p.prose = append(p.prose, "")
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
			p.prose = append(p.prose, "")
			continue
		}
		p.prose = append(p.prose, line)
	}
	require.Nil(t, cur, "%s: a fenced block opened at line %d is never closed", rel, func() int {
		if cur == nil {
			return 0
		}
		return cur.line
	}())
	return p
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	linkRE     = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors lists the fragment identifiers GitHub gives the headings of a
// page: the heading's text without its Markdown, lowercased, with every
// character but letters, digits, spaces, hyphens and underscores dropped
// and spaces made hyphens; a repeated one gets "-1", "-2", ...
func anchors(p page) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range p.prose {
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[2], "$1")
		text = strings.NewReplacer("`", "", "*", "").Replace(text)
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestDocLinks: every relative link of README.md and docs/*.md resolves,
// to a file or directory of the repository and, with a #fragment, to a
// heading of that page.
func TestDocLinks(t *testing.T) {
	pages := map[string]page{}
	load := func(rel string) page {
		if p, ok := pages[rel]; ok {
			return p
		}
		pages[rel] = readPage(t, rel)
		return pages[rel]
	}
	checked := 0
	for _, rel := range docFiles(t) {
		p := load(rel)
		prose := codeSpanRE.ReplaceAllString(strings.Join(p.prose, "\n"), "code")
		for _, m := range linkRE.FindAllStringSubmatchIndex(prose, -1) {
			target := prose[m[2]:m[3]]
			line := 1 + strings.Count(prose[:m[0]], "\n")
			if u, err := url.Parse(target); err == nil && u.Scheme != "" {
				continue // https:, mailto:
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			path, err := url.PathUnescape(path)
			require.NoError(t, err)
			dest := rel
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), path)))
				if strings.HasPrefix(dest, "../") || filepath.IsAbs(path) {
					t.Errorf("%s:%d: link %q leaves the repository", rel, line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s:%d: link %q: no such file or directory %s", rel, line, target, dest)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: a fragment on a page that is not Markdown", rel, line, target)
				continue
			}
			if !anchors(load(dest))[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", rel, line, target, dest, frag)
			}
		}
	}
	assert.Greater(t, checked, 50, "the links of the README and docs/ were found")
}

func TestAnchors_FollowGitHub(t *testing.T) {
	p := page{prose: []string{
		"# Scraping thousands of breakers: the Prometheus handler",
		"## The trip check's gates",
		"### Why the rules have no `for:`",
		"## Defaults, and why",
		"## Defaults, and why",
		"## See [the page](x.md) now",
		`<a id="group-policy"></a>`,
	}}
	assert.Equal(t, map[string]bool{
		"scraping-thousands-of-breakers-the-prometheus-handler": true,
		"the-trip-checks-gates":                                 true,
		"why-the-rules-have-no-for":                             true,
		"defaults-and-why":                                      true,
		"defaults-and-why-1":                                    true,
		"see-the-page-now":                                      true,
		"group-policy":                                          true,
	}, anchors(p))
}

// command is one go command of a fenced block, with the directory it
// runs in (the block's `cd` lines followed), relative to the root.
type command struct {
	where string // "README.md:112"
	dir   string
	args  []string // after "go"
	// inline: from a code span of the prose, where a command that names
	// no package runs in a directory the sentence gives.
	inline bool
}

// docCommands extracts the go commands of the pages' fenced blocks (a
// shell block, or a YAML step's `run:`); Go, JSON and output blocks hold
// none, since a command line starts with `go ` (after `$ ` or `run: `).
func docCommands(t *testing.T) []command {
	t.Helper()
	var out []command
	for _, rel := range docFiles(t) {
		p := readPage(t, rel)
		for _, b := range p.blocks {
			if b.info == "go" || b.info == "json" {
				continue
			}
			dir := "."
			for i := 0; i < len(b.lines); i++ {
				line := strings.TrimSpace(b.lines[i])
				for strings.HasSuffix(line, `\`) && i+1 < len(b.lines) {
					i++
					line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(b.lines[i])
				}
				line = strings.TrimPrefix(line, "$ ")
				line = strings.TrimPrefix(line, "- ")
				line = strings.TrimPrefix(line, "run: ")
				if c := strings.Index(line, " #"); c >= 0 {
					line = line[:c]
				}
				out = append(out, parseLine(t, fmt.Sprintf("%s:%d", rel, b.line+1+i), &dir, line, false)...)
			}
		}
		// A command in the prose's code spans (`go test -run X .`) runs
		// from the root unless it says where; one that names no package
		// runs wherever the sentence says, so it is left out.
		prose := strings.Join(p.prose, "\n")
		for _, m := range codeSpanRE.FindAllStringIndex(prose, -1) {
			span := strings.Join(strings.Fields(prose[m[0]+1:m[1]-1]), " ")
			if !strings.HasPrefix(span, "go ") && !strings.HasPrefix(span, "cd ") {
				continue
			}
			dir := "."
			where := fmt.Sprintf("%s:%d", rel, 1+strings.Count(prose[:m[0]], "\n"))
			out = append(out, parseLine(t, where, &dir, span, true)...)
		}
	}
	return out
}

// parseLine returns the go commands of one command line, following its
// `cd`s in *dir.
func parseLine(t *testing.T, where string, dir *string, line string, inline bool) []command {
	var out []command
	for _, seg := range strings.Split(line, "&&") {
		words := shellWords(t, seg)
		switch {
		case len(words) == 2 && words[0] == "cd":
			*dir = filepath.ToSlash(filepath.Clean(filepath.Join(*dir, words[1])))
		case len(words) >= 2 && words[0] == "go" && (words[1] == "run" || words[1] == "test" || words[1] == "build"):
			out = append(out, command{where: where, dir: *dir, args: words[1:], inline: inline})
		}
	}
	return out
}

// shellWords splits a command line as the shell would for the simple
// lines the docs hold: words apart on blanks, quotes kept together, and a
// redirection ending the command.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '>' || r == '<' || r == '|':
			if in {
				words = append(words, cur.String())
			}
			return words
		case unicode.IsSpace(r):
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// goFlagsWithValue are the go command's flags, used in the docs, that
// take the next word as their value.
var goFlagsWithValue = map[string]bool{
	"-o": true, "-run": true, "-bench": true, "-benchtime": true, "-count": true,
	"-cpu": true, "-timeout": true, "-tags": true, "-p": true, "-fuzz": true,
	"-fuzztime": true, "-coverprofile": true, "-skip": true,
}

// workModules maps each module path of go.work to its directory.
func workModules(t *testing.T) map[string]string {
	t.Helper()
	var work workFile
	require.NoError(t, goJSON(repoRoot, &work, "work", "edit", "-json"))
	out := map[string]string{}
	for _, u := range work.Use {
		var m modFile
		dir := filepath.Join(repoRoot, u.DiskPath)
		require.NoError(t, goJSON(dir, &m, "mod", "edit", "-json"))
		out[m.Module.Path] = filepath.ToSlash(filepath.Clean(u.DiskPath))
	}
	return out
}

// resolve turns a package argument into a directory of the repository
// (relative to the root) and whether it is a pattern ending in "/...".
func resolve(mods map[string]string, cmdDir, arg string) (dir string, pattern bool, err error) {
	arg, _, _ = strings.Cut(arg, "@") // github.com/...@latest names the same package
	if rest, ok := strings.CutSuffix(arg, "/..."); ok {
		arg, pattern = rest, true
	}
	if arg == "." || arg == ".." || strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../") {
		return filepath.ToSlash(filepath.Clean(filepath.Join(cmdDir, arg))), pattern, nil
	}
	best := ""
	for path := range mods {
		if (arg == path || strings.HasPrefix(arg, path+"/")) && len(path) > len(best) {
			best = path
		}
	}
	if best == "" {
		return "", pattern, fmt.Errorf("%s is not in a module of go.work", arg)
	}
	return filepath.ToSlash(filepath.Join(mods[best], strings.TrimPrefix(arg, best))), pattern, nil
}

// goFiles lists the package's .go files in dir (relative to the root),
// test files included.
func goFiles(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	return files
}

// flagsOf lists the flags a main package defines with package flag (or a
// FlagSet): the name given to String, Bool, Duration, StringVar, ...
func flagsOf(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range goFiles(dir) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			i := 0
			switch name {
			case "String", "Bool", "Int", "Int64", "Uint", "Uint64", "Float64", "Duration", "Func", "BoolFunc":
			case "StringVar", "BoolVar", "IntVar", "Int64Var", "UintVar", "Uint64Var", "Float64Var", "DurationVar", "Var", "TextVar":
				i = 1
			default:
				return true
			}
			if len(call.Args) <= i+1 {
				return true
			}
			if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
			return true
		})
	}
	return out
}

// testsOf lists the Test, Benchmark, Fuzz and Example functions of the
// package in dir.
func testsOf(dir string) []string {
	var out []string
	re := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	for _, f := range goFiles(dir) {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// TestDocCommands: every go command in a fenced block of README.md and
// docs/*.md, or in a code span of their prose, names packages that exist,
// flags the command defines and, given -run or -bench, a test or
// benchmark of the package that matches. They are parsed, not run: the
// test command and a replay take minutes.
func TestDocCommands(t *testing.T) {
	mods := workModules(t)
	cmds := docCommands(t)
	require.NotEmpty(t, cmds)
	var sawTestCommand, sawReplay bool
	for _, c := range cmds {
		verb, args := c.args[0], c.args[1:]
		var pkgs []string
		var progArgs []string
		var runPattern string
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "-args" {
				break
			}
			if strings.HasPrefix(a, "-") {
				name, value, hasValue := strings.Cut(a, "=")
				if goFlagsWithValue[name] && !hasValue && i+1 < len(args) {
					i++
					value, hasValue = args[i], true
				}
				if (name == "-run" || name == "-bench") && hasValue {
					runPattern = value
				}
				continue
			}
			pkgs = append(pkgs, a)
			if verb == "run" {
				progArgs = args[i+1:]
				break
			}
		}
		if len(pkgs) == 0 {
			if c.inline {
				continue
			}
			pkgs = []string{"."}
		}
		if verb == "test" && len(pkgs) == 1 && pkgs[0] == "github.com/govkit/breaker/..." {
			sawTestCommand = true
		}
		for _, arg := range pkgs {
			dir, pattern, err := resolve(mods, c.dir, arg)
			if err != nil {
				t.Errorf("%s: go %s: %v", c.where, verb, err)
				continue
			}
			if fi, err := os.Stat(filepath.Join(repoRoot, dir)); err != nil || !fi.IsDir() {
				t.Errorf("%s: go %s %s: no directory %s", c.where, verb, arg, dir)
				continue
			}
			if pattern {
				continue
			}
			if len(goFiles(dir)) == 0 {
				t.Errorf("%s: go %s %s: no Go package in %s", c.where, verb, arg, dir)
				continue
			}
			if verb == "run" {
				if dir == "cmd/breaker-replay" {
					sawReplay = true
				}
				flags := flagsOf(t, dir)
				for _, a := range progArgs {
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if strings.HasPrefix(a, "-") && !flags[name] {
						t.Errorf("%s: go run %s: %s defines no flag -%s", c.where, arg, dir, name)
					}
				}
			}
			if runPattern != "" && runPattern != "^$" && runPattern != "'^$'" {
				// A pattern's first element matches the top-level function;
				// those after a slash, its subtests, are not checked.
				top, _, _ := strings.Cut(runPattern, "/")
				re, err := regexp.Compile(top)
				if err != nil {
					t.Errorf("%s: -run %q: %v", c.where, runPattern, err)
					continue
				}
				matched := false
				for _, name := range testsOf(dir) {
					matched = matched || re.MatchString(name)
				}
				if !matched {
					t.Errorf("%s: %q matches no test or benchmark in %s", c.where, runPattern, dir)
				}
			}
		}
	}
	assert.True(t, sawTestCommand, "the README's test command, go test -race -p 3 github.com/govkit/breaker/..., is among the commands")
	assert.True(t, sawReplay, "the replay's commands are among the commands")
}

// TestDocCommands_TheCheapOneRuns runs the one command of the docs that
// answers in a moment, the replay's list of scenarios, as written, from
// the repository root.
func TestDocCommands_TheCheapOneRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the replay command")
	}
	var found bool
	for _, c := range docCommands(t) {
		if strings.Join(c.args, " ") != "run ./cmd/breaker-replay -list" || c.dir != "." {
			continue
		}
		found = true
		cmd := exec.Command("go", c.args...)
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", c.where, out)
		assert.Contains(t, string(out), "seeds000", "%s: the list names the default scenario", c.where)
		break
	}
	assert.True(t, found, "the docs give go run ./cmd/breaker-replay -list")
}
