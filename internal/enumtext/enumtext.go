// Package enumtext reads back the text form of a small enumeration: the
// names its String method gives, so that MarshalText and UnmarshalText
// agree by construction.
package enumtext

import "fmt"

// Enum is an enumeration of consecutive integer values that names each
// with String.
type Enum interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
	String() string
}

// Unmarshal sets *dst to the value in [first, last] whose String is text.
// If none is, it leaves *dst alone and returns an error reading
// "<prefix>: unknown <what> <text quoted>".
func Unmarshal[E Enum](dst *E, text []byte, first, last E, prefix, what string) error {
	// The walk stops at last, not past it: last may be the top of E.
	for c := first; first <= last; c++ {
		if string(text) == c.String() {
			*dst = c
			return nil
		}
		if c == last {
			break
		}
	}
	return fmt.Errorf("%s: unknown %s %q", prefix, what, text)
}
