package breaker

import (
	"sort"
	"time"
)

// GroupSnapshot is the state of a whole group at one time, ready to be
// served as JSON.
type GroupSnapshot struct {
	Time     time.Time `json:"time"`
	Breakers []Status  `json:"breakers"`
	Alerts   []Alert   `json:"alerts"`
}

// Snapshot returns the status of every breaker in the group, sorted by
// name, and the current alerts.
func (g *Group) Snapshot() GroupSnapshot {
	s := GroupSnapshot{Time: g.opt.tb.time(g.opt.tb.now()), Breakers: []Status{}}
	g.Range(func(_ string, b *Breaker) bool {
		s.Breakers = append(s.Breakers, b.Status())
		return true
	})
	sort.Slice(s.Breakers, func(i, j int) bool { return s.Breakers[i].Name < s.Breakers[j].Name })
	s.Alerts = g.Alerts()
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
