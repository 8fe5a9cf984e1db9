package breaker

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A Group hands out one [Breaker] per key, creating it on first use: one
// breaker per downstream method ("inventory.GetStock"), or per method and
// target ("payment.Charge@10.0.0.7") when each instance of a downstream
// must be judged on its own. Every breaker of a group shares the group's
// options (clock, classifier, hooks, logger) and takes its policy from the
// group's [GroupPolicy]: the default, or the override for its key.
//
// Looking up an existing key takes no lock and allocates nothing. A group
// has no goroutines unless [Group.Watch] starts one; [Group.Close] stops it.
//
// A Group is safe for concurrent use by multiple goroutines.
type Group struct {
	opt   *options
	cfg   GroupConfig
	rules atomic.Pointer[groupRules]
	cache keyCache
	m     sync.Map // key → *Breaker
	subs  atomic.Pointer[[]*subscriber]

	mu        sync.Mutex // creation, eviction, policy changes, the watcher
	activity  map[*Breaker]activity
	lastSweep int64
	watch     *watcher
	stopped   *watcher // the last watcher Close stopped
}

// GroupConfig configures a [Group].
type GroupConfig struct {
	// Policies are the default policy and the per-key overrides. A zero
	// Default means DefaultPolicy().
	Policies GroupPolicy
	// IdleAfter, when positive, drops a breaker that has seen no call for
	// about this long, so that per-target keys whose set grows without
	// bound do not grow the group for ever. A breaker that is open or
	// half-open, or in a forced or shadow mode, is never dropped. Idle
	// breakers are found when a new key is created (at most every
	// IdleAfter/2), by the watcher, and by [Group.EvictIdle].
	//
	// A call counts toward activity when it returns, so a breaker whose
	// only calls are still running (a long call, a stream opened with
	// [Breaker.Allow]) can be dropped. Nothing is lost when it is: the
	// outcome of such a call, when it ends, goes into the window and the
	// counters of the group's current breaker for the key (made anew if
	// need be) as if that breaker had admitted it. A call made later
	// through a *Breaker kept from before the drop goes there too, with
	// Do, Call and Allow alike, so a key never has two live breakers. The
	// same holds for [Group.Remove]. Other methods of a dropped breaker
	// (State, Counters, SetMode, ...) act on it alone.
	IdleAfter time.Duration
	// ColdTargets makes a new breaker for a per-target key (one that
	// contains "@") start cold: its outcomes are left out of the window for
	// Policy.Warmup, as with [StartCold]. A target that appears in a group
	// has usually just started.
	ColdTargets bool
	// Alerts are the open durations at which an open breaker becomes an
	// alert of each severity. The zero value means
	// [DefaultAlertThresholds].
	Alerts AlertThresholds
	// Tick, when set, is the source of the ticks that drive the watcher
	// started by [Group.Watch], in place of a [time.Ticker]. Watch calls
	// it once, with its interval, before the watcher starts (and calls
	// stop at once if the group turns out to have a watcher already); the
	// watcher makes one round per value received on ticks (the value
	// itself is not used: every decision reads the group's clock), and
	// calls stop when it returns. A closed ticks channel ends the rounds;
	// Close still stops the watcher. JSON leaves the field out. Tick is how a test drives the watcher with the
	// clock it gave [WithClock]; with a *clock.Mock from
	// github.com/benbjohnson/clock:
	//
	//	Tick: func(d time.Duration) (<-chan time.Time, func()) {
	//		t := mock.Ticker(d)
	//		return t.C, t.Stop
	//	},
	Tick func(interval time.Duration) (ticks <-chan time.Time, stop func()) `json:"-"`
}

// GroupPolicy is the policy document of a [Group]: a default policy and
// overrides for particular keys. An override for a method
// ("payment.Charge") also applies to its per-target keys
// ("payment.Charge@10.0.0.7"), unless the per-target key has an override
// of its own.
//
// As JSON, each policy in the document is read onto the default (and the
// default onto [DefaultPolicy]), so it names only the fields that differ:
//
//	{
//	  "default":   {"error_ratio": 0.5},
//	  "overrides": {"payment.Charge": {"open_for": "45s", "max_open_for": "3m"}}
//	}
//
// Decoding is strict: an unknown field, a key named twice (a field, an
// override, "default"), a value of the wrong type or an invalid policy is
// an error that gives its path (overrides["payment.Charge"].open_for), and
// nothing of the document is applied.
type GroupPolicy struct {
	Default   Policy            `json:"default"`
	Overrides map[string]Policy `json:"overrides,omitempty"`
}

// Validate reports every invalid field of the default and of every
// override, by path, or nil. A zero Default stands for DefaultPolicy(), as
// it does in [NewGroup] and [Group.SetPolicies].
func (gp GroupPolicy) Validate() error {
	var v validator
	if gp.Default != (Policy{}) {
		gp.Default.check(&v, "default.")
	}
	for _, k := range sortedKeys(gp.Overrides) {
		if k == "" {
			v.add("overrides", "empty key")
			continue
		}
		gp.Overrides[k].check(&v, overridePath(k))
	}
	return v.err()
}

// overridePath is the path prefix of an override's fields. The key is
// quoted, and cut if it is long: a key is input too.
func overridePath(key string) string { return "overrides[" + quoteKey(key) + "]." }

// ParseGroupPolicy decodes and validates a group policy document. On error
// (a *[PolicyError] listing every problem by path) it returns a zero
// GroupPolicy.
func ParseGroupPolicy(data []byte) (GroupPolicy, error) {
	var gp GroupPolicy
	if err := gp.UnmarshalJSON(data); err != nil {
		return GroupPolicy{}, err
	}
	return gp, nil
}

// UnmarshalJSON decodes a group policy document strictly and validates it;
// see [GroupPolicy]. A key named twice at any level (a field, an override,
// "default") is an error at its path. On error gp is unchanged.
func (gp *GroupPolicy) UnmarshalJSON(data []byte) error {
	var v validator
	top := members(&v, data, "(document)", `a JSON object with "default" and "overrides"`, fieldName)
	if top == nil {
		return v.err()
	}
	def := DefaultPolicy()
	for _, k := range sortedKeys(top) {
		switch k {
		case "default":
			v.problems = append(v.problems, decodePolicyInto(&def, top[k], "default.")...)
		case "overrides":
		default:
			v.add(fieldName(k), "unknown field")
		}
	}
	var over map[string]Policy
	if raw, ok := top["overrides"]; ok && !isNull(raw) {
		docs := members(&v, raw, "overrides", "a JSON object from key to policy",
			func(k string) string { return strings.TrimSuffix(overridePath(k), ".") })
		for _, k := range sortedKeys(docs) {
			if k == "" {
				v.add("overrides", "empty key")
				continue
			}
			p := def
			v.problems = append(v.problems, decodePolicyInto(&p, docs[k], overridePath(k))...)
			if over == nil {
				over = make(map[string]Policy, len(docs))
			}
			over[k] = p
		}
	}
	if err := v.err(); err != nil {
		return err
	}
	// No overrides decode to nil, "overrides": {} included, as they
	// encode: an empty map and a nil one are the same document.
	*gp = GroupPolicy{Default: def, Overrides: over}
	return nil
}

// groupRules is a validated GroupPolicy, compiled. Breakers that use the
// same policy share one *rules.
type groupRules struct {
	doc  GroupPolicy
	def  *rules
	over map[string]*rules
}

func compileGroup(gp GroupPolicy) (*groupRules, error) {
	if gp.Default == (Policy{}) {
		gp.Default = DefaultPolicy()
	}
	if err := gp.Validate(); err != nil {
		return nil, err
	}
	def, _ := compileShared(gp.Default)
	gr := &groupRules{doc: gp, def: def, over: make(map[string]*rules, len(gp.Overrides))}
	for k, p := range gp.Overrides {
		if p == gp.Default {
			gr.over[k] = def
			continue
		}
		gr.over[k], _ = compileShared(p)
	}
	return gr, nil
}

// lookup returns the rules for key: its own override, its method's, or the
// default.
func (gr *groupRules) lookup(key string) *rules {
	if r, ok := gr.over[key]; ok {
		return r
	}
	if m, _, ok := strings.Cut(key, "@"); ok {
		if r, ok := gr.over[m]; ok {
			return r
		}
	}
	return gr.def
}

type activity struct {
	count uint64 // calls admitted or refused, as of at
	at    int64
}

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
	if cfg.Alerts == (AlertThresholds{}) {
		cfg.Alerts = DefaultAlertThresholds
	}
	if err := cfg.Alerts.validate(); err != nil {
		return nil, err
	}
	cfg.Policies = gr.doc
	g := &Group{cfg: cfg, activity: map[*Breaker]activity{}}
	// Its own options, never the shared defaults: they point back at g,
	// which delivers the events to the subscribers after the hooks.
	g.opt = buildOptions(opts)
	g.opt.group = g
	g.rules.Store(gr)
	g.subs.Store(&[]*subscriber{})
	g.lastSweep = g.opt.tb.now()
	return g, nil
}

// Get returns the breaker for key, creating it if the group has none. It
// returns an error only for an empty key.
func (g *Group) Get(key string) (*Breaker, error) {
	slot := g.cache.slot(key)
	if b := slot.Load(); b != nil && sameString(b.name, key) && !b.dropped() {
		return b, nil
	}
	return g.get(key, slot)
}

func (g *Group) get(key string, slot *atomic.Pointer[Breaker]) (*Breaker, error) {
	if key == "" {
		return nil, errors.New("breaker: empty key")
	}
	// A dropped breaker is in the map only while its drop is under way,
	// with g.mu held; create waits for the drop to finish.
	if b := g.load(key); b != nil && !b.dropped() {
		g.recache(slot, key, b)
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

// recache puts b, found in the map under key, back into key's slot:
// another key had taken the slot. b may have been dropped since it was
// found. A drop marks the breaker before it clears the slot, so if the
// mark is not seen after the store, the clearing comes after the store
// and undoes it; if it is seen, the store is undone here. Either way no
// dropped breaker stays cached, and Get never returns one from the cache
// (it checks the mark on every hit).
func (g *Group) recache(slot *atomic.Pointer[Breaker], key string, b *Breaker) {
	if !sameString(b.name, key) || b.dropped() {
		return
	}
	slot.Store(b)
	if b.dropped() {
		slot.CompareAndSwap(b, nil)
	}
}

// keyCache answers the common lookup, a key that is the very string the
// breaker was created with (a string literal or a constant), without
// hashing it: a slot chosen by the string's data pointer holds a breaker,
// and it is a hit when the breaker's name has the same data pointer and
// length. The name keeps that memory alive, and Go strings are immutable,
// so pointer and length equal means bytes equal. Measured on a 28-byte key:
// about 2 ns, against 15-25 ns for a map or a sync.Map. Any other key (one
// built per call, say) misses and takes the sync.Map; nothing is allocated
// either way. Collisions only cost a miss.
type keyCache [keyCacheSlots]atomic.Pointer[Breaker]

const keyCacheSlots = 512 // 4 KiB a group

func (c *keyCache) slot(key string) *atomic.Pointer[Breaker] {
	h := uint64(uintptr(unsafe.Pointer(unsafe.StringData(key)))) * 0x9E3779B97F4A7C15
	return &c[h>>(64-9)]
}

// forget clears b's slot if it holds b.
func (c *keyCache) forget(b *Breaker) { c.slot(b.name).CompareAndSwap(b, nil) }

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

func (g *Group) create(key string) *Breaker {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v, ok := g.m.Load(key); ok {
		return v.(*Breaker)
	}
	now := g.opt.tb.now()
	if g.cfg.IdleAfter > 0 && now-g.lastSweep >= int64(g.cfg.IdleAfter)/2 {
		g.sweepLocked(now)
	}
	r := g.rules.Load().lookup(key)
	b := newBreaker(key, r, g.opt)
	if g.cfg.ColdTargets && strings.Contains(key, "@") && r.warmup > 0 {
		b.warmUntil.Store(now + r.warmup)
	}
	g.m.Store(key, b)
	g.cache.slot(key).Store(b)
	return b
}

// Do is Get(key) followed by Do on that breaker.
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	b, err := g.Get(key)
	if err != nil {
		return err
	}
	return b.Do(ctx, fn)
}

// Remove drops the breaker for key, whatever its state, and reports
// whether there was one. Use it when a target is decommissioned. The next
// use of the key creates a new breaker; see [GroupConfig.IdleAfter] for
// what becomes of calls still running on the dropped one, and of a
// *Breaker kept from before.
func (g *Group) Remove(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.load(key)
	if b == nil {
		return false
	}
	b.drop(false)
	g.forgetLocked(key, b)
	return true
}

// forgetLocked takes the dropped b out of the map and the cache. g.mu must
// be held.
func (g *Group) forgetLocked(key string, b *Breaker) {
	g.m.Delete(key)
	delete(g.activity, b)
	g.cache.forget(b)
}

// droppedBit in a breaker's state word marks a breaker its group has let
// go of (removed, or evicted as idle). A dropped breaker is never handed
// out again: a call made on it, through a *Breaker kept from before, goes
// to the group's current breaker for the key (made if need be), and so
// does the result of a call admitted just before the drop. Dropping bumps
// the generation like a transition, so such a result misses the closed
// path's generation check and reaches record, which diverts it. The
// closed path pays nothing: it already compares the generation, and the
// admission test masks the bit together with the state.
const droppedBit = 1 << 4

func (b *Breaker) dropped() bool { return b.state.Load().dropped() }

// drop marks b dropped and reports whether it did. With onlyIdle it drops
// b only if it is closed and in ModeAuto, checked under b.mu so that no
// transition slips in between. The word becomes closed and in ModeAuto,
// so that no lazy transition (end of a cooldown, probe timeout) happens
// on a breaker nobody can see.
func (b *Breaker) drop(onlyIdle bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		w := b.state.Load()
		if w.dropped() || onlyIdle && (w.state() != Closed || w.mode() != ModeAuto) {
			return false
		}
		if b.state.CompareAndSwap(w, w.drop()) {
			return true
		}
	}
}

// successor is the group's current breaker for b's key, made if need be.
// b must have been dropped, so b.opt.group is set.
func (b *Breaker) successor() *Breaker {
	nb, _ := b.opt.group.Get(b.name) // b.name is never empty
	return nb
}

// divert hands a result that reached b (in state word w) after b was
// dropped to the key's current breaker, and reports whether it did. A
// call admitted in the last generation before the drop is a closed-state
// call (only closed breakers are evicted) whose outcome goes into the
// successor's window, made if need be, as if it had been admitted there.
// A result older than that was stale anyway: it is only counted, by the
// successor if there is one, and no breaker is made for it.
func (b *Breaker) divert(caller context.Context, now int64, gen uint64, w word, o Outcome, slow bool) bool {
	if !w.dropped() {
		return false
	}
	if w.gen() != gen+1 {
		if nb := b.opt.group.load(b.name); nb != nil && !nb.dropped() {
			nb.countOff(o)
			return true
		}
		return false
	}
	nb := b.successor()
	nw := nb.state.Load()
	if nw.state() != Closed {
		nb.countOff(o)
		return true
	}
	nb.record(caller, now, nw.gen(), o, slow, nb.rules.Load())
	return true
}

// Len returns the number of breakers in the group.
func (g *Group) Len() int {
	n := 0
	g.m.Range(func(any, any) bool { n++; return true })
	return n
}

// Range calls f for each breaker in the group, in no particular order,
// until f returns false. A breaker being dropped is skipped: it is marked
// before it leaves the map.
func (g *Group) Range(f func(key string, b *Breaker) bool) {
	g.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		return b.dropped() || f(k.(string), b)
	})
}

// Policies returns the group's policy document.
func (g *Group) Policies() GroupPolicy { return g.rules.Load().doc }

// SetPolicies replaces the group's policies and applies them to every
// breaker it holds. An invalid document is refused with a *[PolicyError]
// naming every bad field by path, and every breaker keeps its old policy.
// See [Breaker.SetPolicy] for what a running breaker keeps.
func (g *Group) SetPolicies(gp GroupPolicy) error {
	gr, err := compileGroup(gp)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rules.Store(gr)
	g.m.Range(func(k, v any) bool {
		v.(*Breaker).setRules(gr.lookup(k.(string)))
		return true
	})
	return nil
}

// LoadPolicies decodes a JSON group policy document (see [GroupPolicy]) and
// applies it with [Group.SetPolicies]. On any error nothing is applied.
func (g *Group) LoadPolicies(doc []byte) error {
	gp, err := ParseGroupPolicy(doc)
	if err != nil {
		return err
	}
	return g.SetPolicies(gp)
}

type subscriber struct {
	f   func(*Breaker, Event)
	off atomic.Bool // unsubscribed
}

// observed reports whether transitions have anyone to go to: a hook, or a
// group's subscribers.
func (o *options) observed() bool { return len(o.hooks) > 0 || o.group != nil }

// Subscribe adds f to the group's subscribers: it is called with every
// transition of every breaker in the group, outside any lock, in order for
// each breaker (see [OnTransition] for the full contract). The returned
// function removes f; once it has returned, f is not called again (a call
// already under way may still be running, unless unsubscribe was called
// from it). Calling it more than once does nothing.
//
// A subscriber is an observer, and whatever goes wrong in it stays there:
// a panic in f is recovered, the other subscribers still see the event,
// and the panic is logged at Error level, with its value and stack, to
// the group's logger ([WithLogger]), or to [slog.Default] if it has none.
// It does not reach the caller that caused the transition, which may be
// any Do of the group's users, a metrics scrape, or the watcher of
// [Group.Watch].
//
// Once a breaker has been dropped (see [Group.Remove] and
// [GroupConfig.IdleAfter]), its transitions are no longer delivered, even
// one it made just before: the group's subscribers see the group's
// breakers only.
func (g *Group) Subscribe(f func(Event)) (unsubscribe func()) {
	if f == nil {
		return func() {}
	}
	return g.SubscribeWithBreaker(func(_ *Breaker, e Event) { f(e) })
}

// SubscribeWithBreaker is [Group.Subscribe] for a subscriber that needs to
// know which breaker an event comes from: f receives it with the event.
// A key that is removed or evicted and then used again gets a new
// *Breaker whose counters start from zero, so a subscriber that keeps
// something per breaker (a metrics adapter counting transitions, say)
// keys it by the *Breaker rather than the name, and starts afresh with the
// new one.
func (g *Group) SubscribeWithBreaker(f func(b *Breaker, e Event)) (unsubscribe func()) {
	if f == nil {
		return func() {}
	}
	s := &subscriber{f: f}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Copy on write: dispatch reads the list with one atomic load.
	g.subs.Store(ptr(append(append([]*subscriber{}, *g.subs.Load()...), s)))
	return func() {
		// Marked before it leaves the list: a delivery that read the
		// list before the removal checks the mark before each call.
		s.off.Store(true)
		g.mu.Lock()
		defer g.mu.Unlock()
		var next []*subscriber
		for _, x := range *g.subs.Load() {
			if x != s {
				next = append(next, x)
			}
		}
		g.subs.Store(&next)
	}
}

func ptr[T any](v T) *T { return &v }

// dispatch delivers b's event to the subscribers. It runs after the
// breaker's own hooks, from Breaker.flush, so it inherits their order and
// their freedom from locks.
func (g *Group) dispatch(b *Breaker, e Event) {
	if b.dropped() {
		return
	}
	for _, s := range *g.subs.Load() {
		if !s.off.Load() {
			g.deliver(s, b, e)
		}
	}
}

// deliver calls one subscriber and contains its panic.
func (g *Group) deliver(s *subscriber, b *Breaker, e Event) {
	defer func() {
		if v := recover(); v != nil {
			g.reportPanic("breaker: subscriber panicked", e.Name, v)
		}
	}()
	s.f(b, e)
}

// reportPanic logs a panic recovered from user code that the library
// must survive. Run from the deferred function, debug.Stack still shows
// where the panic began.
func (g *Group) reportPanic(msg, name string, v any) {
	l := g.opt.logger
	if l == nil {
		l = slog.Default()
	}
	l.Error(msg, "name", name, "panic", v, "stack", string(debug.Stack()))
}

// EvictIdle drops the closed breakers that have seen no call for
// GroupConfig.IdleAfter and returns how many it dropped. A breaker's
// idleness is measured between calls of EvictIdle (and the group's other
// sweeps): the first sweep only notes each breaker's activity.
func (g *Group) EvictIdle() int {
	if g.cfg.IdleAfter <= 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sweepLocked(g.opt.tb.now())
}

// sweepLocked drops idle breakers. Activity is read from counters the
// breakers keep anyway, so the call path pays nothing for eviction.
func (g *Group) sweepLocked(now int64) int {
	g.lastSweep = now
	idle := int64(g.cfg.IdleAfter)
	n := 0
	g.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		c := b.Counters()
		count := c.Admitted + c.Rejected + c.ShadowRejected
		a, ok := g.activity[b]
		switch {
		case !ok || a.count != count:
			g.activity[b] = activity{count: count, at: now}
		case now-a.at >= idle && b.drop(true):
			g.forgetLocked(k.(string), b)
			n++
		}
		return true
	})
	return n
}

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
