package breaker

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Group hands out one [Breaker] per key, creating it on first use: per
// downstream method ("inventory.GetStock"), or per method and target
// ("payment.Charge@10.0.0.7"). Its breakers share the group's options and
// take their policy from the group's [GroupPolicy]: the default, or the
// override for their key. Looking up an existing key takes no lock and
// allocates nothing; a group starts no goroutine. It is safe for
// concurrent use.
type Group struct {
	opt   *options
	cfg   GroupConfig
	rules atomic.Pointer[groupRules]
	cache keyCache
	m     sync.Map // key → *Breaker
	subs  atomic.Pointer[[]*subscriber]

	// max is GroupConfig.MaxBreakers, or defaultMaxBreakers; n counts
	// the breakers in m, changed under mu. overflow is the breaker the
	// calls for further keys share (see GroupConfig.MaxBreakers).
	max      int64
	n        atomic.Int64
	overflow *Breaker
	full     fullReport

	mu       sync.Mutex // creation, eviction, policy changes
	activity map[*Breaker]activity
	// lastSweep is written under mu; the creation path reads it without
	// the lock to decide whether a full group is due a sweep.
	lastSweep atomic.Int64
	evicted   [3]atomic.Uint64 // breakers dropped as idle, by State

	// pmu serialises policy changes and guards their label and the hold
	// on them. It is taken before mu, never after.
	pmu   sync.Mutex
	label policyLabel
	hold  *PolicyHold // the holder of the policies, if any
}

// GroupConfig configures a [Group].
type GroupConfig struct {
	// Policies are the default policy and the per-key overrides. A zero
	// Default means DefaultPolicy().
	Policies GroupPolicy
	// IdleAfter, when positive, drops a breaker, whatever its state, that
	// no caller has asked for (no call admitted, refused or probed) in
	// about this long; the next call for its key makes a new, closed one.
	// A breaker in a mode other than ModeAuto is never dropped as idle.
	// Sweeps run when a new key is made (at most every IdleAfter/2) and
	// in [Group.EvictIdle]. A call still running when its breaker is
	// dropped, or made later through a *Breaker kept from before, lands
	// on the key's current breaker: a key never has two live breakers.
	// docs/policy.md explains eviction in full.
	IdleAfter time.Duration
	// ColdTargets makes a new breaker for a per-target key ([TargetKey],
	// "method@target") start cold, as if [Breaker.MarkCold] had been
	// called when it was made: a target new to the group has usually
	// just started.
	ColdTargets bool
	// MaxBreakers bounds the number of breakers the group holds; 0 means
	// 10,000, negative is an error. Past it nothing is
	// refused: a call for a key without a breaker runs through the
	// group's overflow breaker ([Group.IsOverflow]), shared by all such
	// keys, forced closed; the calls are counted ([GroupStatus].OverflowCalls)
	// and a Warn record "breaker group full" is logged at most once a
	// minute (docs/policy.md).
	MaxBreakers int
}

// defaultMaxBreakers is GroupConfig.MaxBreakers when it is 0: far more
// than a service's methods and targets (docs/policy.md).
const defaultMaxBreakers = 10000

// overflowName is the name of a group's overflow breaker.
const overflowName = "(overflow)"

// NewGroup returns an empty group. The options apply to every breaker the
// group creates. It returns a *[PolicyError] if the policies are invalid.
func NewGroup(cfg GroupConfig, opts ...Option) (*Group, error) {
	gr, err := compileGroup(cfg.Policies)
	if err != nil {
		return nil, err
	}
	if cfg.IdleAfter < 0 {
		return nil, errors.New("breaker: GroupConfig.IdleAfter must not be negative")
	}
	if cfg.MaxBreakers < 0 {
		return nil, fmt.Errorf("breaker: GroupConfig.MaxBreakers must not be negative, got %d", cfg.MaxBreakers)
	}
	cfg.Policies = gr.doc
	g := &Group{cfg: cfg, activity: map[*Breaker]activity{}, max: int64(cfg.MaxBreakers)}
	if g.max == 0 {
		g.max = defaultMaxBreakers
	}
	g.cache.seed = maphash.MakeSeed()
	// Its own options, never the shared defaults: they point back at g,
	// which delivers the events to the subscribers after the hooks.
	g.opt = buildOptions(opts)
	g.opt.group = g
	g.rules.Store(gr)
	g.subs.Store(&[]*subscriber{})
	now := g.opt.tb.Now()
	g.lastSweep.Store(now)
	g.label = policyLabel{origin: OriginCode, appliedAt: now}
	g.full.next.Store(math.MinInt64)
	g.overflow = newOverflow(gr.def, g.opt)
	return g, nil
}

// Get returns the breaker for key, creating it if the group has none. It
// returns an error only for an empty key. When the group holds
// GroupConfig.MaxBreakers breakers and none of them is key's, Get returns
// the group's overflow breaker (tell it with [Group.IsOverflow], not by
// its Name, "(overflow)", which a key may be too): use it for the call at
// hand, and ask again for the next, as [Group.Do] does.
func (g *Group) Get(key string) (*Breaker, error) {
	if b := g.cache.find(key); b != nil {
		return b, nil
	}
	return g.get(key)
}

// Lookup returns the group's breaker for key and true, or nil and false if
// the group has none. Unlike [Group.Get] it never creates a breaker, so it
// suits code that only looks, such as a status page or an admin handler,
// and must not make a breaker for every key it is asked about. It never
// returns a breaker that has been dropped (see [GroupConfig.IdleAfter] and
// [Group.Remove]). For a key the group holds it takes no lock and
// allocates nothing.
func (g *Group) Lookup(key string) (*Breaker, bool) {
	if b := g.cache.find(key); b != nil {
		return b, true
	}
	if key == "" {
		return nil, false
	}
	// A breaker found in the map may be under a drop (marked, then
	// removed, with g.mu held): it is as good as gone.
	if b := g.load(key); b != nil && !b.dropped() {
		g.cache.put(key, b)
		return b, true
	}
	return nil, false
}

func (g *Group) get(key string) (*Breaker, error) {
	if key == "" {
		return nil, errors.New("breaker: empty key")
	}
	// A dropped breaker is in the map only while its drop is under way,
	// with g.mu held; create waits for the drop to finish.
	if b := g.load(key); b != nil && !b.dropped() {
		g.cache.put(key, b)
		return b, nil
	}
	return g.create(key), nil
}

// load returns the group's breaker for key, or nil.
func (g *Group) load(key string) *Breaker {
	if v, ok := g.m.Load(key); ok {
		return v.(*Breaker)
	}
	return nil
}

// create makes the breaker for key, or hands out the overflow breaker
// when the group is full. The breaker's name, and every key the group
// keeps, is a copy of key, never key itself: see keyCache.
func (g *Group) create(key string) *Breaker {
	now := g.opt.tb.Now()
	if g.n.Load() >= g.max && !g.sweepDue(now) {
		// Full, and no sweep could make room: no lock, so that a flood
		// of new keys does not queue on the group's mutex.
		return g.overflowed(now)
	}
	g.mu.Lock()
	if v, ok := g.m.Load(key); ok {
		g.mu.Unlock()
		return v.(*Breaker)
	}
	var dropped sweepReport
	if g.sweepDue(now) {
		dropped = g.sweepLocked(now)
	}
	if g.n.Load() >= g.max {
		g.mu.Unlock()
		g.logDrops(dropped)
		return g.overflowed(now)
	}
	name := strings.Clone(key)
	gr := g.rules.Load()
	gr.markUsed(name)
	r := gr.lookup(name)
	b := newBreaker(name, r, g.opt)
	b.setCandidate(g, gr.candidateFor(name), gr.version)
	if g.cfg.ColdTargets && isTargetKey(name) {
		b.markCold(now) // the candidate too
	}
	g.m.Store(name, b)
	g.n.Add(1)
	g.cache.put(name, b)
	g.mu.Unlock()
	g.logDrops(dropped)
	return b
}

// sweepDue reports whether idle breakers are due to be looked for at now:
// eviction is on and the last sweep is IdleAfter/2 old.
func (g *Group) sweepDue(now int64) bool {
	return g.cfg.IdleAfter > 0 && now-g.lastSweep.Load() >= int64(g.cfg.IdleAfter)/2
}

// Do is Get(key) followed by Do on that breaker.
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	// The key's address first, inlined here: a breaker found there that
	// has since been dropped hands the call to its successor (Breaker.Do).
	b := g.cache.ptrSlot(key).Load()
	if b == nil || b.name != key {
		var err error
		if b, err = g.Get(key); err != nil {
			return err
		}
	}
	return b.Do(ctx, fn)
}

// Now returns the time on the group's clock (see [WithClock]): the time
// its breakers judge by, and the one a report on them should carry.
func (g *Group) Now() time.Time { return g.opt.tb.Time(g.opt.tb.Now()) }

// Len returns the number of breakers in the group. The overflow breaker
// (see GroupConfig.MaxBreakers) is not one of them.
func (g *Group) Len() int { return int(g.n.Load()) }

// Range calls f for each breaker in the group, in no particular order,
// until f returns false. A breaker being dropped is skipped: it is marked
// before it leaves the map.
func (g *Group) Range(f func(key string, b *Breaker) bool) {
	g.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		return b.dropped() || f(k.(string), b)
	})
}

// GroupStatus is what a group says of itself, beside the status of each
// of its breakers: how many it holds against its cap, the calls it sent
// past the cap, and the breakers it dropped as idle.
type GroupStatus struct {
	// Breakers is the number of breakers the group holds ([Group.Len]);
	// MaxBreakers the most it will hold (GroupConfig.MaxBreakers).
	Breakers    int `json:"breakers"`
	MaxBreakers int `json:"max_breakers"`
	// OverflowCalls is the number of calls for keys that had no breaker
	// while the group held MaxBreakers (Get or Do for such a key), which
	// ran through the overflow breaker; Overflow is that breaker's
	// counters, the outcomes of those calls.
	OverflowCalls uint64   `json:"overflow_calls"`
	Overflow      Counters `json:"overflow"`
	// Evicted counts the breakers dropped as idle (GroupConfig.IdleAfter),
	// by the state they were in when dropped.
	Evicted Evictions `json:"evicted"`
}

// Evictions counts the breakers a group dropped as idle, by the state
// they were in. The counts never go down.
type Evictions struct {
	Closed   uint64 `json:"closed"`
	Open     uint64 `json:"open"`
	HalfOpen uint64 `json:"half_open"`
}

// Status returns what the group says of itself. Its counts never go down.
func (g *Group) Status() GroupStatus {
	return GroupStatus{
		Breakers:      g.Len(),
		MaxBreakers:   int(g.max),
		OverflowCalls: g.full.calls.Load(),
		Overflow:      g.overflow.Counters(),
		Evicted: Evictions{
			Closed:   g.evicted[Closed].Load(),
			Open:     g.evicted[Open].Load(),
			HalfOpen: g.evicted[HalfOpen].Load(),
		},
	}
}
