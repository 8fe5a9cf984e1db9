// Package breakeretcd follows a group policy document kept in etcd, so a
// running fleet's breakers change when the key does, without a redeploy.
//
// Keep one key per service ("/services/payments/breakers"), holding the
// group policy JSON document that a group loads. A [Source] made with
// [New] implements [live.Source], for [live.Follow]: its Watch reads the
// key, delivers it, then watches it from the revision it read and
// delivers each new version, until its context is done.
//
// # What a Source delivers
//
// Every document has Origin "etcd:" followed by the key. Its Version is the
// key's ModRevision in decimal, the revision at which the key took the
// delivered value, so `etcdctl get -w json` on the key names the same
// number.
//
//   - The key's value: Data holds it. An empty value is delivered as an
//     empty, non-nil document, for the group to reject like any bad one.
//   - The key is absent when Watch starts: a Gone document, versioned with
//     the store's revision at the read. The group keeps the policy it has,
//     the one its code gave it, and says so; creating the key later
//     delivers it like any change.
//   - The key is deleted: a Gone document, versioned with the revision of
//     the deletion. The group keeps the last good policy.
//   - The store does not answer (a read fails or takes longer than
//     RequestTimeout): one document with Err set, and no version, per
//     outage; the group keeps the policy in force. The source retries with
//     a growing pause of at most CheckInterval. The first answer after
//     that delivers the key's current state, changed or not, so the record
//     shows the source is back; changes made while it was away are then in
//     force.
//
// When several changes reach the watch at once, only the latest is
// delivered: the group needs the document in force, not the store's
// history. A state already delivered is never delivered again, except the
// one after an Err and the first one read from a rebuilt store.
//
// # When the watch breaks
//
// The watch resumes by itself after a lost connection, from the last
// revision it saw, so no change is missed. When that revision has been
// compacted away (the source fell behind, or the store was compacted while
// it was away), the source reads the key again at once and watches from
// there: it never stalls on ErrCompacted. A watch that the server cancels,
// or that loses its cluster's leader (the source asks for one, so a member
// cut off from its cluster does not keep it waiting in silence), is
// followed by a new read too. While the watch is quiet, the source reads
// the key every CheckInterval (default 10s): that is how it notices a
// store that has stopped answering.
//
// # When the store is rebuilt
//
// A store rebuilt empty on the same address (a lost volume, a disaster
// recovery), or restored from an older backup, starts its revisions
// again from 1, far below those the source has seen. The source notices
// it at its next read, at the latest a CheckInterval after the store
// answers again: a read that finds a lower store revision than one seen
// before, the key at an older revision than the state delivered, another
// value at the same revision, or another cluster ID, is of a new store.
// It then delivers the key's state there whatever its revision (the
// document put back, or Gone if it is not), versioned with the new
// store's revision, and watches the new store from the revision it read.
//
// # Stopping
//
// Watch returns ctx.Err() when its context is done, and ErrClientClosed if
// the client is closed under it; the client belongs to the caller, who
// closes it. Watch leaves no goroutine of its own behind. The etcd client
// may keep the stream it ran the watch on, with its goroutines, after
// Watch has returned: when the context was cancelled while the store was
// unreachable (the stream goes on reconnecting until it reaches the store)
// or while the watch was still being opened (the stream waits, idle, for
// the client's next watch). Closing the client ends them.
package breakeretcd
