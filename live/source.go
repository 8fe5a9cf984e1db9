package live

import "context"

// A Document is one version of a group's policy document, as a [Source]
// delivers it.
type Document struct {
	// Origin names where the document comes from, for the audit record:
	// "file:/etc/app/breakers.json", "etcd:/services/payments/breakers".
	Origin string

	// Version identifies this revision of the document: the store's
	// revision where it has one, a content hash otherwise.
	Version string

	// Data is the group policy JSON document (see
	// [breaker.ParseGroupPolicy]). It is nil when Gone or Err is set.
	Data []byte

	// Gone reports that the document no longer exists at its origin (the
	// file or key was deleted). The group keeps the policy in force.
	Gone bool

	// Err reports that the source could not read the document (a file
	// that cannot be opened, a store that does not answer). The group
	// keeps the policy in force.
	Err error
}

// A Source delivers successive versions of one group policy document: a
// file, a key in a configuration store.
type Source interface {
	// Watch delivers the current document, and then each new version of
	// it, until ctx is done; it then returns ctx.Err(), promptly, even
	// while its store or file system does not answer, since
	// [Follower.Close] waits for it. It returns another error only when
	// the source cannot go on at all. Watch calls deliver from one
	// goroutine at a time and never after it has returned; a deliver
	// call may block while the document is applied.
	Watch(ctx context.Context, deliver func(Document)) error
}
