package readlimit

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A file of exactly limit bytes is read whole; one byte more is refused,
// naming the flag, the file and the limit.
func TestFile_RefusesPastTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.json")
	require.NoError(t, os.WriteFile(path, []byte("12345"), 0o600))

	data, err := File("-policy", path, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(data))

	_, err = File("-policy", path, 4)
	require.Error(t, err)
	assert.Equal(t, "-policy "+path+": more than 4 bytes, the most it reads", err.Error())
}

// A file that cannot be opened is an error naming the flag that gave it.
func TestFile_MissingNamesTheFlag(t *testing.T) {
	_, err := File("-traffic", filepath.Join(t.TempDir(), "none.json"), 10)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "-traffic: ")
}
