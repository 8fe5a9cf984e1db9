package breaker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
	// mock clock it gave the group ([WithClock]); with a *clock.Mock from
	// github.com/benbjohnson/clock:
	//
	//	Tick: func(d time.Duration) (<-chan time.Time, func()) {
	//		t := mock.Ticker(d)
	//		return t.C, t.Stop
	//	},
	Tick func(interval time.Duration) (ticks <-chan time.Time, stop func())
}

// A FileSource is a [PolicySource] that follows one JSON file. It reads
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
//   - a file that cannot be read (permissions, a directory in its place):
//     delivered as an error, once for each distinct error.
//
// Polling keeps the core free of dependencies and its tests free of
// sleeps; reading a small file once a second costs next to nothing. A
// file larger than [MaxPolicyDocumentSize] is read only that far (and
// hashed whole), and refused by the group.
//
// A FileSource is safe for concurrent use; each Watch follows the file on
// its own.
type FileSource struct {
	path     string
	interval time.Duration
	tick     func(time.Duration) (<-chan time.Time, func())
	checked  func() // tests: called after each look
}

// NewFileSource returns a source that follows the file at path. It
// returns an error for an empty path or a negative interval; the file
// need not exist yet.
func NewFileSource(path string, cfg FileConfig) (*FileSource, error) {
	if path == "" {
		return nil, errors.New("breaker: empty policy file path")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("breaker: FileConfig.Interval must not be negative")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	s := &FileSource{path: path, interval: cfg.Interval, tick: cfg.Tick}
	if s.interval == 0 {
		s.interval = DefaultFileInterval
	}
	return s, nil
}

// Origin returns "file:" and the file's absolute path.
func (s *FileSource) Origin() string { return "file:" + s.path }

// Watch delivers the file's document at start (or that it is missing or
// unreadable), then each change of it, until ctx is done.
func (s *FileSource) Watch(ctx context.Context, deliver func(PolicyDocument)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var ticks <-chan time.Time
	if s.tick != nil {
		c, stop := s.tick(s.interval)
		if c == nil || stop == nil {
			return errors.New("breaker: FileConfig.Tick returned a nil channel or stop function")
		}
		defer stop()
		ticks = c
	} else {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		ticks = t.C
	}
	w := fileWatch{src: s, deliver: deliver, first: true}
	w.check()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-ticks:
			if !ok {
				<-ctx.Done()
				return ctx.Err()
			}
			w.check()
			if s.checked != nil {
				s.checked()
			}
		}
	}
}

// fileWatch is the state of one Watch between looks.
type fileWatch struct {
	src     *FileSource
	deliver func(PolicyDocument)
	first   bool
	last    string // version last delivered; "" after gone or an error
	missing int    // looks in a row that found no file
	gone    bool   // gone delivered, and the file not back since
	err     string // error last delivered
	suspect string // version of incomplete content seen once, held back
}

func (w *fileWatch) check() {
	first := w.first
	w.first = false
	origin := w.src.Origin()
	data, version, err := readPolicyFile(w.src.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.missing++
		w.err, w.suspect = "", ""
		if (first || w.missing >= 2) && !w.gone {
			w.gone, w.last = true, ""
			w.deliver(PolicyDocument{Origin: origin, Gone: true})
		}
		return
	case err != nil:
		w.missing, w.suspect = 0, ""
		if err.Error() != w.err {
			w.err, w.last = err.Error(), ""
			w.deliver(PolicyDocument{Origin: origin, Err: err})
		}
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
	w.deliver(PolicyDocument{Origin: origin, Version: version, Data: data})
}

// readPolicyFile reads at most MaxPolicyDocumentSize+1 bytes of the file,
// so that the group can tell it is too large, and hashes all of it.
func readPolicyFile(path string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	h := sha256.New()
	var buf bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(h, &capWriter{&buf, MaxPolicyDocumentSize + 1}), f); err != nil {
		return nil, "", err
	}
	sum := h.Sum(nil)
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:8]), nil
}

// capWriter keeps the first n bytes written to it and drops the rest.
type capWriter struct {
	buf *bytes.Buffer
	n   int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.n - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
