// Package live makes a breaker group follow its policy document while
// the service runs: a file, or a key in a configuration store, that an
// operator edits to change the breakers' numbers without a deploy.
//
//	src, err := live.NewFileSource("/etc/shop/breakers.json", live.FileConfig{})
//	if err != nil {
//		return err
//	}
//	f, err := live.Follow(ctx, group, src)
//	if err != nil {
//		return err // breaker.ErrPoliciesHeld: the group already follows a source
//	}
//	defer f.Close()
//
// # Following a source
//
// [Follow] starts one goroutine that applies each version a [Source]
// delivers, whole or not at all: a document is decoded strictly
// ([breaker.ParseGroupPolicy]) and applied as [breaker.Group.SetPolicies]
// applies one, so a call is never held up and each breaker keeps its
// state and window. A document that is gone or cannot be read changes
// nothing. [FileSource] follows a file by polling its content; package
// github.com/govkit/breaker/breakeretcd follows a key in etcd.
//
// The package is built on the group's public policy API: the follower
// holds the group's policies while it runs ([breaker.Group.HoldPolicies]),
// so that code and a second source cannot quietly replace what the
// source published, and labels each document it applies with its origin
// and version ([breaker.Group.PolicyLabel]).
//
// # Records
//
// Every document ends in one [Change] record: logged to the group's
// logger (a change of policy is never silent), given to the follower's
// subscribers ([Follower.Subscribe], [OnChange]), and counted in
// [Follower.Status]. A source gone or unreadable is logged at Warn once,
// when it goes down, and stays in [Status].Down until it delivers a
// readable document; a refused document stays in [Status].Rejected until
// a valid one comes. The version in force keeps running meanwhile. The
// metrics packages and package ops show the status of the follower they
// are given, beside the group's label.
package live
