package breakeretcd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/live"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	// No goroutine of the server, the clients or a Watch may outlive the
	// tests. Nothing is ignored: every test stops its server and closes
	// its clients.
	goleak.VerifyTestMain(m)
}

const key = "/services/payments/breakers"

const (
	docA = `{"default": {"error_ratio": 0.4}}`
	docB = `{"default": {"error_ratio": 0.3}}`
	docC = `{"default": {"error_ratio": 0.2}}`
	docD = `{"default": {"error_ratio": 0.1}}`
)

func rev(r int64) string { return strconv.FormatInt(r, 10) }

func TestWatch_DeliversTheKeyThenEachChange(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r1 := put(t, cli, key, docA)
	put(t, cli, "/services/orders/breakers", docC) // another service's key

	w := watch(t, newSource(t, cli, key))
	want := live.Document{Origin: "etcd:" + key, Version: rev(r1), Data: []byte(docA)}
	if got := w.Next(); describe(got) != describe(want) {
		t.Fatalf("first delivery = %s, want %s", describe(got), describe(want))
	}

	r2 := put(t, cli, key, docB)
	put(t, cli, "/services/orders/breakers", docD)
	if got := w.Next(); got.Version != rev(r2) || string(got.Data) != docB || got.Origin != "etcd:"+key {
		t.Fatalf("after a put: %s, want %s at version %d", describe(got), docB, r2)
	}
	w.Quiet(2 * testCheck) // other keys, and quiet checks, deliver nothing
}

// A read finding no key delivers Gone, so the group runs on the policy its
// code gave it and says so; creating the key later applies it.
func TestWatch_KeyAbsentAtStart_DeliversGoneThenTheKeyOnceCreated(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r0 := put(t, cli, "/elsewhere", "x")

	w := watch(t, newSource(t, cli, key))
	got := w.Next()
	if !got.Gone || got.Data != nil || got.Err != nil || got.Version != rev(r0) || got.Origin != "etcd:"+key {
		t.Fatalf("key absent at start: %s (data %q, err %v), want gone at version %d", describe(got), got.Data, got.Err, r0)
	}
	w.Quiet(2 * testCheck) // the absence is reported once, not at every check

	r1 := put(t, cli, key, docA)
	if got := w.Next(); got.Gone || got.Version != rev(r1) || string(got.Data) != docA {
		t.Fatalf("key created: %s, want %s at version %d", describe(got), docA, r1)
	}
}

func TestWatch_KeyDeleted_DeliversGoneThenTheKeyOnceRecreated(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))

	rd := del(t, cli, key)
	if got := w.Next(); !got.Gone || got.Data != nil || got.Version != rev(rd) {
		t.Fatalf("key deleted: %s, want gone at version %d", describe(got), rd)
	}
	w.Quiet(2 * testCheck) // the deletion is reported once, not at every check

	r2 := put(t, cli, key, docB)
	if got := w.Next(); got.Gone || got.Version != rev(r2) || string(got.Data) != docB {
		t.Fatalf("key recreated: %s, want %s at version %d", describe(got), docB, r2)
	}
}

// An empty value is handed on as an empty document, for the group to
// reject loudly, not mistaken for a deleted key.
func TestWatch_EmptyValue_DeliveredAsEmptyDocument(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r := put(t, cli, key, "")
	w := watch(t, newSource(t, cli, key))
	got := w.Next()
	if got.Gone || got.Err != nil || got.Data == nil || len(got.Data) != 0 || got.Version != rev(r) {
		t.Fatalf("empty value: %s (data %#v), want an empty non-nil document at version %d", describe(got), got.Data, r)
	}
}

// Changes that land between the read and the watch, followed by a
// compaction of their revisions, make the watch fail with ErrCompacted
// at its start: the source reads again and goes on watching. The quiet
// watch's periodic check is set far beyond the test (a check would also
// read the key), so the delivery can only come from the compaction path.
func TestWatch_CompactedRevision_ReadsAgainAndGoesOn(t *testing.T) {
	const check = time.Minute
	srv := startEtcd(t)
	cli := srv.Client()
	r1 := put(t, cli, key, docA)
	src := newSourceChecking(t, cli, key, check)
	var r3 int64
	compacted := make(chan int64, 1)
	var calls atomic.Int32
	src.beforeWatch = func(rev int64) {
		if calls.Add(1) > 1 {
			return
		}
		put(t, cli, key, docB)
		r3 = put(t, cli, key, docC)
		compacted <- compact(t, cli)
	}

	start := time.Now()
	w := watch(t, src)
	if got := w.Next(); got.Version != rev(r1) || string(got.Data) != docA {
		t.Fatalf("first delivery: %s, want %s at %d", describe(got), docA, r1)
	}
	<-compacted
	// docB was superseded before the source could see it: it is skipped.
	if got := w.Next(); got.Version != rev(r3) || string(got.Data) != docC {
		t.Fatalf("after the compaction: %s, want %s at %d", describe(got), docC, r3)
	}
	if d := time.Since(start); d > check/2 {
		t.Errorf("the compaction was handled after %v, want at once (long before the %v check)", d, check)
	}
	r4 := put(t, cli, key, docD)
	if got := w.Next(); got.Version != rev(r4) || string(got.Data) != docD {
		t.Fatalf("after recovering from the compaction: %s, want %s at %d", describe(got), docD, r4)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the source started %d watches, want 2 (one failed on the compaction, one after the new read)", n)
	}
}

// Changes that reach the watch together (here: made between the read and
// the watch, so the watch starts behind and catches up in one response)
// are delivered as the latest alone.
func TestWatch_SeveralChangesAtOnce_DeliversOnlyTheLatest(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r1 := put(t, cli, key, docA)
	src := newSource(t, cli, key)
	var calls atomic.Int32
	var r3 int64
	src.beforeWatch = func(int64) {
		if calls.Add(1) == 1 {
			put(t, cli, key, docB)
			r3 = put(t, cli, key, docC)
		}
	}
	w := watch(t, src)
	if got := w.Next(); got.Version != rev(r1) || string(got.Data) != docA {
		t.Fatalf("first delivery: %s, want %s at %d", describe(got), docA, r1)
	}
	if got := w.Next(); got.Version != rev(r3) || string(got.Data) != docC {
		t.Fatalf("after two changes at once: %s, want %s at %d alone", describe(got), docC, r3)
	}
	w.Quiet(2 * testCheck)
}

// The server stops and comes back on the same data: the source reports
// that it cannot read, then follows again.
func TestWatch_ServerRestart_ReportsErrThenFollowsAgain(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r1 := put(t, cli, key, docA)
	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))

	srv.Stop()
	got := w.Next()
	if got.Err == nil || got.Data != nil || got.Gone || got.Origin != "etcd:"+key {
		t.Fatalf("server stopped: %s, want one Err document", describe(got))
	}
	if !strings.Contains(got.Err.Error(), key) {
		t.Errorf("Err %q does not name the key", got.Err)
	}
	w.Quiet(3 * testCheck) // one Err per outage, not one per retry

	srv.Start()
	// The first answer after an outage reports the key's state, unchanged
	// here, so the record shows the source is back.
	if got := w.Next(); got.Err != nil || got.Version != rev(r1) || string(got.Data) != docA {
		t.Fatalf("server back: %s, want %s at %d again", describe(got), docA, r1)
	}
	r2 := put(t, cli, key, docB)
	if got := w.Next(); got.Version != rev(r2) || string(got.Data) != docB {
		t.Fatalf("change after the restart: %s, want %s at %d", describe(got), docB, r2)
	}
}

// The server goes away after the source has read the key and before its
// watch is open. The etcd client's Watch does not return until the server
// has created the watch, so a source that waited for it reported nothing
// until the server came back; the outage must be reported like any other.
func TestWatch_ServerGoneBeforeTheWatchOpensIsReported(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	src := newSource(t, cli, key)
	stopped := make(chan struct{})
	var calls atomic.Int32
	src.beforeWatch = func(int64) {
		if calls.Add(1) == 1 {
			srv.Stop()
			close(stopped)
		}
	}
	w := watch(t, src)
	w.Until("the document", isData(docA))
	<-stopped
	if _, before := w.Until("an Err", func(d live.Document) bool { return d.Err != nil }); len(before) != 0 {
		t.Fatalf("before the Err, delivered %s", describeAll(before))
	}
	srv.Start()
	w.Until("the document again", isData(docA))
	r := put(t, cli, key, docB)
	if got := w.Next(); got.Version != rev(r) || string(got.Data) != docB {
		t.Fatalf("after the server came back: %s, want %s at %d", describe(got), docB, r)
	}
}

// While the server is out of the source's reach (here: restarted on
// another client port) the key changes, and then the history is
// compacted. When the source can reach it again, the change is delivered,
// and the watch, whose revision is gone, does not stall.
func TestWatch_ServerAway_ChangesMadeMeanwhileArePickedUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compact bool
	}{{"kept history", false}, {"compacted history", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startEtcd(t)
			cli := srv.Client()
			put(t, cli, key, docA)
			src := newSource(t, cli, key)
			var watches atomic.Int32
			src.beforeWatch = func(int64) { watches.Add(1) }
			w := watch(t, src)
			w.Until("the document", isData(docA))

			srv.Stop()
			elsewhere := srv.FreeURL()
			srv.StartOn(elsewhere)
			other := srv.ClientOf(elsewhere)
			put(t, other, key, docB)
			r3 := put(t, other, key, docC)
			if tc.compact {
				compact(t, other)
			}
			other.Close()
			if _, before := w.Until("an Err", func(d live.Document) bool { return d.Err != nil }); len(before) != 0 {
				t.Fatalf("while away, delivered %s before the Err", describeAll(before))
			}
			srv.Stop()
			srv.Start()

			got, before := w.Until("the change made while away", isData(docC))
			if got.Version != rev(r3) {
				t.Fatalf("change made while away: %s, want version %d", describe(got), r3)
			}
			if len(before) != 0 {
				t.Fatalf("before the change, delivered %s (docB was superseded, and one Err per outage)", describeAll(before))
			}
			// The watch resumes by itself where it was; only when that
			// revision is compacted does the source read and watch anew.
			// (The change may have come through a check's read before the
			// watch resumed, so wait for it.)
			want := int32(1)
			if tc.compact {
				want = 2
			}
			deadline := time.Now().Add(waitFor)
			for watches.Load() < want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			r4 := put(t, cli, key, docD)
			if got := w.Next(); got.Version != rev(r4) || string(got.Data) != docD {
				t.Fatalf("change after coming back: %s, want %s at %d", describe(got), docD, r4)
			}
			if n := watches.Load(); n != want {
				t.Fatalf("the source opened %d watches, want %d", n, want)
			}
		})
	}
}

// The key is deleted while the server is out of reach: coming back, the
// source reports Gone.
func TestWatch_ServerAway_DeletionMadeMeanwhileIsPickedUp(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))

	srv.Stop()
	elsewhere := srv.FreeURL()
	srv.StartOn(elsewhere)
	other := srv.ClientOf(elsewhere)
	rd := del(t, other, key)
	other.Close()
	w.Until("an Err", func(d live.Document) bool { return d.Err != nil })
	srv.Stop()
	srv.Start()

	got, before := w.Until("gone", func(d live.Document) bool { return d.Gone })
	if len(before) != 0 {
		t.Fatalf("before gone, delivered %s", describeAll(before))
	}
	// The read after the outage finds the key absent at the store's
	// revision, which is the deletion's here (nothing was written since).
	if got.Version != rev(rd) {
		t.Fatalf("gone at version %s, want %d", got.Version, rd)
	}
}

// Cancelling the context ends Watch with ctx.Err() at once and leaves none
// of its goroutines, nor the client's goroutines for its watch, behind.
func TestWatch_ContextCancelled_ReturnsCtxErrLeavingNoGoroutine(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	// The client is connected: what runs now is the client's and the
	// server's, not Watch's.
	ignore := goleak.IgnoreCurrent()

	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))
	// A change arriving shows the watch is established. (Cancelled while
	// the client is still creating it, the client would keep an idle
	// watch stream, reused by the next watch, until it is closed.)
	put(t, cli, key, docB)
	w.Until("the change", isData(docB))

	start := time.Now()
	if err := w.Stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > promptly {
		t.Errorf("Watch took %v to return after cancel", d)
	}
	goleak.VerifyNone(t, ignore)
	select {
	case d := <-w.docs:
		t.Fatalf("delivered %s after Watch returned", describe(d))
	default:
	}
}

// With the server down, Watch is retrying; cancelling returns at once.
// The client's watch stream keeps reconnecting until the server answers or
// the client is closed (the etcd client does so); Watch itself leaves
// nothing behind once the client is closed.
func TestWatch_ContextCancelledWhileServerDown_ReturnsCtxErr(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	ignore := goleak.IgnoreCurrent()

	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))
	srv.Stop()
	w.Until("an Err", func(d live.Document) bool { return d.Err != nil })

	start := time.Now()
	if err := w.Stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > promptly {
		t.Errorf("Watch took %v to return after cancel", d)
	}
	cli.Close()
	goleak.VerifyNone(t, ignore)
}

func TestWatch_ContextAlreadyDone_ReturnsAtOnceDeliveringNothing(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	if err := newSource(t, cli, key).Watch(ctx, func(live.Document) { n++ }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
	if n != 0 {
		t.Fatalf("delivered %d documents on a done context", n)
	}
}

func TestWatch_DeadlineExceeded_ReturnsIt(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	src := newSource(t, cli, key)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testCheck)
	defer cancel()
	n := 0
	err := src.Watch(ctx, func(live.Document) { n++ })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch returned %v, want context.DeadlineExceeded", err)
	}
	if n != 1 {
		t.Fatalf("delivered %d documents, want 1 (gone)", n)
	}
}

// A closed client is the one thing the source cannot get past: Watch
// ends with ErrClientClosed.
func TestWatch_ClientClosed_ReturnsErrClientClosed(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	put(t, cli, key, docA)
	w := watch(t, newSource(t, cli, key))
	w.Until("the document", isData(docA))
	cli.Close()
	select {
	case err := <-w.done:
		if !errors.Is(err, ErrClientClosed) {
			t.Fatalf("Watch returned %v, want ErrClientClosed", err)
		}
		w.done <- err
	case <-time.After(waitFor):
		t.Fatal("Watch did not return after its client was closed")
	}
}

func TestNew_RejectsBadConfigNamingEveryField(t *testing.T) {
	_, err := New(Config{CheckInterval: -time.Second, RequestTimeout: -time.Second})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, field := range []string{"Client", "Key", "CheckInterval", "RequestTimeout"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	if !strings.HasPrefix(err.Error(), "breakeretcd: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

func TestNew_Defaults(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	src, err := New(Config{Client: cli, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if src.check != DefaultCheckInterval || src.timeout != DefaultRequestTimeout {
		t.Fatalf("defaults: check %v timeout %v, want %v %v", src.check, src.timeout, DefaultCheckInterval, DefaultRequestTimeout)
	}
	if src.Origin() != "etcd:"+key {
		t.Fatalf("Origin() = %q", src.Origin())
	}
	if err := src.Watch(context.Background(), nil); err == nil {
		t.Fatal("Watch accepted a nil deliver func")
	}
}

// A group that loads each document it is delivered runs on the key's
// policy, and keeps it when the key is deleted.
func TestWatch_GroupLoadingDeliveredDocuments(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- newSource(t, cli, key).Watch(ctx, func(d live.Document) {
			if d.Data != nil {
				if err := g.LoadPolicies(d.Data); err != nil {
					applied <- "rejected " + d.Version
					return
				}
			}
			applied <- d.Version
		})
	}()
	defer func() { cancel(); <-done }()
	next := func() string {
		select {
		case v := <-applied:
			return v
		case <-time.After(waitFor):
			t.Fatal("nothing delivered")
			return ""
		}
	}
	next() // absent: the code's policy stays
	if got := g.Policies().Default.ErrorRatio; got != breaker.DefaultPolicy().ErrorRatio {
		t.Fatalf("error ratio %v with the key absent, want the default", got)
	}
	r := put(t, cli, key, docB)
	if v := next(); v != rev(r) || g.Policies().Default.ErrorRatio != 0.3 {
		t.Fatalf("after a put (%s): error ratio %v, want 0.3", v, g.Policies().Default.ErrorRatio)
	}
	r = put(t, cli, key, `{"default": {"error_ratio": 7}}`)
	if v := next(); v != "rejected "+rev(r) || g.Policies().Default.ErrorRatio != 0.3 {
		t.Fatalf("after a bad put (%s): error ratio %v, want 0.3 kept", v, g.Policies().Default.ErrorRatio)
	}
	del(t, cli, key)
	next()
	if got := g.Policies().Default.ErrorRatio; got != 0.3 {
		t.Fatalf("after the key's deletion: error ratio %v, want 0.3 kept", got)
	}
}

// following is a group following a source, its records on a channel.
type following struct {
	t   *testing.T
	g   *breaker.Group
	f   *live.Follower
	rec chan live.Change
}

func follow(t *testing.T, src *Source) *following {
	t.Helper()
	g, err := breaker.NewGroup(breaker.GroupConfig{}, breaker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	fl := &following{t: t, g: g, rec: make(chan live.Change, 100)}
	f, err := live.Follow(context.Background(), g, src, live.OnChange(func(c live.Change) { fl.rec <- c }))
	if err != nil {
		t.Fatal(err)
	}
	fl.f = f
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return fl
}

// Until returns the first record that match accepts, and the records
// before it.
func (fl *following) Until(what string, match func(live.Change) bool) (live.Change, []live.Change) {
	fl.t.Helper()
	var before []live.Change
	deadline := time.After(waitFor)
	for {
		select {
		case c := <-fl.rec:
			if match(c) {
				return c, before
			}
			before = append(before, c)
		case <-deadline:
			fl.t.Fatalf("no %s; records instead: %+v", what, before)
			return live.Change{}, nil
		}
	}
}

func result(r live.Result) func(live.Change) bool {
	return func(c live.Change) bool { return c.Result == r }
}

// The store is rebuilt empty on the same address (a lost volume, a
// disaster recovery) and the document is put back, changed. The new
// store's revisions start again from 1: the source held the old store's
// revision, dropped every state of the new store as older, and the group
// kept the old policy for good, its last record "unreadable" while the
// store answered. A read that shows an older state than the one
// delivered, a lower store revision than one seen, the same revision with
// another value, or another cluster ID, is a new store: its state is
// delivered, and the watch starts again from its revision.
func TestWatch_StoreRebuiltEmpty_TheDocumentPutBackIsApplied(t *testing.T) {
	for _, tc := range []struct {
		name string
		// old writes the old store's history, ending with docA, and
		// returns its revision.
		old func(t *testing.T, cli *clientv3.Client) int64
		// outage: the store is rebuilt while the source is reading
		// it, which reports the outage; otherwise it is rebuilt
		// between the source's read and its watch, where the source
		// does not notice.
		outage bool
		// token is the new store's cluster token; "" for the same.
		token string
		// new writes the new store's history after docB is put back.
		new func(t *testing.T, cli *clientv3.Client)
	}{
		{name: "after an outage, the new store behind", outage: true, old: longHistory},
		{name: "unnoticed, the new store behind", old: longHistory},
		{name: "unnoticed, at the same revision", old: shortHistory},
		{name: "unnoticed, the new store ahead", old: shortHistory, new: func(t *testing.T, cli *clientv3.Client) {
			for i := range 20 {
				put(t, cli, "/elsewhere", strconv.Itoa(i))
			}
		}},
		{name: "unnoticed, another cluster at the same revision", old: shortHistory, token: "rebuilt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startEtcd(t)
			cli := srv.Client()
			r1 := tc.old(t, cli)
			src := newSource(t, cli, key)
			var r2 int64
			rebuild := func() {
				srv.token = tc.token
				srv.Rebuild()
				r2 = put(t, cli, key, docB) // the client is back too
				if tc.new != nil {
					tc.new(t, cli)
				}
			}
			var watches atomic.Int32
			src.beforeWatch = func(int64) {
				if watches.Add(1) == 1 && !tc.outage {
					rebuild()
				}
			}
			fl := follow(t, src)
			first, _ := fl.Until("the first document applied", result(live.Applied))
			if first.Version != rev(r1) {
				t.Fatalf("first applied: version %s, want %d", first.Version, r1)
			}
			if tc.outage {
				srv.Stop()
				fl.Until("the outage reported", result(live.Unreadable))
				rebuild()
			}

			got, _ := fl.Until("the document put back applied", result(live.Applied))
			if got.Version != rev(r2) || fl.g.Policies().Default.ErrorRatio != 0.3 {
				t.Fatalf("put back: applied version %s with error ratio %v, want version %d with 0.3", got.Version, fl.g.Policies().Default.ErrorRatio, r2)
			}
			label, st := fl.g.PolicyLabel(), fl.f.Status()
			if label.Version != rev(r2) || label.Origin != "etcd:"+key || st.Following != "etcd:"+key ||
				st.Last == nil || st.Last.Result != live.Applied || st.Last.Version != rev(r2) {
				t.Fatalf("policy after the put back: %+v, %+v (last %+v)", label, st, st.Last)
			}

			// The source watches the new store: a change is delivered
			// at once, not when the new store reaches the old one's
			// revision.
			r3 := put(t, cli, key, docC)
			got, before := fl.Until("a change on the new store", result(live.Applied))
			if got.Version != rev(r3) || fl.g.Policies().Default.ErrorRatio != 0.2 || len(before) != 0 {
				t.Fatalf("change on the new store: %+v after %+v, want version %d with error ratio 0.2", got, before, r3)
			}
			// How many watches that took is the client's affair: a
			// store ahead of the old one serves the watch the source
			// already has, and a client that noticed the rebuild before
			// the source's first watch opened resumes on the new store
			// (seen under load), so only the delivery is the contract.
			t.Logf("%d watches opened", watches.Load())
		})
	}
}

// longHistory leaves the store at about revision 30, docA last.
func longHistory(t *testing.T, cli *clientv3.Client) int64 {
	for i := range 30 {
		put(t, cli, "/elsewhere", strconv.Itoa(i))
	}
	return put(t, cli, key, docA)
}

// shortHistory puts docA first, at revision 2.
func shortHistory(t *testing.T, cli *clientv3.Client) int64 { return put(t, cli, key, docA) }

// The store is rebuilt empty and the document is not put back: the
// source reports it gone, the group keeps the policy in force and says
// which, and putting the document back applies it.
func TestWatch_StoreRebuiltEmpty_WithoutTheDocument_ReportsGone(t *testing.T) {
	srv := startEtcd(t)
	cli := srv.Client()
	r1 := longHistory(t, cli)
	fl := follow(t, newSource(t, cli, key))
	fl.Until("the document applied", result(live.Applied))

	srv.Stop()
	fl.Until("the outage reported", result(live.Unreadable))
	srv.Rebuild()
	gone, before := fl.Until("the document gone", result(live.Gone))
	if len(before) != 0 || gone.InForce != rev(r1) || gone.Version == "" {
		t.Fatalf("gone record %+v after %+v: want the version read, and %d in force", gone, before, r1)
	}
	label, st := fl.g.PolicyLabel(), fl.f.Status()
	if label.Version != rev(r1) || st.Following != "etcd:"+key || st.Last == nil || st.Last.Result != live.Gone ||
		fl.g.Policies().Default.ErrorRatio != 0.4 {
		t.Fatalf("policy with the document gone: %+v, %+v (last %+v), error ratio %v, want %d in force, the last record gone",
			label, st, st.Last, fl.g.Policies().Default.ErrorRatio, r1)
	}

	r2 := put(t, cli, key, docB)
	got, _ := fl.Until("the document put back applied", result(live.Applied))
	if got.Version != rev(r2) || fl.g.Policies().Default.ErrorRatio != 0.3 {
		t.Fatalf("put back: %+v, error ratio %v, want version %d with 0.3", got, fl.g.Policies().Default.ErrorRatio, r2)
	}
}
