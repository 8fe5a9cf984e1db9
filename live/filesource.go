package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/govkit/breaker"
)

// DefaultFileInterval is how often a [FileSource] looks at its file
// unless told otherwise.
const DefaultFileInterval = time.Second

// FileConfig configures a [FileSource].
type FileConfig struct {
	// Interval is the time between two looks at the file. Zero means
	// DefaultFileInterval; it must not be negative.
	Interval time.Duration
	// Tick, when set, is the source of the ticks that drive the checks,
	// in place of a [time.Ticker], as in the watcher of package ops: Watch
	// calls it with Interval and makes one check per value received,
	// calling stop when it returns. A test drives the source with the
	// mock clock it gave the group ([breaker.WithClock]); with a
	// *clock.Mock from github.com/benbjohnson/clock:
	//
	//	Tick: func(d time.Duration) (<-chan time.Time, func()) {
	//		t := mock.Ticker(d)
	//		return t.C, t.Stop
	//	},
	Tick func(interval time.Duration) (ticks <-chan time.Time, stop func())
}

// A FileSource is a [Source] that follows one JSON file. It reads
// the file at start and then at every interval, and delivers it when its
// content has changed, with a version that is a hash of the content
// ("sha256:" and 16 hex digits). It reads by path each time, following
// symbolic links, so it survives what deployments do to files:
//
//   - an editor or a deployment tool that writes a new file and renames it
//     over the old one: the next look reads the new file;
//   - a Kubernetes ConfigMap volume, where the file is a link through a
//     ..data link that is swapped to a new directory: the same;
//   - a file briefly missing (deleted, then written again): a file missing
//     at one look is taken for one being replaced, and nothing is
//     delivered; missing at two looks in a row (or at start), it is
//     delivered as gone, and the group keeps the policy in force and logs
//     that it does;
//   - a half-written file: content that is not complete JSON is delivered
//     only if it is still there, unchanged, at the next look, so that a
//     writer caught in the middle is not reported as a bad document, while
//     a bad document is, one interval later;
//   - a file that cannot be read (permissions): delivered as an error,
//     once for each distinct error;
//   - a path that is not a regular file once links are followed (a named
//     pipe, a device, a socket, a directory): refused unopened, delivered
//     as an error that says what it is;
//   - a file system that does not answer (a hung network mount): a look
//     that has not returned by the second tick after it began is
//     delivered as an error, and no other look starts until it returns.
//
// Close and a cancelled context never wait for the file system: each look
// runs on a goroutine of its own, which Watch leaves behind if it must
// return while the look is stuck in a system call; that goroutine ends
// when the call returns, and holds nothing of the group.
//
// Polling keeps the core free of dependencies and its tests free of
// sleeps; reading a small file once a second costs next to nothing. A
// file larger than [breaker.MaxPolicyDocumentSize] is read (and hashed) only that
// far, and refused by the group.
//
// A FileSource is safe for concurrent use; each Watch follows the file on
// its own.
type FileSource struct {
	path     string
	interval time.Duration
	tick     func(time.Duration) (<-chan time.Time, func())
	read     func(path string) (data []byte, version string, err error)
	checked  func() // tests: called after the look made for each tick
}

// NewFileSource returns a source that follows the file at path. It
// returns an error for an empty path or a negative interval; the file
// need not exist yet.
func NewFileSource(path string, cfg FileConfig) (*FileSource, error) {
	if path == "" {
		return nil, errors.New("live: empty policy file path")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("live: FileConfig.Interval must not be negative")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	s := &FileSource{path: path, interval: cfg.Interval, tick: cfg.Tick, read: readPolicyFile}
	if s.interval == 0 {
		s.interval = DefaultFileInterval
	}
	return s, nil
}

// Origin returns "file:" and the file's absolute path.
func (s *FileSource) Origin() string { return "file:" + s.path }

// Watch delivers the file's document at start (or that it is missing or
// unreadable), then each change of it, until ctx is done. It returns as
// soon as ctx is done, even with a look stuck in the file system.
func (s *FileSource) Watch(ctx context.Context, deliver func(Document)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var ticks <-chan time.Time
	if s.tick != nil {
		c, stop := s.tick(s.interval)
		if c == nil || stop == nil {
			return errors.New("live: FileConfig.Tick returned a nil channel or stop function")
		}
		defer stop()
		ticks = c
	} else {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		ticks = t.C
	}
	w := fileWatch{src: s, deliver: deliver, first: true}
	// One look at a time, on its own goroutine; the channel holds its
	// result, so that the goroutine ends even after Watch has returned.
	looks := make(chan fileLook, 1)
	var (
		looking bool // a look is running
		forTick bool // it was made for a tick: checked is called after it
		due     bool // a tick came while it ran: look again after it
		waited  int  // ticks that came while it ran
	)
	look := func(tick bool) {
		looking, forTick, due, waited = true, tick, false, 0
		read := s.read
		if read == nil { // a FileSource not made by NewFileSource
			read = readPolicyFile
		}
		go func() {
			data, version, err := read(s.path)
			looks <- fileLook{data, version, err}
		}()
	}
	look(false)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l := <-looks:
			looking = false
			w.check(l)
			if forTick && s.checked != nil {
				s.checked()
			}
			if due {
				look(true)
			}
		case _, ok := <-ticks:
			if !ok {
				<-ctx.Done()
				return ctx.Err()
			}
			if !looking {
				look(true)
				continue
			}
			due = true
			// Two ticks into a look, it has run for more than an
			// interval, whenever it began.
			if waited++; waited == 2 {
				w.report(fmt.Errorf("live: reading %s: the file system has not answered for more than %v", s.path, s.interval))
			}
		}
	}
}

// fileLook is what one look at the file found.
type fileLook struct {
	data    []byte
	version string
	err     error
}

// fileWatch is the state of one Watch between looks.
type fileWatch struct {
	src     *FileSource
	deliver func(Document)
	first   bool
	last    string // version last delivered; "" after gone or an error
	missing int    // looks in a row that found no file
	gone    bool   // gone delivered, and the file not back since
	err     string // error last delivered
	suspect string // version of incomplete content seen once, held back
}

func (w *fileWatch) check(l fileLook) {
	first := w.first
	w.first = false
	origin := w.src.Origin()
	data, version, err := l.data, l.version, l.err
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.missing++
		w.err, w.suspect = "", ""
		if (first || w.missing >= 2) && !w.gone {
			w.gone, w.last = true, ""
			w.deliver(Document{Origin: origin, Gone: true})
		}
		return
	case err != nil:
		w.missing, w.suspect = 0, ""
		w.report(err)
		return
	}
	w.missing, w.gone, w.err = 0, false, ""
	if version == w.last {
		w.suspect = ""
		return
	}
	if !json.Valid(data) && version != w.suspect {
		w.suspect = version // perhaps half-written: look again first
		return
	}
	w.suspect, w.last = "", version
	w.deliver(Document{Origin: origin, Version: version, Data: data})
}

// report delivers err, unless it is the error delivered last.
func (w *fileWatch) report(err error) {
	if err.Error() != w.err {
		w.err, w.last = err.Error(), ""
		w.deliver(Document{Origin: w.src.Origin(), Err: err})
	}
}

// readPolicyFile reads at most breaker.MaxPolicyDocumentSize+1 bytes of
// the file, so that the group can tell it is too large, and hashes what
// it read.
// It refuses a path that is not a regular file once links are followed,
// before it opens it (opening a named pipe waits for a writer; a device
// may never end), and again after, in case the path was replaced between
// the two; the open does not wait where the system can say so.
func readPolicyFile(path string) ([]byte, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	if err := regular(path, fi); err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, "", err
	}
	if err := regular(path, fi); err != nil {
		return nil, "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, breaker.MaxPolicyDocumentSize+1))
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return data, "sha256:" + hex.EncodeToString(sum[:8]), nil
}

// regular returns an error that says what the file at path is, unless
// it is a regular file.
func regular(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	var what string
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeDir != 0:
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "an irregular file (" + m.Type().String() + ")"
	}
	return fmt.Errorf("live: %s is %s, not a regular file", path, what)
}
