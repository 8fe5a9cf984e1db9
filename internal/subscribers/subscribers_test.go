package subscribers

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func collect(l *List[func(int)], v int, recovered func(any)) {
	l.Each(func(f func(int)) { f(v) }, recovered)
}

// Subscribers are called in the order they were added; one removed is
// not called again, and removing it twice removes nothing else.
func TestList_OrderAndRemoval(t *testing.T) {
	var l List[func(int)]
	var got []string
	l.Add(func(v int) { got = append(got, "a") })
	rmB := l.Add(func(v int) { got = append(got, "b") })
	l.Add(func(v int) { got = append(got, "c") })
	collect(&l, 1, nil)
	assert.Equal(t, []string{"a", "b", "c"}, got)

	rmB()
	rmB()
	got = nil
	collect(&l, 2, nil)
	assert.Equal(t, []string{"a", "c"}, got)
	assert.Equal(t, 2, l.Len())
}

// A subscriber removed by an earlier one during an Each is not called by
// that Each, though the list it walks was read before the removal.
func TestList_RemovedDuringEachIsNotCalled(t *testing.T) {
	var l List[func(int)]
	var rmB func()
	called := false
	l.Add(func(int) { rmB() })
	rmB = l.Add(func(int) { called = true })
	collect(&l, 1, nil)
	assert.False(t, called)
}

// A panicking subscriber is handed to recovered and the next one is still
// called.
func TestList_PanicIsContained(t *testing.T) {
	var l List[func(int)]
	var rec []any
	next := false
	l.Add(func(int) { panic("boom") })
	l.Add(func(int) { next = true })
	collect(&l, 1, func(v any) { rec = append(rec, v) })
	assert.Equal(t, []any{"boom"}, rec)
	assert.True(t, next)
}

// With no recovered, a panic is the caller's.
func TestList_PanicWithoutRecoveredPropagates(t *testing.T) {
	var l List[func(int)]
	l.Add(func(int) { panic("boom") })
	assert.PanicsWithValue(t, "boom", func() { collect(&l, 1, nil) })
}

// The zero List is empty; adding, removing and walking from many
// goroutines at once is safe (run with -race).
func TestList_Concurrent(t *testing.T) {
	var l List[func(int)]
	collect(&l, 0, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				rm := l.Add(func(int) {})
				collect(&l, j, nil)
				rm()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 0, l.Len())
}
