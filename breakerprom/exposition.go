package breakerprom

import (
	"io"
	"slices"
	"strings"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/candidate"
	"github.com/govkit/breaker/live"
)

// flushAt is the size at which a scrape hands its buffer to the writer: a
// few hundred lines, so that the buffer stays in the cache and a scrape
// of any size holds only this much text.
const flushAt = 64 << 10

// scrape is the working memory of one scrape, reused by the next through
// the handler's pool: the group read into rows, then the text.
type scrape struct {
	w      io.Writer
	buf    []byte
	n      int64
	err    error
	header string // the HELP and TYPE lines of a family yet without samples

	keys  []keyed
	spare []keyed // for sorting keys
	rows  []row
	lats  []latencyRow
	cands []candidateRow
	// counts holds each breaker's count of each possible transition: the
	// row's i at counts[i*len(possibleTransitions)+j] for the j-th.
	counts  []uint64
	trans   []transitionRow // the breakers' transitions that are not possible ones, in the registry's order
	ctrans  []transitionRow // of the candidates, likewise
	label   breaker.PolicyLabel
	reloads live.Reloads
	group   breaker.GroupStatus
	origin  string // escaped, as version
	version string
	// lastResult and lastVersion are the last reload's, escaped; empty
	// result: none yet.
	lastResult, lastVersion string
	// down and rejected say whether the follower's source is down and
	// whether a refused document stands; their labels escaped.
	down, rejected                         bool
	downOrigin, rejectedOrigin, rejVersion string
}

type keyed struct {
	head uint64 // the first eight bytes of key past the common prefix
	key  string // the label value of the breaker's name
	raw  string // the group's key, for names with one label value
	b    *breaker.Breaker
}

// head is the first eight bytes of s, big-endian, zeros past its end:
// two heads compare as the strings' first eight bytes do, and equal heads
// leave the order to the strings.
func head(s string) uint64 {
	var h uint64
	for i := 0; i < 8; i++ {
		h <<= 8
		if i < len(s) {
			h |= uint64(s[i])
		}
	}
	return h
}

// sortKeys sorts the keys: by head, with a radix sort, a byte at a time
// from the last (linear in the number of keys, where a comparison sort
// grew as n·log n and was the part of a scrape that grew fastest), then
// each run of equal heads by the keys themselves.
func (sc *scrape) sortKeys() {
	keys := sc.keys
	if len(keys) < 2 {
		return
	}
	sc.spare = slices.Grow(sc.spare[:0], len(keys))[:len(keys)]
	from, to := keys, sc.spare
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for i := range from {
			count[byte(from[i].head>>shift)]++
		}
		if count[byte(from[0].head>>shift)] == len(from) {
			continue // every key has this byte: nothing to move
		}
		pos := 0
		for b, c := range count {
			count[b] = pos
			pos += c
		}
		for i := range from {
			b := byte(from[i].head >> shift)
			to[count[b]] = from[i]
			count[b]++
		}
		from, to = to, from
	}
	if &from[0] != &keys[0] {
		copy(keys, from)
	}
	clear(sc.spare)
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].head == keys[i].head {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b keyed) int { return compareNames(a.key, a.raw, b.key, b.raw) })
		}
		i = j
	}
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// row is what the families of one breaker say, its name escaped.
type row struct {
	name                                     string
	reason                                   string // escaped; empty while closed
	tripReason                               string // escaped; empty while no outage is in progress
	tripCalls, tripFailures, tripTimeouts    uint64
	tripSlow, tripRun                        uint64
	tripSlowCall                             float64
	outage                                   bool // an outage is in progress: the outage and trip families have a sample
	outageTrips, outageProbesFailed          uint64
	outageProbesPassed, outageOnError        uint64
	outageRefused                            uint64
	windowSlow                               uint64
	windowSlowRatio, policySlowRatio         float64
	policySlowCall                           float64
	state                                    breaker.State
	mode                                     breaker.Mode
	failures, ignored, successes, timeouts   uint64
	slow, rejected, shadowRejected, fallback uint64
	throttled                                uint64
	throttleProbability                      float64
	probesFailed, probesPassed, window       uint64
	notClosed, openDuration                  float64
	errorRatio, policyRatio                  float64
}

type latencyRow struct {
	row             int
	quantiles       [4]float64 // of latencyQuantiles
	sum, timeout    float64
	count, censored uint64
}

type candidateRow struct {
	row                                  int
	state                                breaker.State
	wouldRefuse, wouldAdmit, differences uint64
}

type transitionRow struct {
	row    int
	from   breaker.State
	to     breaker.State
	reason string // escaped
	count  uint64
}

// latencyQuantiles are the quantiles of the latency summary, as their
// label values.
var latencyQuantiles = [4]string{"0.5", "0.9", "0.99", "0.999"}

func (sc *scrape) reset(w io.Writer) {
	sc.w, sc.buf, sc.n, sc.err, sc.header = w, sc.buf[:0], 0, nil, ""
}

// clear drops what the scrape read, so that a pooled scrape keeps no
// breaker alive.
func (sc *scrape) clear() {
	clear(sc.keys)
	clear(sc.rows)
	clear(sc.trans)
	clear(sc.ctrans)
	sc.keys, sc.rows, sc.lats, sc.cands = sc.keys[:0], sc.rows[:0], sc.lats[:0], sc.cands[:0]
	sc.trans, sc.ctrans = sc.trans[:0], sc.ctrans[:0]
	sc.label, sc.reloads, sc.origin, sc.version, sc.w = breaker.PolicyLabel{}, live.Reloads{}, "", "", nil
	sc.group = breaker.GroupStatus{}
	sc.lastResult, sc.lastVersion = "", ""
	sc.down, sc.rejected, sc.downOrigin, sc.rejectedOrigin, sc.rejVersion = false, false, "", "", ""
}

// Write appends p to the text, for the encoder of the other metrics.
func (sc *scrape) Write(p []byte) (int, error) {
	sc.buf = append(sc.buf, p...)
	sc.maybeFlush()
	return len(p), nil
}

func (sc *scrape) maybeFlush() {
	if len(sc.buf) >= flushAt {
		sc.flush()
	}
}

// flush writes the buffer out. After an error it only empties the buffer:
// the scrape runs to its end, which costs less than checking for an
// error at every line.
func (sc *scrape) flush() {
	if sc.err == nil && len(sc.buf) > 0 {
		n, err := sc.w.Write(sc.buf)
		sc.n += int64(n)
		sc.err = err
	}
	sc.buf = sc.buf[:0]
}

// sample appends one sample line, after its family's header if it is the
// first.
func (sc *scrape) sample(t *lineTemplate, v *vals, x float64) {
	if sc.header != "" {
		sc.buf = append(sc.buf, sc.header...)
		sc.header = ""
	}
	sc.buf = t.line(sc.buf, v, x)
	sc.maybeFlush()
}

// read reads every breaker of g, in the order of their names, the
// group's policy label, and what f (nil or not) has done.
func (sc *scrape) read(g *breaker.Group, f *live.Follower) {
	// Sorted by copies of the keys packed into one string, and first by
	// eight bytes of each, past the prefix they all share, as an integer:
	// the keys lie scattered over the heap, one beside each breaker, and
	// comparing them where they lie missed the cache at every comparison
	// once the group outgrew it; per-target keys share a long prefix
	// (inventory.GetStock@10.0.), and the integers order nearly all of
	// them in linear time without reading the keys at all.
	size := 0
	g.Range(func(key string, b *breaker.Breaker) bool {
		// As the collector does, and before the sort, so that the
		// order is the registry's.
		sc.keys = append(sc.keys, keyed{key: validLabelValue(key), raw: key, b: b})
		size += len(sc.keys[len(sc.keys)-1].key)
		return true
	})
	var packed strings.Builder
	packed.Grow(size)
	for _, k := range sc.keys {
		packed.WriteString(k.key)
	}
	all, off := packed.String(), 0
	var common string
	if len(sc.keys) > 0 {
		common = sc.keys[0].key
	}
	for i := range sc.keys {
		k := &sc.keys[i]
		n := len(k.key)
		k.key, off = all[off:off+n], off+n
		common = common[:commonPrefix(common, k.key)]
	}
	for i := range sc.keys {
		k := &sc.keys[i]
		k.head = head(k.key[len(common):])
	}
	sc.sortKeys()
	// As the collector does: one series for names with one label value.
	sc.keys = slices.CompactFunc(sc.keys, func(a, b keyed) bool { return a.key == b.key })

	sc.rows = slices.Grow(sc.rows[:0], len(sc.keys))[:len(sc.keys)]
	n := len(sc.keys) * len(possibleTransitions)
	sc.counts = slices.Grow(sc.counts[:0], n)[:n]
	for i, k := range sc.keys {
		// Status first: it notices an ended cooldown, and the transition
		// it makes belongs in the counts read next.
		s := k.b.Status()
		r := &sc.rows[i]
		c := s.Counters
		*r = row{
			name: escapeLabelValue(k.key), state: s.State, mode: s.Mode,
			failures: c.Failures, ignored: c.Ignored, successes: c.Successes, timeouts: c.Timeouts,
			slow: c.Slow, rejected: c.Rejected, shadowRejected: c.ShadowRejected, fallback: c.Fallbacks,
			probesFailed: c.ProbesFailed, probesPassed: c.ProbesPassed, window: s.Window.Counted,
			notClosed: c.OpenTime.Seconds(), openDuration: outageSeconds(s),
			errorRatio: s.ErrorRatio, policyRatio: s.Policy.ErrorRatio,
			throttled: c.Throttled, throttleProbability: s.ThrottleProbability,
			windowSlow: s.Window.Slow, windowSlowRatio: s.Window.SlowRatio(),
			policySlowRatio: s.Policy.SlowRatio, policySlowCall: s.Policy.SlowCall.Seconds(),
		}
		if s.State != breaker.Closed && s.Reason != "" {
			r.reason = escapeLabelValue(string(s.Reason))
		}
		if o := s.Outage; o != nil {
			t := o.Trip
			w := t.Window
			r.outage = true
			r.outageTrips, r.outageProbesFailed = uint64(max(o.Trips, 0)), uint64(max(o.Reopens, 0)) // probe timeouts included
			r.outageProbesPassed, r.outageOnError = uint64(max(o.ProbesPassed, 0)), uint64(max(o.ProbesPassedOnError, 0))
			r.outageRefused = o.Refused
			r.tripReason = escapeLabelValue(string(t.Reason))
			r.tripCalls, r.tripFailures, r.tripTimeouts, r.tripSlow = w.Counted, w.Failures, w.Timeouts, w.Slow
			r.tripRun, r.tripSlowCall = t.Run, t.SlowCall.Seconds()
		}
		if l := s.Latency; l != nil {
			lr := latencyRow{row: i, sum: l.SumTotal.Seconds(), timeout: l.Timeout.Seconds(),
				count: l.SamplesTotal, censored: l.CensoredTotal}
			for j, q := range latencyQuantileValues(*l) {
				lr.quantiles[j] = q.Seconds() // 0: unknown, not written
			}
			sc.lats = append(sc.lats, lr)
		}
		if cs, ok := candidate.Of(k.b); ok {
			sc.cands = append(sc.cands, candidateRow{row: i, state: cs.State,
				wouldRefuse: cs.WouldRefuse, wouldAdmit: cs.WouldAdmit, differences: cs.Differences})
			sc.ctrans = appendTransitions(sc.ctrans, i, cs.Transitions)
		}
		counts := sc.counts[i*len(possibleTransitions) : (i+1)*len(possibleTransitions)]
		clear(counts)
		for _, t := range k.b.Transitions() {
			if j := possibleIndex(t); j >= 0 {
				counts[j] = t.Count
			} else {
				sc.trans = append(sc.trans, transitionRow{row: i, from: t.From, to: t.To,
					reason: escapeLabelValue(string(t.Reason)), count: t.Count})
			}
		}
	}
	sortTransitions(sc.trans)
	sortTransitions(sc.ctrans)
	sc.label = g.PolicyLabel()
	fs := followerStatus(f)
	sc.reloads = fs.Reloads
	sc.group = g.Status()
	sc.origin, sc.version = escapeLabelValue(sc.label.Origin), escapeLabelValue(sc.label.Version)
	if l := fs.Last; l != nil {
		sc.lastResult, sc.lastVersion = l.Result.String(), escapeLabelValue(l.Version)
	}
	if d := fs.Down; d != nil {
		sc.down, sc.downOrigin = true, escapeLabelValue(d.Origin)
	}
	if r := fs.Rejected; r != nil {
		sc.rejected = true
		sc.rejectedOrigin, sc.rejVersion = escapeLabelValue(r.Origin), escapeLabelValue(r.Version)
	}
}

// possibleTransitions is every transition a breaker can make; each
// breaker's are written, at 0 until it makes them, so that a rate or an
// increase sees its first (see [breaker.PossibleTransitions]).
// possibleByFrom lists their indices in the order the registry sorts
// them in within one breaker: by from (across breakers first), then
// reason, then to.
var (
	possibleTransitions = breaker.PossibleTransitions()
	possibleByFrom      = byFrom(possibleTransitions)
)

func byFrom(possibleTransitions []breaker.TransitionCount) [][]int {
	var out [][]int
	for _, from := range statesByName {
		var idx []int
		for i, t := range possibleTransitions {
			if t.From == from {
				idx = append(idx, i)
			}
		}
		slices.SortFunc(idx, func(a, b int) int {
			ta, tb := possibleTransitions[a], possibleTransitions[b]
			if c := strings.Compare(string(ta.Reason), string(tb.Reason)); c != 0 {
				return c
			}
			return strings.Compare(ta.To.String(), tb.To.String())
		})
		out = append(out, idx)
	}
	return out
}

// possibleIndex is t's index in possibleTransitions, or -1.
func possibleIndex(t breaker.TransitionCount) int {
	for i, p := range possibleTransitions {
		if p.From == t.From && p.To == t.To && p.Reason == t.Reason {
			return i
		}
	}
	return -1
}

func appendTransitions(to []transitionRow, row int, ts []breaker.TransitionCount) []transitionRow {
	for _, t := range ts {
		to = append(to, transitionRow{row: row, from: t.From, to: t.To, reason: escapeLabelValue(string(t.Reason)), count: t.Count})
	}
	return to
}

// sortTransitions puts transitions in the order of their labels' names,
// from, name, reason, to, as a registry sorts them. The rows are in the
// order of the names already.
func sortTransitions(ts []transitionRow) {
	slices.SortFunc(ts, func(a, b transitionRow) int {
		if c := strings.Compare(a.from.String(), b.from.String()); c != 0 {
			return c
		}
		if a.row != b.row {
			return a.row - b.row
		}
		if c := strings.Compare(a.reason, b.reason); c != 0 {
			return c
		}
		return strings.Compare(a.to.String(), b.to.String())
	})
}

// modesByName is every mode, in the order of their names, as the
// registry sorts the mode label (see statesByName).
var modesByName = func() []breaker.Mode {
	m := slices.Clone(modes[:])
	slices.SortFunc(m, func(a, b breaker.Mode) int { return strings.Compare(a.String(), b.String()) })
	return m
}()

// newExpFamily compiles family f with the namespace and the constant
// labels, and says how it writes its samples from a scrape.
func newExpFamily(ns string, f family, consts []constLabel) expFamily {
	name := ns + "_" + f.name
	e := expFamily{name: name, typ: f.typ,
		header: "# HELP " + name + " " + helpEscaper.Replace(f.help) + "\n# TYPE " + name + " " + f.typ + "\n"}
	t := newTemplate(name, f.labels, consts, "")
	// perBreaker writes one sample per breaker, of value v(row).
	perBreaker := func(v func(r *row) float64) func(sc *scrape) {
		return func(sc *scrape) {
			var l vals
			for i := range sc.rows {
				r := &sc.rows[i]
				l[0] = r.name
				sc.sample(t, &l, v(r))
			}
		}
	}
	// perKind writes, for each breaker, one sample per kind (its second
	// label, in the order given), of value v(r, k) for the k-th.
	perKind := func(kinds []string, v func(r *row, k int) float64) func(sc *scrape) {
		return func(sc *scrape) {
			var l vals
			for i := range sc.rows {
				r := &sc.rows[i]
				l[0] = r.name
				for k, kind := range kinds {
					l[1] = kind
					sc.sample(t, &l, v(r, k))
				}
			}
		}
	}
	// perLatency and perCandidate likewise, for the breakers that have one.
	perLatency := func(v func(l *latencyRow) float64) func(sc *scrape) {
		return perRow(t, func(sc *scrape) []latencyRow { return sc.lats }, func(l *latencyRow) int { return l.row }, v)
	}
	perCandidate := func(v func(c *candidateRow) float64) func(sc *scrape) {
		return perRow(t, func(sc *scrape) []candidateRow { return sc.cands }, func(c *candidateRow) int { return c.row }, v)
	}
	// perReason writes a sample of 1 for each breaker with a reason, the
	// reason its second label.
	perReason := func(reason func(r *row) string) func(sc *scrape) {
		return func(sc *scrape) {
			var l vals
			for i := range sc.rows {
				if r := &sc.rows[i]; reason(r) != "" {
					l[0], l[1] = r.name, reason(r)
					sc.sample(t, &l, 1)
				}
			}
		}
	}
	// whole writes one sample of the group as a whole, of value v.
	whole := func(v func(sc *scrape) float64) func(sc *scrape) {
		return func(sc *scrape) {
			var l vals
			sc.sample(t, &l, v(sc))
		}
	}
	// flag writes a sample of 1 labelled with l while it is up, none
	// otherwise.
	flag := func(up func(sc *scrape) (bool, vals)) func(sc *scrape) {
		return func(sc *scrape) {
			if ok, l := up(sc); ok {
				sc.sample(t, &l, 1)
			}
		}
	}
	transitions := func(ts func(sc *scrape) []transitionRow) func(sc *scrape) {
		return func(sc *scrape) {
			var l vals
			for _, tr := range ts(sc) {
				l = vals{sc.rows[tr.row].name, tr.from.String(), tr.to.String(), tr.reason}
				sc.sample(t, &l, float64(tr.count))
			}
		}
	}
	one := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	switch f.name {
	case famState.name:
		e.write = func(sc *scrape) {
			var l vals
			for i := range sc.rows {
				r := &sc.rows[i]
				l[0] = r.name
				for _, st := range statesByName {
					l[1] = st.String()
					sc.sample(t, &l, one(r.state == st))
				}
			}
		}
	case famTransitions.name:
		rest := transitions(func(sc *scrape) []transitionRow { return sc.trans })
		e.write = func(sc *scrape) {
			if len(sc.trans) > 0 {
				// A transition the list of possible ones lacks: merge
				// the lot in order, the slow way.
				for i := range sc.rows {
					for j, tr := range possibleTransitions {
						sc.trans = append(sc.trans, transitionRow{row: i, from: tr.From, to: tr.To,
							reason: string(tr.Reason), count: sc.counts[i*len(possibleTransitions)+j]})
					}
				}
				sortTransitions(sc.trans)
				rest(sc)
				return
			}
			var l vals
			for fi, idx := range possibleByFrom {
				l[1] = statesByName[fi].String()
				for i := range sc.rows {
					l[0] = sc.rows[i].name
					counts := sc.counts[i*len(possibleTransitions) : (i+1)*len(possibleTransitions)]
					for _, j := range idx {
						tr := &possibleTransitions[j]
						l[2], l[3] = tr.To.String(), string(tr.Reason)
						sc.sample(t, &l, float64(counts[j]))
					}
				}
			}
		}
	case famCalls.name:
		e.write = perKind([]string{"failure", "ignored", "success", "timeout"}, func(r *row, k int) float64 {
			return float64([...]uint64{r.failures, r.ignored, r.successes, r.timeouts}[k])
		})
	case famSlow.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.slow) })
	case famRejected.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.rejected) })
	case famShadowRejected.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.shadowRejected) })
	case famThrottled.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.throttled) })
	case famThrottleProbability.name:
		e.write = perBreaker(func(r *row) float64 { return r.throttleProbability })
	case famFallbacks.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.fallback) })
	case famProbes.name:
		e.write = perKind([]string{"failed", "passed"}, func(r *row, k int) float64 {
			return float64([...]uint64{r.probesFailed, r.probesPassed}[k])
		})
	case famNotClosedTime.name:
		e.write = perBreaker(func(r *row) float64 { return r.notClosed })
	case famOpenDuration.name:
		e.write = perBreaker(func(r *row) float64 { return r.openDuration })
	case famWindowCalls.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.window) })
	case famWindowRatio.name:
		e.write = perBreaker(func(r *row) float64 { return r.errorRatio })
	case famPolicyRatio.name:
		e.write = perBreaker(func(r *row) float64 { return r.policyRatio })
	case famMode.name:
		// The mode label sorts before the name: every breaker's auto,
		// then every breaker's forced_closed, and so on.
		e.write = func(sc *scrape) {
			var l vals
			for _, m := range modesByName {
				l[1] = m.String()
				for i := range sc.rows {
					r := &sc.rows[i]
					l[0] = r.name
					sc.sample(t, &l, one(r.mode == m))
				}
			}
		}
	case famTripReason.name:
		e.write = perReason(func(r *row) string { return r.tripReason })
	case famTripCalls.name, famTripFailures.name, famTripTimeouts.name, famTripSlow.name, famTripRun.name, famTripSlowCall.name,
		famOutageTrips.name, famOutageProbesFailed.name, famOutageProbesPassed.name, famOutageProbesPassedOnError.name, famOutageRefused.name:
		v := map[string]func(r *row) float64{
			famTripCalls.name:                 func(r *row) float64 { return float64(r.tripCalls) },
			famTripFailures.name:              func(r *row) float64 { return float64(r.tripFailures) },
			famTripTimeouts.name:              func(r *row) float64 { return float64(r.tripTimeouts) },
			famTripSlow.name:                  func(r *row) float64 { return float64(r.tripSlow) },
			famTripRun.name:                   func(r *row) float64 { return float64(r.tripRun) },
			famTripSlowCall.name:              func(r *row) float64 { return r.tripSlowCall },
			famOutageTrips.name:               func(r *row) float64 { return float64(r.outageTrips) },
			famOutageProbesFailed.name:        func(r *row) float64 { return float64(r.outageProbesFailed) },
			famOutageProbesPassed.name:        func(r *row) float64 { return float64(r.outageProbesPassed) },
			famOutageProbesPassedOnError.name: func(r *row) float64 { return float64(r.outageOnError) },
			famOutageRefused.name:             func(r *row) float64 { return float64(r.outageRefused) },
		}[f.name]
		// Only while an outage is in progress, as the collector does.
		e.write = func(sc *scrape) {
			var l vals
			for i := range sc.rows {
				if r := &sc.rows[i]; r.outage {
					l[0] = r.name
					sc.sample(t, &l, v(r))
				}
			}
		}
	case famWindowSlow.name:
		e.write = perBreaker(func(r *row) float64 { return float64(r.windowSlow) })
	case famWindowSlowRatio.name:
		e.write = perBreaker(func(r *row) float64 { return r.windowSlowRatio })
	case famPolicySlowRatio.name:
		e.write = perBreaker(func(r *row) float64 { return r.policySlowRatio })
	case famPolicySlowCall.name:
		e.write = perBreaker(func(r *row) float64 { return r.policySlowCall })
	case famPolicySourceDown.name:
		e.write = flag(func(sc *scrape) (bool, vals) { return sc.down, vals{sc.downOrigin} })
	case famPolicyRejected.name:
		e.write = flag(func(sc *scrape) (bool, vals) { return sc.rejected, vals{sc.rejectedOrigin, sc.rejVersion} })
	case famPolicyLastReload.name:
		e.write = flag(func(sc *scrape) (bool, vals) { return sc.lastResult != "", vals{sc.lastResult, sc.lastVersion} })
	case famOpenReason.name:
		e.write = perReason(func(r *row) string { return r.reason })
	case famPolicyInfo.name:
		e.write = func(sc *scrape) {
			l := vals{sc.origin, sc.version}
			sc.sample(t, &l, 1)
		}
	case famPolicyApplied.name:
		e.write = whole(func(sc *scrape) float64 { return float64(sc.label.AppliedAt.UnixNano()) / 1e9 })
	case famPolicyReloads.name:
		e.write = func(sc *scrape) {
			r := sc.reloads
			for _, x := range [...]struct {
				result string
				n      uint64
			}{{"applied", r.Applied}, {"gone", r.Gone}, {"rejected", r.Rejected}, {"unchanged", r.Unchanged}, {"unreadable", r.Unreadable}} {
				l := vals{x.result}
				sc.sample(t, &l, float64(x.n))
			}
		}
	case famGroupBreakers.name:
		e.write = whole(func(sc *scrape) float64 { return float64(sc.group.Breakers) })
	case famGroupMax.name:
		e.write = whole(func(sc *scrape) float64 { return float64(sc.group.MaxBreakers) })
	case famGroupOverflow.name:
		e.write = whole(func(sc *scrape) float64 { return float64(sc.group.OverflowCalls) })
	case famGroupEvicted.name:
		e.write = func(sc *scrape) {
			for _, st := range statesByName {
				l := vals{st.String()}
				sc.sample(t, &l, float64(evictedIn(sc.group.Evicted, st)))
			}
		}
	case famCandState.name:
		e.write = func(sc *scrape) {
			var l vals
			for i := range sc.cands {
				c := &sc.cands[i]
				l[0] = sc.rows[c.row].name
				for _, st := range statesByName {
					l[1] = st.String()
					sc.sample(t, &l, one(c.state == st))
				}
			}
		}
	case famCandTransitions.name:
		e.write = transitions(func(sc *scrape) []transitionRow { return sc.ctrans })
	case famCandWouldRefuse.name:
		e.write = perCandidate(func(c *candidateRow) float64 { return float64(c.wouldRefuse) })
	case famCandWouldAdmit.name:
		e.write = perCandidate(func(c *candidateRow) float64 { return float64(c.wouldAdmit) })
	case famCandDiffs.name:
		e.write = perCandidate(func(c *candidateRow) float64 { return float64(c.differences) })
	case famLatency.name:
		q := newTemplate(name, f.labels, consts, "quantile")
		sum := newTemplate(name+"_sum", f.labels, consts, "")
		count := newTemplate(name+"_count", f.labels, consts, "")
		e.write = func(sc *scrape) {
			var l vals
			for i := range sc.lats {
				lr := &sc.lats[i]
				l[0] = sc.rows[lr.row].name
				for j, v := range lr.quantiles {
					if v > 0 { // 0: unknown, left out as the collector does
						l[1] = latencyQuantiles[j]
						sc.sample(q, &l, v)
					}
				}
				sc.sample(sum, &l, lr.sum)
				sc.sample(count, &l, float64(lr.count))
			}
		}
	case famCensored.name:
		e.write = perLatency(func(l *latencyRow) float64 { return float64(l.censored) })
	case famTimeout.name:
		e.write = perLatency(func(l *latencyRow) float64 { return l.timeout })
	default:
		panic("breakerprom: no writer for family " + f.name) // a family added to the table alone
	}
	return e
}

// perRow writes one sample per element of rows, labelled with the name of
// its breaker, sc.rows[at(r)], of value v.
func perRow[R any](t *lineTemplate, rows func(sc *scrape) []R, at func(*R) int, v func(*R) float64) func(sc *scrape) {
	return func(sc *scrape) {
		var l vals
		rs := rows(sc)
		for i := range rs {
			r := &rs[i]
			l[0] = sc.rows[at(r)].name
			sc.sample(t, &l, v(r))
		}
	}
}

// helpEscaper escapes a HELP text: backslash and line feed.
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
