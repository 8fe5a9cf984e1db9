package onceflag

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// No flag is handed out twice, from one goroutine or many, across more
// flags than a block holds; each starts false.
func TestNew_NeverHandsOutAFlagTwice(t *testing.T) {
	const goroutines, each = 4, 3 * perBlock
	var mu sync.Mutex
	seen := map[*atomic.Bool]bool{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]*atomic.Bool, 0, each)
			for i := 0; i < each; i++ {
				f := New()
				require.False(t, f.Load(), "a flag handed out set")
				f.Store(true)
				mine = append(mine, f)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range mine {
				require.False(t, seen[f], "a flag handed out twice")
				seen[f] = true
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*each)
}

// A flag costs a block's allocation spread over the block's flags.
func TestNew_AllocatesOnceABlock(t *testing.T) {
	allocs := testing.AllocsPerRun(10*perBlock, func() { _ = New() })
	assert.Less(t, allocs, 0.1)
}
