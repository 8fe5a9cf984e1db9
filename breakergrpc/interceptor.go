// Package breakergrpc puts a circuit breaker in front of every call a gRPC
// client makes, one breaker per method, so a sick downstream method is
// failed fast instead of holding the caller's goroutines.
//
// Install the interceptors on the client connection:
//
//	g, _ := breaker.NewGroup(breaker.GroupConfig{})
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(breakergrpc.UnaryClientInterceptor(g)),
//		grpc.WithStreamInterceptor(breakergrpc.StreamClientInterceptor(g)),
//		...)
//
// Each call is guarded by the group's breaker for its full method name
// ("/inventory.v1.Inventory/GetStock"), or for method and target with
// [WithTarget]. Status codes are classified by [DefaultClassify]: codes
// that mean the downstream is sick count, codes that are about the request
// (InvalidArgument, NotFound, PermissionDenied, ...) do not. While a
// breaker is open, calls fail at once with codes.Unavailable, the
// breaker's reason in the message; the error also matches
// [breaker.ErrOpen]. Half-open probes carry the metadata breaker_probe: 1;
// no other call does.
//
// A stream is one call, judged by the first message the server sends, or,
// if it ends before one, by how it ends: a watch that lives for hours
// passes its probe, or counts in the window, as soon as it has answered.
// The breaker's deadline bounds the wait for that message, not the stream.
// See [StreamClientInterceptor].
//
// # Recording traffic
//
// [WithRecorder] records every guarded call to a [calltrace.Recorder], for
// breaker-replay to replay a candidate policy against: the breaker's key,
// the outcome and duration, whether the call was a half-open probe, and
// the calls the breaker refused, which never reached the network. Give it
// to both interceptors:
//
//	rec, err := calltrace.NewRecorder(file, calltrace.Options{})
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(breakergrpc.UnaryClientInterceptor(g, breakergrpc.WithRecorder(rec))),
//		grpc.WithStreamInterceptor(breakergrpc.StreamClientInterceptor(g, breakergrpc.WithRecorder(rec))),
//		...)
//
// A call is recorded when its outcome is decided, and the recorder writes
// from a buffer on a goroutine of its own, so a service flushes its trace
// on shutdown in this order: stop making calls ([grpc.Server.GracefulStop]
// and [net/http.Server.Shutdown] return once the handlers that make them
// have returned; cancel the contexts of streams that outlive them), then
// call [calltrace.Recorder.Close], which writes out what is buffered, then
// close the file. A call decided after Close is dropped and counted
// ([calltrace.Recorder.Dropped]).
//
// This package is its own module, so that the core breaker module keeps
// to the standard library.
package breakergrpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/calltrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ProbeKey is the outgoing metadata key that marks a half-open probe. Its
// value is "1".
const ProbeKey = "breaker_probe"

// Option configures the interceptors.
type Option func(*config)

type config struct {
	group    *breaker.Group
	key      func(ctx context.Context, method string, cc *grpc.ClientConn) string
	classify func(error) breaker.Outcome
	rec      *calltrace.Recorder // nil: records nothing
}

// WithTarget keys breakers by method and target, [breaker.TargetKey] of
// the method and the target as given to grpc.NewClient ("method@target"), so that each downstream instance or
// cluster is judged on its own. A group override for the method also
// applies to these keys, and GroupConfig.ColdTargets makes them start
// cold; see [breaker.Group].
func WithTarget() Option {
	return WithKey(func(_ context.Context, method string, cc *grpc.ClientConn) string {
		if cc == nil {
			return method
		}
		return breaker.TargetKey(method, cc.Target())
	})
}

// WithKey sets the function that names the breaker for a call. The default
// is the full method name, "/package.Service/Method". A key of "" sends the
// call on unguarded, without the probe key, which only a breaker's own
// probes carry. A nil f keeps the default.
func WithKey(f func(ctx context.Context, method string, cc *grpc.ClientConn) string) Option {
	return func(c *config) {
		if f != nil {
			c.key = f
		}
	}
}

// WithClassifier replaces [DefaultClassify]. The function gets the error
// the call ended with (never nil) and is not called when the caller
// cancelled the call's context: that outcome is always [breaker.Ignored].
// It must be safe for concurrent use. A value outside the four outcomes
// counts as [breaker.Failure]. A nil f keeps the default.
func WithClassifier(f func(error) breaker.Outcome) Option {
	return func(c *config) {
		if f != nil {
			c.classify = f
		}
	}
}

func newConfig(g *breaker.Group, opts []Option) *config {
	c := &config{group: g, key: methodKey, classify: DefaultClassify}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

func methodKey(_ context.Context, method string, _ *grpc.ClientConn) string { return method }

// UnaryClientInterceptor returns an interceptor that guards each unary call
// with a breaker of g.
//
// A refused call returns codes.Unavailable without touching the network;
// the error also matches [breaker.ErrOpen], and errors.As extracts the
// *[breaker.OpenError]. An admitted call is made with the context the
// breaker gives (with its Policy.CallTimeout deadline, if any), plus the
// outgoing metadata breaker_probe: 1 when it is a half-open probe of that
// breaker; that key is removed from every other call, including calls
// made inside another breaker's probe and calls that no breaker guards (a
// key of ""), so a proxy that forwards an upstream's metadata does not
// pass the upstream's probe off as its own.
// The call's error is returned with its message, its status (status.Code
// and status.FromError see it as they would the call's own error) and its
// chain for errors.Is and errors.As; it also carries the breaker and the
// outcome it counted, so that [breaker.FallbackResultOnFailure] can serve a
// fallback on a failure or a timeout and count it on that breaker:
//
//	resp, err := client.GetStock(ctx, req)
//	resp, err = breaker.FallbackResultOnFailure(ctx, resp, err, cachedStock)
//
// The interceptor reports each outcome it decides with [breaker.Mark], so
// the group's own classifier, if it has one, does not second-guess it.
func UnaryClientInterceptor(g *breaker.Group, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(g, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		key := c.key(ctx, method, cc)
		if key == "" {
			return invoker(tag(ctx, false), method, req, reply, cc, callOpts...)
		}
		call, b, done, tr, err := c.admit(ctx, key)
		if err != nil {
			return err
		}
		returned := false
		defer func() {
			if !returned {
				abandon(call, done, tr)
			}
		}()
		err = invoker(call, method, req, reply, cc, callOpts...)
		returned = true
		o := c.settle(ctx, done, tr, err)
		if err != nil {
			return outcomeError(err, b, o)
		}
		return nil
	}
}

// StreamClientInterceptor returns an interceptor that guards each stream
// with a breaker of g, as [UnaryClientInterceptor] does a unary call. The
// stream is one call, admitted when it opens. Its outcome is decided once,
// by the first of:
//
//   - opening it fails;
//   - RecvMsg returns a message: the server has answered, and the stream
//     is a success (for a half-open breaker, a probe that passes);
//   - RecvMsg returns an error (io.EOF, the end of a stream that sent
//     nothing, is a success);
//   - Header or SendMsg returns an error other than io.EOF;
//   - or its context is done (cancelled by the caller, or past a
//     deadline), even if the caller never reads again.
//
// So a stream is judged by its first message, or, if it ends before one, by
// how it ends; what happens after its first message is not reported, and a
// long-lived stream, such as a watch, counts as soon as it has answered,
// instead of holding its probe slot, or its place among the calls in
// flight, for as long as it lives. Headers alone prove nothing: a proxy
// in front of the server can send them.
//
// The time that Policy.CallTimeout, Policy.SlowCall and the adaptive timeout
// judge is the time to that outcome. On a stream whose server sends many
// messages (a server-streaming or bidirectional method) the breaker's
// deadline bounds only the wait for the first message: a stream that has
// none by then ends with codes.DeadlineExceeded and counts as a timeout,
// and one that has goes on for as long as the caller's own context allows.
// The server is not sent the breaker's deadline for such a stream, only
// the caller's. On a stream whose server sends one message, that message
// ends it, and the deadline bounds all of it.
//
// The errors of the stream's methods (io.EOF apart, which stays io.EOF)
// carry the breaker and the stream's outcome as a unary call's error does,
// for [breaker.FallbackResultOnFailure]; an error after the first message carries
// the success that message made.
//
// A stream that the caller abandons before its outcome (neither reading
// nor cancelling its context) never reports; grpc-go itself leaks such a
// stream. In the half-open state it holds its probe slot until the
// breaker's probe timeout reopens it.
func StreamClientInterceptor(g *breaker.Group, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(g, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		key := c.key(ctx, method, cc)
		if key == "" {
			return streamer(tag(ctx, false), desc, cc, method, callOpts...)
		}
		call, b, done, tr, err := c.admit(ctx, key)
		if err != nil {
			return nil, err
		}
		s := &stream{c: c, b: b, caller: ctx, done: done, tr: tr}
		life := call
		if desc.ServerStreams && call.Done() != ctx.Done() {
			// The breaker gave the call a deadline of its own, which
			// done cancels: the stream must outlive it.
			life = s.outlive(ctx, call)
		}
		returned := false
		defer func() {
			if !returned {
				s.release()
				abandon(call, done, tr)
			}
		}()
		cs, err := streamer(life, desc, cc, method, callOpts...)
		returned = true
		if err != nil {
			s.release()
			return nil, outcomeError(err, b, c.settle(ctx, done, tr, err))
		}
		s.ClientStream = cs
		// A context.AfterFunc rather than a goroutine: nothing runs until
		// the context is done, and end stops it when the stream ends first.
		s.stop = context.AfterFunc(call, func() { s.expire(call) })
		return s, nil
	}
}

// admit asks the key's breaker for the call, and starts its record if the
// interceptor records. A refusal comes back as a gRPC status error, as
// every error of a gRPC call does, and is recorded.
func (c *config) admit(ctx context.Context, key string) (context.Context, *breaker.Breaker, func(error), *tracked, error) {
	if c.group == nil {
		return nil, nil, nil, nil, status.Error(codes.Internal, "breakergrpc: nil *breaker.Group")
	}
	b, err := c.group.Get(key)
	if err != nil {
		return nil, nil, nil, nil, status.Error(codes.Internal, err.Error())
	}
	tr := c.track(key)
	call, done, err := b.Allow(ctx)
	if err != nil {
		if errors.Is(err, breaker.ErrOpen) {
			tr.refused(err)
			return nil, nil, nil, nil, newOpenError(err)
		}
		// The caller's context was already done, as gRPC would report it.
		return nil, nil, nil, nil, status.FromContextError(err).Err()
	}
	probe := breaker.IsProbe(call)
	tr.admitted(probe)
	return tag(call, probe), b, done, tr, nil
}

// tag sets the probe metadata on the context of a breaker's probe and
// removes it from any other call's, guarded or not. The lookup does not
// copy the metadata, so an ordinary call without the key pays one context
// lookup.
func tag(ctx context.Context, probe bool) context.Context {
	if !probe && len(metadata.ValueFromOutgoingContext(ctx, ProbeKey)) == 0 {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if md == nil {
		md = metadata.MD{}
	}
	if probe {
		md.Set(ProbeKey, "1")
	} else {
		md.Delete(ProbeKey)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

var errPanicked = errors.New("breakergrpc: call panicked")

// abandon ends a call whose invoker or streamer panicked, as Breaker.Do
// does: a failure, but a probe only frees its slot, since it proved
// nothing either way.
func abandon(call context.Context, done func(error), tr *tracked) {
	if breaker.IsProbe(call) {
		done(breaker.Ignore(errPanicked))
		tr.ended(breaker.Ignored)
		return
	}
	done(errPanicked)
	tr.ended(breaker.Failure)
}

// stream is a client stream whose outcome ends the breaker's call.
type stream struct {
	grpc.ClientStream
	c      *config
	b      *breaker.Breaker
	caller context.Context
	done   func(error)
	tr     *tracked // nil unless the interceptor records
	stop   func() bool
	// ended is set once the outcome is being reported; mu is held while
	// it is, so that a method that ends the stream returns after the
	// outcome is counted, even when the AfterFunc is reporting it.
	ended   atomic.Bool
	mu      sync.Mutex
	outcome breaker.Outcome // guarded by mu, set once ended
	// life is the stream's context when it outlives the breaker's
	// deadline (see outlive), and cut ends it; both nil otherwise.
	life *streamContext
	cut  context.CancelFunc
}

// streamContext is the context of a stream that outlives the deadline the
// breaker gave its call: it ends with the caller's context (whose deadline
// grpc-go sends to the server), or when cut, and carries the call's values
// (the probe mark, the outgoing metadata).
type streamContext struct {
	context.Context // the caller's, made cancellable
	values          context.Context
	expired         atomic.Bool
}

func (c *streamContext) Value(k any) any { return c.values.Value(k) }

// Err reports a stream cut at the breaker's deadline as past a deadline,
// as a stream made with the call's own context would be.
func (c *streamContext) Err() error {
	err := c.Context.Err()
	if err != nil && c.expired.Load() {
		return context.DeadlineExceeded
	}
	return err
}

// AfterFunc lets the contexts derived from this one (grpc-go derives its
// own) and context.AfterFunc follow it without a goroutine each.
func (c *streamContext) AfterFunc(f func()) func() bool {
	return context.AfterFunc(c.Context, f)
}

// outlive returns the context of a stream that must outlive the deadline
// of its call: the caller's context, cancellable, with the call's values.
func (s *stream) outlive(caller, call context.Context) context.Context {
	ctx, cut := context.WithCancel(caller)
	s.life = &streamContext{Context: ctx, values: context.WithoutCancel(call)}
	s.cut = cut
	return s.life
}

// release lets go of the stream's own context once the stream has ended.
func (s *stream) release() {
	if s.cut != nil {
		s.cut()
	}
}

// expire ends the call when its context is done first: the caller gave up
// or its deadline passed, or the breaker's deadline passed before the
// first message, and then the stream is cut.
func (s *stream) expire(call context.Context) {
	if s.life != nil && s.caller.Err() == nil {
		s.life.expired.Store(true)
		s.cut()
	}
	s.finish(status.FromContextError(call.Err()).Err())
}

func (s *stream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == nil:
		// A message: the server has answered. For a stream whose server
		// sends one, grpc-go has read the status along with it too.
		if !s.ended.Load() {
			s.end(nil)
		}
	case err == io.EOF:
		s.release()
		s.end(nil)
	default:
		s.release()
		s.end(err)
		return s.carry(err)
	}
	return err
}

func (s *stream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		// The stream is over. io.EOF means the status is RecvMsg's to
		// report.
		s.release()
		s.end(err)
		return s.carry(err)
	}
	return err
}

func (s *stream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err != nil && err != io.EOF {
		s.release()
		s.end(err)
		return md, s.carry(err)
	}
	return md, err
}

// end ends the call from one of the stream's methods, which the caller can
// only reach after the interceptor has set s.stop.
func (s *stream) end(err error) {
	s.stop()
	s.finish(err)
}

// finish reports the outcome, once, and returns after it has been
// reported, by this call or another. The AfterFunc calls it directly: it
// may run before s.stop is set.
func (s *stream) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended.Load() {
		return
	}
	s.ended.Store(true)
	s.outcome = s.c.settle(s.caller, s.done, s.tr, err)
}

// carry wraps an error of the stream, which has ended, with the breaker and
// the stream's outcome, for breaker.FallbackResultOnFailure.
func (s *stream) carry(err error) error {
	s.mu.Lock()
	o := s.outcome
	s.mu.Unlock()
	return outcomeError(err, s.b, o)
}
