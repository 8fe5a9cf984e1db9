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
	Policy   breaker.PolicyStatus `json:"policy"`
	Breakers []breaker.Status     `json:"breakers"`
	Alerts   []Alert              `json:"alerts"`
}

// Snapshot returns the group's policy status, the status of every
// breaker in the group, sorted by name, and the alerts of th (the zero value means [DefaultThresholds])
// at the same time on the group's clock.
func Snapshot(g *breaker.Group, th Thresholds) GroupSnapshot {
	// The breakers are sorted, not their statuses: a Status is some 400
	// bytes, and moving them (growing the slice by appending, swapping in
	// the sort) was most of the time of a snapshot of 10,000 breakers.
	var bs []*breaker.Breaker
	g.Range(func(_ string, b *breaker.Breaker) bool {
		bs = append(bs, b)
		return true
	})
	slices.SortFunc(bs, func(a, b *breaker.Breaker) int { return strings.Compare(a.Name(), b.Name()) })
	s := GroupSnapshot{Time: g.Now(), Policy: g.PolicyStatus(), Breakers: make([]breaker.Status, len(bs))}
	for i, b := range bs {
		s.Breakers[i] = b.Status()
	}
	s.Alerts = alerts(g, s.Time, th.orDefault())
	return s
}
