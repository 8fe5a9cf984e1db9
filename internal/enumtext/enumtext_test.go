package enumtext

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type color uint8

const (
	red color = iota
	green
	blue
)

func (c color) String() string {
	switch c {
	case red:
		return "red"
	case green:
		return "green"
	case blue:
		return "blue"
	}
	return "color(?)"
}

// Every value's name reads back as the value, the last one included.
func TestUnmarshal_ReadsEveryName(t *testing.T) {
	for c := red; c <= blue; c++ {
		var got color
		require.NoError(t, Unmarshal(&got, []byte(c.String()), red, blue, "paint", "color"))
		assert.Equal(t, c, got)
	}
}

// A name no value has is an error naming it, and the destination is left
// as it was.
func TestUnmarshal_UnknownNameIsAnError(t *testing.T) {
	got := green
	err := Unmarshal(&got, []byte("Red\n"), red, blue, "paint", "color")
	require.Error(t, err)
	assert.Equal(t, `paint: unknown color "Red\n"`, err.Error())
	assert.Equal(t, green, got)
}

type level uint8

func (l level) String() string { return string(rune('a' + l - 250)) }

// A range that ends at the top of its type ends there rather than
// wrapping around to 0 and walking for ever.
func TestUnmarshal_RangeToTheTopOfTheType(t *testing.T) {
	var got level
	require.NoError(t, Unmarshal(&got, []byte("f"), 250, 255, "p", "level"))
	assert.Equal(t, level(255), got)
	require.Error(t, Unmarshal(&got, []byte("z"), 250, 255, "p", "level"))
}
