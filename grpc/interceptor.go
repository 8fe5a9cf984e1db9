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
// This package is its own module, so that the core breaker module keeps
// to the standard library.
package breakergrpc

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/govkit/breaker"
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
}

// WithTarget keys breakers by method and target, "method@target" (the
// target as given to grpc.NewClient), so that each downstream instance or
// cluster is judged on its own. A group override for the method also
// applies to these keys, and GroupConfig.ColdTargets makes them start
// cold; see [breaker.Group].
func WithTarget() Option {
	return WithKey(func(_ context.Context, method string, cc *grpc.ClientConn) string {
		if cc == nil {
			return method
		}
		return method + "@" + cc.Target()
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
// breaker gives (with its Policy.Timeout deadline, if any), plus the
// outgoing metadata breaker_probe: 1 when it is a half-open probe of that
// breaker; that key is removed from every other call, including calls
// made inside another breaker's probe and calls that no breaker guards (a
// key of ""), so a proxy that forwards an upstream's metadata does not
// pass the upstream's probe off as its own.
// The call's error is returned with its message, its status (status.Code
// and status.FromError see it as they would the call's own error) and its
// chain for errors.Is and errors.As; it also carries the breaker and the
// outcome it counted, so that [breaker.RecoverOnFailure] can serve a
// fallback on a failure or a timeout and count it on that breaker:
//
//	resp, err := client.GetStock(ctx, req)
//	resp, err = breaker.RecoverOnFailure(ctx, resp, err, cachedStock)
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
		call, b, done, err := c.admit(ctx, key)
		if err != nil {
			return err
		}
		returned := false
		defer func() {
			if !returned {
				abandon(call, done)
			}
		}()
		err = invoker(call, method, req, reply, cc, callOpts...)
		returned = true
		o := c.settle(ctx, done, err)
		if err != nil {
			return outcomeError(err, b, o)
		}
		return nil
	}
}

// StreamClientInterceptor returns an interceptor that guards each stream
// with a breaker of g, as [UnaryClientInterceptor] does a unary call. The
// stream is one call: admitted when it opens, and ended, with its outcome,
// when
//
//   - opening it fails;
//   - RecvMsg returns an error (io.EOF is a success), or, on a stream
//     whose server sends one message, returns that message;
//   - Header or SendMsg returns an error other than io.EOF;
//   - or its context is done (cancelled by the caller, or past a
//     deadline), even if the caller never reads again.
//
// The errors of the stream's methods (io.EOF apart, which stays io.EOF)
// carry the breaker and the stream's outcome as a unary call's error does,
// for [breaker.RecoverOnFailure].
//
// A stream that the caller abandons without any of these (neither reading
// to the end nor cancelling its context) never ends; grpc-go itself leaks
// such a stream. In the half-open state it holds its probe slot until the
// breaker's probe timeout reopens it.
func StreamClientInterceptor(g *breaker.Group, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(g, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		key := c.key(ctx, method, cc)
		if key == "" {
			return streamer(tag(ctx, false), desc, cc, method, callOpts...)
		}
		call, b, done, err := c.admit(ctx, key)
		if err != nil {
			return nil, err
		}
		returned := false
		defer func() {
			if !returned {
				abandon(call, done)
			}
		}()
		cs, err := streamer(call, desc, cc, method, callOpts...)
		returned = true
		if err != nil {
			return nil, outcomeError(err, b, c.settle(ctx, done, err))
		}
		s := &stream{ClientStream: cs, c: c, b: b, caller: ctx, done: done, serverStreams: desc.ServerStreams}
		// A context.AfterFunc rather than a goroutine: nothing runs until
		// the context is done, and end stops it when the stream ends first.
		s.stop = context.AfterFunc(call, func() {
			s.finish(status.FromContextError(call.Err()).Err())
		})
		return s, nil
	}
}

// admit asks the key's breaker for the call. A refusal comes back as a
// gRPC status error, as every error of a gRPC call does.
func (c *config) admit(ctx context.Context, key string) (context.Context, *breaker.Breaker, func(error), error) {
	if c.group == nil {
		return nil, nil, nil, status.Error(codes.Internal, "breakergrpc: nil *breaker.Group")
	}
	b, err := c.group.Get(key)
	if err != nil {
		return nil, nil, nil, status.Error(codes.Internal, err.Error())
	}
	call, done, err := b.Allow(ctx)
	if err != nil {
		if errors.Is(err, breaker.ErrOpen) {
			return nil, nil, nil, newOpenError(err)
		}
		// The caller's context was already done, as gRPC would report it.
		return nil, nil, nil, status.FromContextError(err).Err()
	}
	return tag(call, breaker.IsProbe(call)), b, done, nil
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
func abandon(call context.Context, done func(error)) {
	if breaker.IsProbe(call) {
		done(breaker.Ignore(errPanicked))
		return
	}
	done(errPanicked)
}

// stream is a client stream whose end ends the breaker's call.
type stream struct {
	grpc.ClientStream
	c             *config
	b             *breaker.Breaker
	caller        context.Context
	done          func(error)
	serverStreams bool
	stop          func() bool
	ended         atomic.Bool
	outcome       atomic.Int32 // the outcome once ended, plus one (0: not yet)
}

func (s *stream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == io.EOF:
		s.end(nil)
	case err != nil:
		s.end(err)
		return s.carry(err)
	case !s.serverStreams:
		// grpc-go reads the status along with the only message of such a
		// stream: nil here means the call ended with OK.
		s.end(nil)
	}
	return err
}

func (s *stream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.end(err) // io.EOF means the status is RecvMsg's to report
		return s.carry(err)
	}
	return err
}

func (s *stream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err != nil && err != io.EOF {
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

// finish reports the outcome, once. The AfterFunc calls it directly: it
// may run before s.stop is set.
func (s *stream) finish(err error) {
	if s.ended.Swap(true) {
		return
	}
	s.outcome.Store(int32(s.c.settle(s.caller, s.done, err)) + 1)
}

// carry wraps an error of the stream with the breaker and the stream's
// outcome, for breaker.RecoverOnFailure. It returns err as it is when the
// outcome is not known yet: the stream's context ended it at that moment,
// and the AfterFunc is still reporting.
func (s *stream) carry(err error) error {
	o := s.outcome.Load()
	if o == 0 {
		return err
	}
	return outcomeError(err, s.b, breaker.Outcome(o-1))
}
