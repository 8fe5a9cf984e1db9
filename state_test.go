package breaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStrings(t *testing.T) {
	assert.Equal(t, "closed", Closed.String())
	assert.Equal(t, "open", Open.String())
	assert.Equal(t, "half_open", HalfOpen.String())
	assert.Equal(t, "state(7)", State(7).String())
	txt, _ := HalfOpen.MarshalText()
	assert.Equal(t, "half_open", string(txt))
	assert.Equal(t, "shadow", ModeShadow.String())
	assert.Equal(t, "mode(9)", Mode(9).String())
}
