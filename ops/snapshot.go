package ops

import (
	"sort"
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
	s := GroupSnapshot{Time: g.Now(), Policy: g.PolicyStatus(), Breakers: []breaker.Status{}}
	g.Range(func(_ string, b *breaker.Breaker) bool {
		s.Breakers = append(s.Breakers, b.Status())
		return true
	})
	sort.Slice(s.Breakers, func(i, j int) bool { return s.Breakers[i].Name < s.Breakers[j].Name })
	s.Alerts = alerts(g, s.Time, th.orDefault())
	return s
}
