package ops

import (
	"slices"
	"strings"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/live"
)

// GroupSnapshot is the state of a whole group at one time, ready to be
// served as JSON.
type GroupSnapshot struct {
	Time time.Time `json:"time"`
	// Policy says which policy document is in force, where it came from
	// and when it was applied, and, with the group's follower, what
	// became of the last document its source delivered.
	Policy PolicySnapshot `json:"policy"`
	// Group is what the group says of itself: how many breakers it holds
	// against its cap, the calls it sent past the cap, and the breakers
	// it dropped as idle (see [breaker.Group.Status]).
	Group    breaker.GroupStatus `json:"group"`
	Breakers []breaker.Status    `json:"breakers"`
	Alerts   []Alert             `json:"alerts"`
}

// PolicySnapshot is the policy part of a [GroupSnapshot]: which document
// is in force and where it came from, as the group labels it
// ([breaker.Group.PolicyLabel]), its unused overrides and the candidate
// it runs, and what the group's follower (package live), if Snapshot was
// given one, has done.
type PolicySnapshot struct {
	// Origin, Version and AppliedAt identify the document in force.
	breaker.PolicyLabel
	// Changes is what applying the document in force changed, when the
	// follower applied it (see [live.Status].Applied); nil for a policy
	// set by code.
	Changes []live.FieldChange `json:"changes"`
	// UnusedOverrides are the override keys no breaker has used yet, as
	// [breaker.Group.UnusedOverrides] lists them: a typo, or a
	// downstream not called yet.
	UnusedOverrides []string `json:"unused_overrides,omitempty"`
	// Following, Reloads and Last are the follower's ([live.Status]):
	// the source it follows, the documents delivered by result, and the
	// last record, a rejected one included. Zero without a follower.
	Following string       `json:"following,omitempty"`
	Reloads   live.Reloads `json:"reloads"`
	Last      *live.Change `json:"last,omitempty"`
	// Down is the follower's record of its source's last gone or
	// unreadable delivery, while the source has delivered nothing
	// readable since; nil while it delivers. Rejected is the record of
	// the last document refused while no valid one has come since, which
	// a gone source does not clear. Both are [live.Status]'s.
	Down     *live.Change `json:"down,omitempty"`
	Rejected *live.Change `json:"rejected,omitempty"`
	// Candidate is the candidate the group's breakers run in shadow; nil
	// without one (see [breaker.GroupPolicy.Candidate]).
	Candidate *CandidateInfo `json:"candidate,omitempty"`
}

// CandidateInfo describes the candidate a group runs in shadow.
type CandidateInfo struct {
	// Version is the version of the document that carries it.
	Version string `json:"version"`
	// Breakers is how many of the group's breakers run a candidate
	// policy that differs from their own.
	Breakers int `json:"breakers"`
	// Statuses is what each of those breakers' candidate has done, by
	// breaker name ([candidate.Of]).
	Statuses map[string]candidate.Status `json:"statuses,omitempty"`
}

// policySnapshot reads the policy part of a snapshot; bs are the group's
// breakers, whose candidates it reads.
func policySnapshot(g *breaker.Group, f *live.Follower, bs []*breaker.Breaker) PolicySnapshot {
	ps := PolicySnapshot{PolicyLabel: g.PolicyLabel(), UnusedOverrides: g.UnusedOverrides()}
	if f != nil {
		st := f.Status()
		ps.Following, ps.Reloads, ps.Last = st.Following, st.Reloads, st.Last
		ps.Down, ps.Rejected = st.Down, st.Rejected
		if a := st.Applied; a != nil && a.Origin == ps.Origin && a.Version == ps.Version {
			ps.Changes = a.Changes
		}
	}
	if g.Policies().Candidate != nil {
		ps.Candidate = &CandidateInfo{Version: ps.Version}
		for _, b := range bs {
			if cs, ok := candidate.Of(b); ok {
				if ps.Candidate.Statuses == nil {
					ps.Candidate.Statuses = make(map[string]candidate.Status)
				}
				ps.Candidate.Statuses[b.Name()] = cs
				ps.Candidate.Breakers++
			}
		}
	}
	return ps
}

// Snapshot returns the group's policy, its own status, the status of
// every breaker in the group, sorted by name, and the alerts of th (the
// zero value means [DefaultThresholds]) at the same time on the group's
// clock. f, if not nil, is the follower the group's policy comes from
// ([live.Follow]): its status goes into the snapshot's Policy.
func Snapshot(g *breaker.Group, th Thresholds, f *live.Follower) GroupSnapshot {
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
	s := GroupSnapshot{Time: g.Now(), Group: g.Status(), Breakers: make([]breaker.Status, len(bs))}
	var shadowed []*breaker.Breaker
	hasCandidate := g.Policies().Candidate != nil
	for i, k := range bs {
		s.Breakers[i] = k.b.Status()
		if hasCandidate {
			shadowed = append(shadowed, k.b)
		}
	}
	s.Policy = policySnapshot(g, f, shadowed)
	// The alerts are graded from the statuses just read, not from a second
	// pass over the group: the snapshot's alerts then agree with its
	// breakers, and the group's breakers are visited once.
	s.Alerts = alertsOf(s.Breakers, th.orDefault())
	return s
}
