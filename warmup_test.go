package breaker

import (
	"context"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// behaviour.md §4 Warmup, breaker level: MarkCold, also right after New.
func TestWarmup_MarkColdExemptsTheTargetForWarmup(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.b.MarkCold()
	h.calls(100, errBoom) // a cold cache: 100% errors
	h.requireState(Closed)
	assert.Zero(t, h.b.Snapshot().Counted)
	assert.Equal(t, uint64(100), h.b.Counters().Exempt)
	assert.Equal(t, uint64(100), h.b.Counters().Failures, "exempt calls still count in the metrics")
	h.at(60*time.Second - 1)
	h.calls(20, errBoom)
	h.requireState(Closed)
	h.at(60 * time.Second)
	h.calls(20, errBoom)
	h.requireState(Open)
}

func TestWarmup_MarkColdRightAfterNewStartsANewBreakerCold(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.b.MarkCold()
	h.calls(30, errBoom)
	h.requireState(Closed)
	h.at(time.Minute)
	h.calls(20, errBoom)
	h.requireState(Open)
}

func TestWarmup_ZeroTurnsItOff(t *testing.T) {
	h := newHarness(t, policy(func(p *Policy) { p.Warmup = 0 }))
	h.b.MarkCold()
	h.calls(20, errBoom)
	h.requireState(Open)
}

// behaviour.md §4 Warmup, per call: the ctx carries the instance's start
// time.
func TestWarmup_PerCallInstanceStart(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.at(10 * time.Minute)
	coldCtx := WithInstanceStart(context.Background(), h.clk.Now().Add(-59*time.Second))
	warmCtx := WithInstanceStart(context.Background(), h.clk.Now().Add(-61*time.Second))
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(coldCtx, func(context.Context) error { return errBoom }), errBoom)
	}
	h.requireState(Closed)
	for i := 0; i < 20; i++ {
		_ = h.b.Do(warmCtx, func(context.Context) error { return errBoom })
	}
	h.requireState(Open)
}

func TestWarmup_AColdProbeFailureIsExcusedButItsPassCounts(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.trip()
	h.at(30 * time.Second)
	h.b.MarkCold()
	require.ErrorIs(t, h.call(context.DeadlineExceeded), context.DeadlineExceeded)
	h.requireState(HalfOpen)
	h.calls(3, nil)
	h.requireState(Closed)
}

// A breaker whose calls all carry an instance mark sees it on the first
// call, so the successes of a cold instance are left out from the start.
func TestWarmup_MarkedSuccessesAreExemptFromTheFirstCall(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	for i := 0; i < 30; i++ {
		require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	}
	require.Zero(t, h.b.Snapshot().Counted)
	require.Equal(t, uint64(30), h.b.Counters().Exempt)
}

// A breaker that has so far seen only unmarked calls still finds the mark
// on every failure, and, once it has, on every success.
func TestWarmup_MarkIsFoundOnFailuresAfterUnmarkedCalls(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(5, nil) // unmarked: counted
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	for i := 0; i < 40; i++ {
		require.ErrorIs(t, h.b.Do(cold, func(context.Context) error { return errBoom }), errBoom)
	}
	h.requireState(Closed)
	for i := 0; i < 10; i++ {
		require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	}
	require.Equal(t, Snapshot{Counted: 5}, h.b.Snapshot())
	require.Equal(t, uint64(50), h.b.Counters().Exempt)
}

// A breaker that has seen no mark looks again after instanceSample.
func TestWarmup_MarkedSuccessIsFoundBySampling(t *testing.T) {
	h := newHarness(t, DefaultPolicy())
	h.calls(1, nil) // unmarked, sampled: no mark
	h.add(time.Duration(instanceSample))
	cold := WithInstanceStart(context.Background(), h.t0.Add(-time.Second))
	require.NoError(t, h.b.Do(cold, func(context.Context) error { return nil }))
	require.Equal(t, uint64(1), h.b.Counters().Exempt)
	require.Equal(t, Snapshot{Counted: 1}, h.b.Snapshot())
}

// Breakers share no state a caller can set: the package's own source
// declares no package-level variable of a sync/atomic type but liveProbes,
// which no caller sets. It counts the probes in flight, each of which ends
// with its result or its half-open episode, and is 0 whenever no breaker of
// the process is probing.
// Regression (8338cca): WithInstanceStart set a flag every breaker's calls read.
func TestBreakers_ShareNoProcessWideState(t *testing.T) {
	fset := gotoken.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != gotoken.VAR {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if v.Type == nil {
					continue
				}
				if sel, ok := v.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "atomic" && v.Names[0].Name != "liveProbes" {
						t.Errorf("%s: package-level %s of type atomic.%s is state shared by every breaker",
							fset.Position(v.Pos()), v.Names[0].Name, sel.Sel.Name)
					}
				}
			}
		}
	}
}
