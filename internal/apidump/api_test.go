package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestDeclarations covers each form of declaration on one made-up package:
// what is listed, how it is printed, and what is left out.
func TestDeclarations(t *testing.T) {
	const src = `package p

import "time"

// Level is documented; the comment is not part of the API.
type Level uint8

const (
	Low Level = iota + 1
	mid
	High
)

const (
	KB = 1 << (10 * (iota + 1))
	MB
)

const Timeout = 5 * time.Second

var ErrX = errors.New("p: x")

var Default Config

var hidden = 1

type Config struct {
	Name, Zone string ` + "`json:\"name\"`" + `
	Every      time.Duration
	secret     int
	*Embedded
	inner
	Nested struct {
		A int
		B string
	}
}

type Embedded struct{}

type inner struct{ Promoted int }

type Store[K comparable, V any] interface {
	Get(key K) (value V, ok bool)
	Put(K, V)
	fmt.Stringer
	seal()
}

type Number interface{ ~int | ~float64 }

type Alias = Config

type Hook func(from, to Level, at time.Time)

func New(name string, opts ...func(*Config)) (*Config, error) { return nil, nil }

func Map[T, U any](xs []T, f func(x T) U) []U { return nil }

func (c *Config) Run(ctx context.Context, fn func(ctx context.Context) error) (err error) { return nil }

func (c Config) Clone() Config { return c }

func (c *Config) stop() {}

func (i inner) Visible() {}

func (s *Queue[T]) Push(v T) {}

type Queue[T any] struct{ items []T }

func helper() {}
`
	want := []string{
		"const High Level = 2 + 1",
		"const KB = 1 << (10 * (0 + 1))",
		"const Low Level = 0 + 1",
		"const MB = 1 << (10 * (1 + 1))",
		"const Timeout = 5 * time.Second",
		"func Map[T any, U any]([]T, func(T) U) []U",
		"func New(string, ...func(*Config)) (*Config, error)",
		"method (*Config) Run(context.Context, func(context.Context) error) error",
		"method (*Queue[T]) Push(T)",
		"method (Config) Clone() Config",
		"type Alias = Config",
		"type Config struct",
		"type Config struct, Every time.Duration",
		"type Config struct, Name string `json:\"name\"`",
		"type Config struct, Nested struct { A int; B string }",
		"type Config struct, Zone string `json:\"name\"`",
		"type Config struct, embedded *Embedded",
		"type Embedded struct",
		"type Hook func(Level, Level, time.Time)",
		"type Level uint8",
		"type Number interface",
		"type Number interface, ~int | ~float64",
		"type Queue[T any] struct",
		"type Store[K comparable, V any] interface",
		"type Store[K comparable, V any] interface, Get(K) (V, bool)",
		"type Store[K comparable, V any] interface, Put(K, V)",
		"type Store[K comparable, V any] interface, fmt.Stringer",
		"type Store[K comparable, V any] interface, unexported methods",
		"var Default Config",
		`var ErrX = errors.New("p: x")`,
	}
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := declarations([]*ast.File{f})
	if d := unifiedDiff("want", "got", strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"); d != "" {
		t.Errorf("declarations:\n%s", d)
	}
}

// TestDeclarationsIgnoreFileOrder: splitting a file in two, or renaming
// one, leaves the golden file as it is.
func TestDeclarationsIgnoreFileOrder(t *testing.T) {
	parse := func(src string) *ast.File {
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", "package p\n"+src, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := "func A() {}\ntype Z int\n", "type B struct{ X int }\nconst C = 1\n"
	one := declarations([]*ast.File{parse(a + b)})
	two := declarations([]*ast.File{parse(b), parse(a)})
	if strings.Join(one, "\n") != strings.Join(two, "\n") {
		t.Errorf("one file:\n%s\ntwo files:\n%s", strings.Join(one, "\n"), strings.Join(two, "\n"))
	}
}
