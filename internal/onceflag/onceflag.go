// Package onceflag hands out flags for code that must act at most once,
// such as a function a caller may call twice, without allocating a flag
// each: flags come in blocks, and a flag is never handed out twice.
package onceflag

import (
	"sync"
	"sync/atomic"
)

// block is a block of flags. A flag is handed out once and never reused,
// so code holding one, even long after, can never take another's; a
// block is collected when the last holder of one of its flags is. Blocks
// are handed out through a sync.Pool, so that goroutines on different
// processors take flags from different blocks without sharing a counter.
type block struct {
	next  int
	flags [perBlock]atomic.Bool
}

// perBlock is the number of flags in a block: a flag costs 1/64 of a
// block's allocation, and a long-lived one keeps its block alive.
const perBlock = 64

var pool = sync.Pool{New: func() any { return new(block) }}

// New returns a false flag no one else has. It is safe for concurrent use.
func New() *atomic.Bool {
	blk := pool.Get().(*block)
	f := &blk.flags[blk.next]
	if blk.next++; blk.next < len(blk.flags) {
		pool.Put(blk)
	}
	return f
}
