package breakeretcd

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/govkit/breaker/live"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of [Config].
const (
	// DefaultCheckInterval is how often a following source asks the store
	// for the key when the watch has been quiet, and the longest it waits
	// between attempts while the store does not answer.
	DefaultCheckInterval = 10 * time.Second

	// DefaultRequestTimeout bounds one read of the key.
	DefaultRequestTimeout = 5 * time.Second
)

// Config configures a [Source].
type Config struct {
	// Client is the etcd client to read and watch with. It is required.
	// The source never closes it: the caller owns it, and closing it ends
	// every Watch on it with an error.
	Client *clientv3.Client

	// Key is the etcd key holding the group policy document, one key per
	// service ("/services/payments/breakers"). It is required.
	Key string

	// CheckInterval is how often, while the watch is quiet, the source
	// reads the key to learn that the store still answers (and to catch up
	// should the watch have fallen behind); it is also the longest pause
	// between retries while the store does not answer. Default
	// DefaultCheckInterval (10s).
	CheckInterval time.Duration

	// RequestTimeout bounds each read of the key. Default
	// DefaultRequestTimeout (5s).
	RequestTimeout time.Duration
}

// A Source follows one etcd key holding a group policy document: it
// implements [live.Source]. Watch reads the key, delivers it, and
// then watches the key from the revision it read, so no change between the
// read and the watch is missed. The package documentation lists what it
// delivers when the key is absent or deleted, when the watch's revision
// has been compacted and when the store does not answer.
//
// A Source holds no state between Watch calls and is safe for concurrent
// use; each Watch follows the key on its own.
type Source struct {
	cli      *clientv3.Client
	key      string
	check    time.Duration
	timeout  time.Duration
	origin   string
	minPause time.Duration

	// beforeWatch, when set by a test, runs after a read and before the
	// watch starts from the revision that read saw.
	beforeWatch func(rev int64)
}

// New returns a source that follows cfg.Key. It checks cfg and reports
// every bad field; it does not contact the store.
func New(cfg Config) (*Source, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("Client: must not be nil"))
	}
	if cfg.Key == "" {
		errs = append(errs, errors.New("Key: must not be empty"))
	}
	if cfg.CheckInterval < 0 {
		errs = append(errs, fmt.Errorf("CheckInterval: must not be negative, got %v", cfg.CheckInterval))
	}
	if cfg.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("RequestTimeout: must not be negative, got %v", cfg.RequestTimeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("breakeretcd: invalid config: %w", errors.Join(errs...))
	}
	s := &Source{
		cli:      cfg.Client,
		key:      cfg.Key,
		check:    cfg.CheckInterval,
		timeout:  cfg.RequestTimeout,
		origin:   "etcd:" + cfg.Key,
		minPause: 50 * time.Millisecond,
	}
	if s.check == 0 {
		s.check = DefaultCheckInterval
	}
	if s.timeout == 0 {
		s.timeout = DefaultRequestTimeout
	}
	if s.minPause > s.check {
		s.minPause = s.check
	}
	return s, nil
}

// Origin returns the origin of the documents the source delivers:
// "etcd:" followed by the key.
func (s *Source) Origin() string { return s.origin }

// ErrClientClosed is returned by Watch when the etcd client it reads with
// has been closed: the source cannot go on.
var ErrClientClosed = errors.New("breakeretcd: etcd client closed")

// Watch implements [live.Source]: it delivers the key's current
// state and then each change, until ctx is done, and then returns
// ctx.Err(). It returns ErrClientClosed if the client is closed under it,
// and an error if deliver is nil. Watch calls deliver from the goroutine
// that called Watch, never after it has returned, and leaves no goroutine
// of its own behind.
func (s *Source) Watch(ctx context.Context, deliver func(live.Document)) error {
	if deliver == nil {
		return errors.New("breakeretcd: Watch: nil deliver func")
	}
	f := &follower{Source: s, deliver: deliver}
	pause := s.minPause
	wait := func() error {
		t := time.NewTimer(pause)
		defer t.Stop()
		pause = min(2*pause, s.check)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	for {
		rev, err := f.read(ctx)
		if err != nil {
			if err := s.fatal(ctx); err != nil {
				return err
			}
			f.fail(err)
			if err := wait(); err != nil {
				return err
			}
			continue
		}
		f.moved = false // the watch starts from this read
		if s.beforeWatch != nil {
			s.beforeWatch(rev)
		}
		again := f.follow(ctx, rev+1)
		if err := s.fatal(ctx); err != nil {
			return err
		}
		// The watch ended (compacted, cancelled by the server, lost its
		// leader): read again at once after a compaction or a watch that
		// was working, so a compaction costs one read and no delay; after
		// a watch that ended with nothing heard, pause, so a store that
		// cancels every watch is not read in a tight loop.
		if again {
			pause = s.minPause
		} else if err := wait(); err != nil {
			return err
		}
	}
}

// fatal returns the error Watch ends with, if it must end.
func (s *Source) fatal(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.cli.Ctx().Err() != nil {
		return ErrClientClosed
	}
	return nil
}

// follower is the state of one Watch call.
type follower struct {
	*Source
	deliver func(live.Document)

	delivered bool     // a state of the key has been delivered
	rev       int64    // the revision of the state last delivered
	gone      bool     // the state last delivered was Gone
	sum       [32]byte // the SHA-256 of the value last delivered, unless gone
	failing   bool     // an Err was delivered and the store has not answered since
	seen      int64    // the highest revision of the store seen
	cluster   uint64   // the store's cluster ID, once a response has given it
	moved     bool     // a read found a new store: the watch must start again
}

// read gets the key, delivers its state if it is news, and returns the
// store's revision at the read.
func (f *follower) read(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.cli.Get(rctx, f.key)
	if err != nil {
		return 0, err
	}
	head := resp.Header.GetRevision()
	rev, value, present := head, []byte(nil), false
	if len(resp.Kvs) > 0 {
		kv := resp.Kvs[0]
		rev, value, present = kv.ModRevision, kv.Value, true
	}
	if f.newStore(resp.Header.GetClusterId(), head, rev, value, present) {
		// What was delivered belongs to a store that is gone: the
		// state read is news whatever its revision.
		f.delivered, f.seen, f.moved = false, 0, true
	}
	f.seen = max(f.seen, head)
	if id := resp.Header.GetClusterId(); id != 0 {
		f.cluster = id
	}
	f.observe(rev, value, present)
	return head, nil
}

// newStore reports whether a read (linearizable, as Get is by default)
// shows a store other than the one whose state was delivered last: a
// store rebuilt empty, or restored from an older backup, on the same
// address. In one store's history a read sees at least every revision
// seen before, and the key's state at or after the one delivered, the
// same state only at the same revision; a rebuilt store starts its
// revisions again from 1 and breaks one of these. Another cluster ID is
// another store too, but a rebuilt store may keep its cluster ID (see
// docs/internals.md, "Live policy sources").
func (f *follower) newStore(cluster uint64, head, rev int64, value []byte, present bool) bool {
	switch {
	case !f.delivered:
		return false
	case cluster != 0 && f.cluster != 0 && cluster != f.cluster:
		return true
	case head < f.seen || rev < f.rev:
		return true
	case rev > f.rev:
		return false
	}
	// The same revision: the same state, or another store.
	return present == f.gone || present && sha256.Sum256(value) != f.sum
}

// follow watches the key from rev until the watch ends or ctx is done,
// delivering each change, and reading the key whenever the watch has been
// quiet for a check interval. It reports whether the key should be read
// again at once: the watch was working, or it ended on a compaction.
func (f *follower) follow(ctx context.Context, rev int64) (again bool) {
	// WithRequireLeader makes a member cut off from its cluster end the
	// watch (ErrNoLeader) instead of keeping it open and silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	// The client's Watch blocks until the server has created the watch,
	// which it cannot while it is unreachable: open the watch on a
	// goroutine so that checks (and the Err they report) go on meanwhile.
	opening := make(chan clientv3.WatchChan, 1)
	go func() { opening <- f.cli.Watch(wctx, f.key, clientv3.WithRev(rev)) }()
	var wch clientv3.WatchChan // nil, so never ready, until opened
	defer func() {
		// Cancelling the watch's context is what ends the goroutines the
		// client runs for it, and makes a Watch still opening return.
		cancel()
		if wch == nil {
			<-opening
		}
	}()
	tick := time.NewTicker(f.check)
	defer tick.Stop()
	quiet := true
	for {
		select {
		case <-ctx.Done():
			return false
		case wch = <-opening:
		case resp, ok := <-wch:
			if !ok {
				return again
			}
			if resp.CompactRevision != 0 {
				return true
			}
			if resp.Canceled || resp.Err() != nil {
				return again
			}
			if id := resp.Header.GetClusterId(); id != 0 && f.cluster != 0 && id != f.cluster {
				// The watch resumed on another cluster: what it says
				// is of another history. A read decides.
				return true
			}
			again, quiet = true, false
			if n := len(resp.Events); n > 0 {
				ev := resp.Events[n-1]
				f.seen = max(f.seen, ev.Kv.ModRevision)
				f.observe(ev.Kv.ModRevision, ev.Kv.Value, ev.Type != clientv3.EventTypeDelete)
			} else if f.failing {
				// A progress notice after an outage: the store answers
				// again; read the key to report its state.
				_, _ = f.read(ctx) // a failure is already reported
			}
		case <-tick.C:
			if !quiet && !f.failing {
				quiet = true
				continue
			}
			if _, err := f.read(ctx); err != nil {
				if ctx.Err() != nil || f.cli.Ctx().Err() != nil {
					return false
				}
				f.fail(err)
			}
		}
		if f.moved {
			// A read found a new store, whose revisions this watch,
			// resumed from the old store's, would skip: watch anew.
			return true
		}
	}
}

// observe delivers a state of the key seen at revision rev, unless it has
// already been delivered or is older than the state delivered last. After
// an Err it delivers the current state even if unchanged.
func (f *follower) observe(rev int64, value []byte, present bool) {
	switch {
	case !f.delivered:
	case f.failing && rev >= f.rev:
	case rev <= f.rev:
		return
	case !present && f.gone:
		return
	}
	f.delivered, f.rev, f.gone, f.failing = true, rev, !present, false
	f.sum = [32]byte{}
	if present {
		f.sum = sha256.Sum256(value)
	}
	doc := live.Document{Origin: f.origin, Version: strconv.FormatInt(rev, 10)}
	if present {
		doc.Data = value
		if doc.Data == nil {
			doc.Data = []byte{}
		}
	} else {
		doc.Gone = true
	}
	f.deliver(doc)
}

// fail delivers one Err document per outage.
func (f *follower) fail(err error) {
	if f.failing {
		return
	}
	f.failing = true
	f.deliver(live.Document{
		Origin: f.origin,
		Err:    fmt.Errorf("breakeretcd: reading %q: %w", f.key, err),
	})
}
