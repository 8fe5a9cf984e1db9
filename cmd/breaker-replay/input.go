package main

import (
	"fmt"
	"io"
	"os"

	"github.com/govkit/breaker"
)

// Limits of readInput: a policy document is at most what the library
// accepts, and a scenario, as small a document, at most as much.
const (
	maxPolicyInput = breaker.MaxPolicyDocumentSize
	maxInput       = 1 << 20
)

// readInput reads the file at path, or refuses it with an error naming it
// once it is longer than limit bytes: a wrong path such as /dev/zero, or a
// runaway file, is never read into memory whole. A named pipe, such as the
// shell's <(command), is read like a file, until its writer closes it.
func readInput(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path, limit)
}

// readLimited reads r to its end, or refuses it, naming it name, once it
// is longer than limit bytes.
func readLimited(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes (%d MiB), the largest accepted", name, limit, limit>>20)
	}
	return data, nil
}
