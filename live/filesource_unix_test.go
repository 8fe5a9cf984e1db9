//go:build unix

package live_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mkfifo makes a named pipe at path. When the test ends it opens the
// pipe's writing end and closes it, which ends a reader blocked opening
// the pipe, so that no goroutine of the test is left in the system call.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	t.Cleanup(func() { releaseFIFO(path) })
}

// releaseFIFO ends the open of a reader blocked on the named pipe at
// path, if there is one (with none, the open fails at once).
func releaseFIFO(path string) {
	if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}

// followFile follows path with ticks the test sends, and returns the
// records on a channel.
func followFile(t *testing.T, ctx context.Context, src *live.FileSource) (*live.Follower, <-chan live.Change) {
	t.Helper()
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(testutil.DiscardLogger()))
	require.NoError(t, err)
	rec := make(chan live.Change, 16)
	f, err := live.Follow(ctx, g, src, live.OnChange(func(c live.Change) { rec <- c }))
	require.NoError(t, err)
	return f, rec
}

// A policy path that is a named pipe (or a device, through a link) is
// refused with a record that says what it is, and Close and a cancelled
// context return at once. Opening a pipe for reading blocks until a
// writer comes, and /dev/zero never ends: the follower was stuck in the
// look, and neither Close nor cancelling its context returned.
func TestFileSource_APathThatIsNotARegularFileIsRefusedAndStopsPromptly(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		make       func(t *testing.T, path string)
	}{
		{"named pipe", "is a named pipe (FIFO), not a regular file", mkfifo},
		{"link to a named pipe", "is a named pipe (FIFO), not a regular file", func(t *testing.T, path string) {
			fifo := filepath.Join(filepath.Dir(path), "pipe")
			mkfifo(t, fifo)
			require.NoError(t, os.Symlink(fifo, path))
		}},
		{"link to /dev/zero", "is a character device, not a regular file", func(t *testing.T, path string) {
			if _, err := os.Stat("/dev/zero"); err != nil {
				t.Skip("no /dev/zero")
			}
			require.NoError(t, os.Symlink("/dev/zero", path))
		}},
	} {
		for _, stop := range []string{"Close", "cancel"} {
			t.Run(c.name+"/"+stop, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "breakers.json")
				c.make(t, path)
				src, err := live.NewFileSource(path, live.FileConfig{Tick: func(time.Duration) (<-chan time.Time, func()) {
					return make(chan time.Time), func() {}
				}})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				f, rec := followFile(t, ctx, src)
				defer releaseFIFO(path) // before the test waits on anything

				select {
				case got := <-rec:
					assert.Equal(t, live.Unreadable, got.Result)
					assert.Contains(t, got.Err, path+" "+c.kind)
				case <-time.After(promptly):
					t.Errorf("no policy record within %v", promptly)
				}
				if stop == "Close" {
					within(t, "Close", func() { assert.NoError(t, f.Close()) })
				} else {
					cancel()
					within(t, "the follower, its context cancelled,", func() { <-f.Done() })
				}
			})
		}
	}
}

// A look that hangs in the file system (a hard-mounted NFS server that
// is gone; here, opening a named pipe without O_NONBLOCK, which blocks
// until a writer comes) holds up neither Close nor a cancelled context,
// and is reported as unreadable once it has lasted more than an
// interval. The look itself ends when its system call returns.
func TestFileSource_ALookThatHangsHoldsUpNeitherCloseNorCancel(t *testing.T) {
	for _, stop := range []string{"Close", "cancel"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "breakers.json")
			fifo := filepath.Join(dir, "pipe")
			mkfifo(t, fifo)
			ticks := make(chan time.Time)
			src, err := live.NewFileSource(path, live.FileConfig{Interval: time.Minute, Tick: func(time.Duration) (<-chan time.Time, func()) {
				return ticks, func() {}
			}})
			require.NoError(t, err)
			looked := make(chan struct{})
			live.SetRead(src, func(string) ([]byte, string, error) {
				defer close(looked)
				f, err := os.Open(fifo) // blocks until releaseFIFO
				if err != nil {
					return nil, "", err
				}
				f.Close()
				return nil, "", errors.New("released")
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f, rec := followFile(t, ctx, src)

			ticks <- time.Time{} // the look is due again: still waiting
			select {
			case c := <-rec:
				t.Fatalf("a record after one interval: %+v", c)
			default:
			}
			ticks <- time.Time{}
			got := nextRecord(t, rec)
			assert.Equal(t, live.Unreadable, got.Result)
			assert.Contains(t, got.Err, path+": the file system has not answered for more than 1m0s")

			if stop == "Close" {
				within(t, "Close", func() { assert.NoError(t, f.Close()) })
			} else {
				cancel()
				within(t, "the follower, its context cancelled,", func() { <-f.Done() })
			}
			// The look ends once the pipe has a writer. (Retried: the
			// look may not be in its open yet.)
			deadline := time.After(promptly)
			for released := false; !released; {
				releaseFIFO(fifo)
				select {
				case <-looked:
					released = true
				case <-time.After(10 * time.Millisecond):
				case <-deadline:
					t.Fatal("the look did not end once the pipe had a writer")
				}
			}
		})
	}
}
