package benchmarks

import (
	"context"
	"testing"
)

// A subject is one library as the benchmarks set it up. call makes one
// call whose function records that it ran and returns nil.
type subject struct {
	name    string
	setup   func(t *testing.T, open bool) (isOpen func() bool, call func(ran *bool) error)
	refused func(error) bool
}

var subjects = []subject{
	{"govkit", func(t *testing.T, open bool) (func() bool, func(*bool) error) {
		cb := newGovkit(t, open)
		return func() bool { return govkitIsOpen(cb) },
			func(ran *bool) error {
				return cb.Do(ctx, func(context.Context) error { *ran = true; return nil })
			}
	}, govkitRefused},
	{"gobreaker", func(t *testing.T, open bool) (func() bool, func(*bool) error) {
		cb := newGobreaker(t, open)
		return func() bool { return gobreakerIsOpen(cb) },
			func(ran *bool) error {
				_, err := cb.Execute(func() (struct{}, error) { *ran = true; return struct{}{}, nil })
				return err
			}
	}, gobreakerRefused},
	{"failsafe", func(t *testing.T, open bool) (func() bool, func(*bool) error) {
		s := newFailsafe(t, open)
		return func() bool { return failsafeIsOpen(s) },
			func(ran *bool) error {
				return s.exec.Run(func() error { *ran = true; return nil })
			}
	}, failsafeRefused},
	{"mercari", func(t *testing.T, open bool) (func() bool, func(*bool) error) {
		cb := newMercari(t, open)
		return func() bool { return mercariIsOpen(cb) },
			func(ran *bool) error {
				_, err := cb.Do(ctx, func() (interface{}, error) { *ran = true; return nil, nil })
				return err
			}
	}, mercariRefused},
	{"cep21", func(t *testing.T, open bool) (func() bool, func(*bool) error) {
		c := newCep21(t, open)
		return func() bool { return cep21IsOpen(c) },
			func(ran *bool) error {
				return c.Execute(ctx, func(context.Context) error { *ran = true; return nil }, nil)
			}
	}, cep21Refused},
}

// TestSetup_OpenBenchmarksMeasureAnOpenBreaker guards BenchmarkOpen: a
// peer left closed by a wrong setting would be timed running the function
// and look slow for the wrong reason, or fast if its closed path is cheap.
func TestSetup_OpenBenchmarksMeasureAnOpenBreaker(t *testing.T) {
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			isOpen, call := s.setup(t, true)
			if !isOpen() {
				t.Fatalf("not open after %d failures", minRequests)
			}
			// More than one call: a breaker that let a probe through on
			// the first refusal would not stay open for a benchmark.
			for i := 0; i < 100; i++ {
				ran := false
				err := call(&ran)
				if ran {
					t.Fatalf("call %d ran the function", i)
				}
				if !s.refused(err) {
					t.Fatalf("call %d: got %v, want the library's open error", i, err)
				}
			}
			if !isOpen() {
				t.Fatal("no longer open after 100 refused calls")
			}
		})
	}
}

// TestSetup_ClosedBenchmarksMeasureAClosedBreaker guards BenchmarkClosed
// the same way: every call must run the function and return its nil.
func TestSetup_ClosedBenchmarksMeasureAClosedBreaker(t *testing.T) {
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			isOpen, call := s.setup(t, false)
			for i := 0; i < 100; i++ {
				ran := false
				if err := call(&ran); err != nil || !ran {
					t.Fatalf("call %d: ran=%v err=%v, want the function run and nil", i, ran, err)
				}
			}
			if isOpen() {
				t.Fatal("open after 100 successes")
			}
		})
	}
}
