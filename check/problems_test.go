package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A traffic value that is not an object is a problem of the document as a
// whole, named "(document)" as the policy problems name it, not printed
// after an empty path (": must be a JSON object").
func TestTrafficError_WholeDocumentIsNamed(t *testing.T) {
	var tr Traffic
	err := tr.UnmarshalJSON([]byte(`[1]`))
	require.Error(t, err)
	assert.Equal(t, "check: invalid traffic: (document): must be a JSON object", err.Error())
}

// A key is quoted in a problem's path as an override key is in the policy
// problems: whole when short, its first 64 bytes and its length when long,
// so that a 10 kB key neither floods the message nor differs in form from
// the same key's problem in a group policy.
func TestTrafficError_KeyPathIsQuotedAsThePolicyProblems(t *testing.T) {
	long := strings.Repeat("k", 10_000)
	_, err := ParseWorkload([]byte(`{"keys": {"` + long + `": {"rate": -1}, "a\nb": {"rate": -1}}}`))
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `keys["`+strings.Repeat("k", 64)+`"…(10000 bytes)].rate: must be in`)
	assert.Contains(t, msg, `keys["a\nb"].rate: must be in`)
	assert.Less(t, len(msg), 1000)
}
