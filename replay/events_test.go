package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queue reuses its consumed front, once when it empties and once when
// the front is half of a large queue; neither may lose or reorder an item.
func TestFifo_KeepsOrderWhenItReusesItsFront(t *testing.T) {
	var q fifo[int]
	_, ok := q.pop()
	assert.False(t, ok, "pop of an empty queue")
	assert.Nil(t, q.peek(), "peek of an empty queue")

	next, want := 0, 0
	for round := 0; round < 5; round++ {
		for i := 0; i < 3000; i++ {
			q.push(next)
			next++
		}
		for i := 0; i < 2500; i++ {
			require.Equal(t, want, *q.peek())
			got, ok := q.pop()
			require.True(t, ok)
			require.Equal(t, want, got)
			want++
		}
	}
	for {
		got, ok := q.pop()
		if !ok {
			break
		}
		require.Equal(t, want, got)
		want++
	}
	assert.Equal(t, next, want, "every item came out once")
	assert.LessOrEqual(t, cap(q.items), 2*3000+1024, "the consumed front was reused")
}
