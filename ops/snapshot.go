package ops

import (
	"slices"
	"strings"
	"time"

	"github.com/govkit/breaker"
)

// GroupSnapshot is the state of a whole group at one time, ready to be
// served as JSON.
type GroupSnapshot struct {
	Time time.Time `json:"time"`
	// Policy says which policy document is in force, where it came from
	// and when it was applied, and what became of the last document a
	// followed source delivered (see [breaker.Group.Follow]).
	Policy breaker.PolicyStatus `json:"policy"`
	// Group is what the group says of itself: how many breakers it holds
	// against its cap, the calls it sent past the cap, and the breakers
	// it dropped as idle (see [breaker.Group.Status]).
	Group    breaker.GroupStatus `json:"group"`
	Breakers []breaker.Status    `json:"breakers"`
	Alerts   []Alert             `json:"alerts"`
}

// Snapshot returns the group's policy status, its own status, the status
// of every breaker in the group, sorted by name, and the alerts of th (the
// zero value means [DefaultThresholds]) at the same time on the group's
// clock.
func Snapshot(g *breaker.Group, th Thresholds) GroupSnapshot {
	// The breakers are sorted, not their statuses: a Status is some 400
	// bytes, and moving them (growing the slice by appending, swapping in
	// the sort) was most of the time of a snapshot of 10,000 breakers.
	// They are sorted by copies of their names packed into one string:
	// the names themselves lie scattered over the heap, one beside each
	// breaker, and reading them through the breakers missed the cache at
	// every comparison once the group outgrew it, so that 10,000 breakers
	// cost 25 times 1,000.
	type keyed struct {
		key string
		b   *breaker.Breaker
	}
	var bs []keyed
	size := 0
	g.Range(func(key string, b *breaker.Breaker) bool {
		bs = append(bs, keyed{key, b})
		size += len(key)
		return true
	})
	var packed strings.Builder
	packed.Grow(size)
	for _, k := range bs {
		packed.WriteString(k.key)
	}
	all, off := packed.String(), 0
	for i := range bs {
		n := len(bs[i].key)
		bs[i].key, off = all[off:off+n], off+n
	}
	slices.SortFunc(bs, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	s := GroupSnapshot{Time: g.Now(), Policy: g.PolicyStatus(), Group: g.Status(), Breakers: make([]breaker.Status, len(bs))}
	for i, k := range bs {
		s.Breakers[i] = k.b.Status()
	}
	// The alerts are graded from the statuses just read, not from a second
	// pass over the group: the snapshot's alerts then agree with its
	// breakers, and the group's breakers are visited once.
	s.Alerts = alertsOf(s.Breakers, s.Time, th.orDefault())
	return s
}
