// Package readlimit reads the files the commands are given, bounded: a
// file past its limit is refused with an error naming the flag it came
// from, rather than read whole into memory.
package readlimit

import (
	"fmt"
	"io"
	"os"
)

// File reads the file at path, given to the command by flag, and refuses
// it if it holds more than limit bytes. Errors name the flag.
func File(flag, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s: more than %d bytes, the most it reads", flag, path, limit)
	}
	return data, nil
}
