package shadowhook

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

type nop struct{}

func (nop) Settled()       {}
func (nop) Transition(any) {}
func (nop) Update(string)  {}

// Until a factory is registered there is none; a registered one is
// returned, and registering nil takes it back.
func TestRegister_OneFactoryAtATime(t *testing.T) {
	assert.Nil(t, Registered())
	made := 0
	Register(func(_, _, _ any, _ *atomic.Uint64, _ string) Observer { made++; return nop{} })
	f := Registered()
	if assert.NotNil(t, f) {
		assert.Equal(t, nop{}, f(nil, nil, nil, nil, "v1"))
		assert.Equal(t, 1, made)
	}
	Register(nil)
	assert.Nil(t, Registered())
}

// A group's state is made once, whoever asks first, and shared after.
func TestGroupState_IsMadeOnce(t *testing.T) {
	var s GroupState
	var made atomic.Int32
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.Get(func() any { made.Add(1); return new(int) })
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), made.Load())
	for _, v := range got {
		assert.Same(t, got[0], v)
	}
}
