package breakeretcd

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govkit/breaker/live"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// The tests run a real etcd server in-process. Its timings are shortened
// so that a test, restarts included, takes well under a few seconds.
const (
	testCheck   = 150 * time.Millisecond // Config.CheckInterval
	testTimeout = 150 * time.Millisecond // Config.RequestTimeout
	waitFor     = 5 * time.Second        // longest wait for one delivery
	// promptly bounds what must happen at once, such as Watch returning
	// after its context is cancelled: far above the timings above on a
	// loaded machine, far below a Watch stuck on the store.
	promptly = time.Second
)

// etcdServer is an embedded single-member etcd cluster on loopback ports
// with its data in a temporary directory, which outlives a Stop so the
// server can be started again on the same data.
//
// Clients reach it through a forwarder on its client URL. Stop first cuts
// every forwarded connection, as a crashed server would: without that,
// stopping a server with a watch open takes over five seconds, as embed
// waits that long for open streams before it closes them. The forwarder
// keeps listening while the server is down, refusing what it accepts, so
// no one else can take the port before the server is back; the server
// itself listens on a new port at each start, which only the forwarder
// needs to know.
type etcdServer struct {
	t      *testing.T
	dir    string
	peer   url.URL
	client url.URL // where clients of the test find it
	e      *embed.Etcd
	fwd    *forwarder
	// token, if set, is the initial cluster token of the next start on
	// a new data directory; the cluster ID derives from it.
	token string
}

// freeURL returns an http URL on a loopback port that was free a moment
// ago. embed cannot listen on port 0 for every URL it is given (it needs
// to know its advertised URLs before it listens), so the port is picked
// by listening on :0 first.
func freeURL(t *testing.T) url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// FreeURL returns a URL on a free loopback port other than the server's
// peer port, which is free too while the server is stopped.
func (s *etcdServer) FreeURL() url.URL {
	s.t.Helper()
	for {
		if u := freeURL(s.t); u.Host != s.peer.Host {
			return u
		}
	}
}

// startEtcd starts a fresh server and stops it when the test ends.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	// The forwarder listens before the peer port is picked, so the two
	// cannot be the same port.
	fwd := listenForwarder(t)
	s := &etcdServer{t: t, dir: t.TempDir(), fwd: fwd, peer: freeURL(t)}
	s.client = url.URL{Scheme: "http", Host: fwd.Addr()}
	s.Start()
	t.Cleanup(func() {
		s.Stop()
		s.fwd.Close()
	})
	return s
}

// Start starts the server (again, after a Stop) where the clients of the
// test find it.
func (s *etcdServer) Start() {
	s.t.Helper()
	backend := s.FreeURL()
	s.StartOn(backend)
	s.fwd.Up(backend.Host)
}

// StartOn starts the server on the client URL u only, with the same data:
// the clients of the test, which know only the usual URL, cannot reach it.
func (s *etcdServer) StartOn(u url.URL) {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "breakeretcd-test"
	cfg.Dir = s.dir
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.ListenClientUrls = []url.URL{u}
	cfg.AdvertiseClientUrls = []url.URL{u}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if s.token != "" {
		cfg.InitialClusterToken = s.token
	}
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("starting etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		s.t.Fatalf("etcd failed: %v", err)
	case <-time.After(waitFor):
		e.Close()
		s.t.Fatal("etcd not ready in time")
	}
	s.e = e
}

// Rebuild stops the server and starts it again empty, on a new data
// directory, where the clients of the test find it: a store rebuilt
// after its volume was lost, its revisions starting again from 1.
func (s *etcdServer) Rebuild() {
	s.t.Helper()
	s.Stop()
	s.dir = s.t.TempDir()
	s.Start()
}

// Stop stops the server, keeping its data. It is a no-op if stopped.
func (s *etcdServer) Stop() {
	s.fwd.Down()
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// forwarder copies the TCP connections it accepts to the server while it
// is up, and closes them at once while it is down.
type forwarder struct {
	ln       net.Listener
	accepted sync.WaitGroup // the accepting goroutine
	copies   sync.WaitGroup // the copying goroutines; Add only with mu held and up set

	mu    sync.Mutex
	up    bool
	to    string
	conns map[net.Conn]struct{}
}

func listenForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, conns: map[net.Conn]struct{}{}}
	f.accepted.Add(1)
	go f.accept()
	return f
}

// Addr is the address it listens on.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// Up forwards from now on to the address to.
func (f *forwarder) Up(to string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up, f.to = true, to
}

// Down cuts every forwarded connection and refuses new ones until Up.
func (f *forwarder) Down() {
	f.mu.Lock()
	f.up = false
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
	f.mu.Unlock()
	f.copies.Wait()
}

// Close stops listening and waits for its goroutines to end.
func (f *forwarder) Close() {
	f.Down()
	f.ln.Close()
	f.accepted.Wait()
}

func (f *forwarder) accept() {
	defer f.accepted.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		up, to := f.up, f.to
		f.mu.Unlock()
		if !up {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", to)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		if !f.up {
			f.mu.Unlock()
			c.Close()
			b.Close()
			continue
		}
		f.conns[c], f.conns[b] = struct{}{}, struct{}{}
		f.copies.Add(2)
		f.mu.Unlock()
		go f.copy(c, b)
		go f.copy(b, c)
	}
}

func (f *forwarder) copy(dst, src net.Conn) {
	defer f.copies.Done()
	_, _ = io.Copy(dst, src) // ends when either side closes
	dst.Close()
	src.Close()
}

// Client returns a client of the server's usual URL, closed when the
// test ends. It reconnects within a fraction of a second of the server's
// return (gRPC's default backoff would wait seconds) and logs nothing.
func (s *etcdServer) Client() *clientv3.Client { return s.ClientOf(s.client) }

// ClientOf returns a client of the server on the client URL u.
func (s *etcdServer) ClientOf(u url.URL) *clientv3.Client {
	s.t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{u.String()},
		Logger:    zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.5, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: 100 * time.Millisecond,
		})},
		BackoffWaitBetween: 10 * time.Millisecond,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cli.Close() })
	return cli
}

// put writes the key and returns its new ModRevision.
func put(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	resp, err := cli.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// del deletes the key and returns the revision of the deletion.
func del(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	resp, err := cli.Delete(ctx, key)
	if err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
	if resp.Deleted != 1 {
		t.Fatalf("delete %s: deleted %d keys, want 1", key, resp.Deleted)
	}
	return resp.Header.Revision
}

// compact compacts the store's history up to its current revision.
func compact(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	resp, err := cli.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact %d: %v", rev, err)
	}
	return rev
}

// newSource returns a source of key with the tests' short timings.
func newSource(t *testing.T, cli *clientv3.Client, key string) *Source {
	t.Helper()
	return newSourceChecking(t, cli, key, testCheck)
}

// newSourceChecking returns a source of key that checks a quiet watch
// every check.
func newSourceChecking(t *testing.T, cli *clientv3.Client, key string, check time.Duration) *Source {
	t.Helper()
	src, err := New(Config{Client: cli, Key: key, CheckInterval: check, RequestTimeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// watching is a Watch running on its own goroutine, its deliveries on a
// channel.
type watching struct {
	t      *testing.T
	docs   chan live.Document
	cancel context.CancelFunc
	done   chan error
}

// watch starts src.Watch and stops it when the test ends.
func watch(t *testing.T, src *Source) *watching {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watching{t: t, docs: make(chan live.Document, 100), cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- src.Watch(ctx, func(d live.Document) { w.docs <- d }) }()
	t.Cleanup(func() { w.Stop() })
	return w
}

// Stop cancels the Watch and returns what it returned.
func (w *watching) Stop() error {
	w.t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		w.done <- err // so that a second Stop returns it too
		return err
	case <-time.After(waitFor):
		w.t.Fatal("Watch did not return after its context was cancelled")
		return nil
	}
}

// Next returns the next delivered document.
func (w *watching) Next() live.Document {
	w.t.Helper()
	select {
	case d := <-w.docs:
		return d
	case <-time.After(waitFor):
		w.t.Fatal("no document delivered")
		return live.Document{}
	}
}

// Until returns the first delivered document that match accepts, and the
// ones delivered before it.
func (w *watching) Until(what string, match func(live.Document) bool) (live.Document, []live.Document) {
	w.t.Helper()
	var before []live.Document
	deadline := time.After(waitFor)
	for {
		select {
		case d := <-w.docs:
			if match(d) {
				return d, before
			}
			before = append(before, d)
		case <-deadline:
			w.t.Fatalf("no %s delivered; got instead %s", what, describeAll(before))
			return live.Document{}, nil
		}
	}
}

// Quiet fails the test if a document is delivered within d.
func (w *watching) Quiet(d time.Duration) {
	w.t.Helper()
	select {
	case doc := <-w.docs:
		w.t.Fatalf("unexpected delivery: %s", describe(doc))
	case <-time.After(d):
	}
}

func describe(d live.Document) string {
	switch {
	case d.Err != nil:
		return "{" + d.Origin + " err: " + d.Err.Error() + "}"
	case d.Gone:
		return "{" + d.Origin + "@" + d.Version + " gone}"
	default:
		return "{" + d.Origin + "@" + d.Version + " " + string(d.Data) + "}"
	}
}

func describeAll(ds []live.Document) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = describe(d)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// isData matches the document with the given data.
func isData(data string) func(live.Document) bool {
	return func(d live.Document) bool { return d.Err == nil && !d.Gone && string(d.Data) == data }
}
