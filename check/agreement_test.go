package check

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/internal/testutil"
)

// The agreement suite holds every verdict and number of the checker
// against the real breaker, run by a reference driver written apart from
// the checker's own simulator: Poisson arrivals by thinning, batches and
// error bursts drawn its own way, the policy's real cooldowns, probes and
// jitter. A verdict agrees when the finding is where the breaker shows
// the problem; a number agrees when the breaker's figure is within the
// checker's printed interval or within a factor of two of it.
//
//	go test -run TestAgreement_Grid -v ./check
//
// prints the table of docs/checking-policies.md. The reference runs are
// short by default and shorter under -race; CHECK_AGREEMENT_LONG=1 runs
// them ten times longer.

// refTraffic is what the reference driver draws calls from.
type refTraffic struct {
	profile []Period // steady when empty: rate and errs
	rate    float64
	errs    float64
	batch   float64
	bursts  Bursts
	// p50 and p99, when given, are the healthy calls' latency: each ends
	// after a lognormal time drawn from them, on the breaker's clock.
	// Without them calls end at once.
	p50, p99 time.Duration
}

func refOf(t Traffic) refTraffic {
	return refTraffic{profile: t.Profile, rate: t.Rate, errs: t.ErrorRatio, batch: t.Batch, bursts: t.Bursts, p50: t.P50, p99: t.P99}
}

// latency draws a healthy call's latency, or 0 without one.
func (r refTraffic) latency(rng *rand.Rand) time.Duration {
	if r.p50 <= 0 {
		return 0
	}
	sigma := math.Log(float64(r.p99)/float64(r.p50)) / 2.3263478740408408
	return time.Duration(float64(r.p50) * math.Exp(sigma*rng.NormFloat64()))
}

// refEnd is a call that ends later: at at, with err.
type refEnd struct {
	at   time.Duration
	done func(error)
	err  error
}

// refEnds is a min-heap of calls to end, by time.
type refEnds []refEnd

func (h refEnds) Len() int           { return len(h) }
func (h refEnds) Less(i, j int) bool { return h[i].at < h[j].at }
func (h refEnds) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refEnds) Push(x any)        { *h = append(*h, x.(refEnd)) }
func (h *refEnds) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (r refTraffic) at(d time.Duration) (rate, errs float64) {
	if len(r.profile) == 0 {
		return r.rate, r.errs
	}
	tod := d % (24 * time.Hour)
	per := r.profile[0]
	for _, p := range r.profile {
		if p.From <= tod {
			per = p
		}
	}
	return per.Rate, per.ErrorRatio
}

func (r refTraffic) maxRate() float64 {
	m := r.rate
	for _, p := range r.profile {
		m = max(m, p.Rate)
	}
	return m
}

// refFault is a fault from at on: errors fail at once, timeouts are cut
// te later (never when te is 0).
type refFault struct {
	at       time.Duration
	errors   float64
	timeouts float64
	te       time.Duration
}

// refResult is one reference run.
type refResult struct {
	trips     int           // closed → open
	firstOpen time.Duration // from the fault's start; -1 none
	span      time.Duration // simulated
}

// refRun drives a real breaker under p for span (or until it opens in the
// fault, if one is given).
func refRun(p breaker.Policy, tr refTraffic, f *refFault, span time.Duration, seed uint64) refResult {
	clk := &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	t0 := clk.now
	res := refResult{firstOpen: -1}
	jit := rand.New(rand.NewPCG(seed, 99))
	b, err := breaker.New("ref", p, breaker.WithClock(clk), breaker.WithRand(jit.Float64),
		breaker.OnTransition(func(ev breaker.Event) {
			if ev.From == breaker.Closed && ev.To == breaker.Open {
				res.trips++
				if at := ev.Time.Sub(t0); f != nil && at >= f.at && res.firstOpen < 0 {
					res.firstOpen = at - f.at
				}
			}
		}))
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	brng := rand.New(rand.NewPCG(seed, 13))
	// Error bursts, drawn up front.
	type iv struct{ from, to time.Duration }
	var bursts []iv
	if tr.bursts.PerDay > 0 {
		for at := time.Duration(0); at < span; {
			at += time.Duration(brng.ExpFloat64() / tr.bursts.PerDay * 86400 * float64(time.Second))
			bursts = append(bursts, iv{at, at + tr.bursts.Length})
			at += tr.bursts.Length
		}
	}
	inBurst := func(at time.Duration) bool {
		i := sort.Search(len(bursts), func(i int) bool { return bursts[i].to > at })
		return i < len(bursts) && bursts[i].from <= at
	}
	lrng := rand.New(rand.NewPCG(seed, 17))
	var ends refEnds // hanging calls and calls with a latency
	batch := max(tr.batch, 1)
	lmax := tr.maxRate() / batch
	ctx := context.Background()
	at := time.Duration(0)
	end := func(e refEnd) {
		if e.at == at {
			e.done(e.err)
			return
		}
		heap.Push(&ends, e)
	}
	for {
		at += time.Duration(rng.ExpFloat64() / lmax * float64(time.Second))
		for len(ends) > 0 && ends[0].at <= at && ends[0].at < span {
			e := heap.Pop(&ends).(refEnd)
			clk.now = t0.Add(e.at)
			e.done(e.err)
		}
		if at >= span || (f != nil && res.firstOpen >= 0) {
			res.span = min(at, span)
			if f != nil && res.firstOpen >= 0 {
				res.span = f.at + res.firstOpen
			}
			return res
		}
		rate, errs := tr.at(at)
		if rng.Float64()*lmax*batch > rate {
			continue // thinned out
		}
		if inBurst(at) {
			errs = tr.bursts.ErrorRatio
		}
		clk.now = t0.Add(at)
		n := 1
		for batch > 1 && rng.Float64() >= 1/batch {
			n++
		}
		for range n {
			_, done, err := b.Allow(ctx)
			if err != nil {
				continue
			}
			u := rng.Float64()
			if f != nil && at >= f.at {
				if u < f.errors {
					done(errInjected)
					continue
				}
				if u < f.errors+f.timeouts {
					if f.te > 0 {
						end(refEnd{at + f.te, done, context.DeadlineExceeded})
					}
					continue
				}
				u = rng.Float64()
			}
			var outcome error
			if u < errs {
				outcome = errInjected
			}
			end(refEnd{at + tr.latency(lrng), done, outcome})
		}
	}
}

// refTimes runs n faults of f (from a lead of one to two windows) and
// returns the times to trip, +Inf for none within ten minutes.
func refTimes(p breaker.Policy, tr refTraffic, errors, timeouts float64, te time.Duration, n int, seed uint64) []float64 {
	var out []float64
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := range n {
		lead := p.Window + time.Duration(rng.Float64()*float64(p.Window))
		f := &refFault{at: lead, errors: errors, timeouts: timeouts, te: te}
		r := refRun(p, tr, f, lead+10*time.Minute, seed*1000+uint64(i))
		if r.firstOpen >= 0 {
			out = append(out, r.firstOpen.Seconds())
		} else if r.trips > 0 {
			out = append(out, 0) // open before the fault
		} else {
			out = append(out, math.Inf(1))
		}
	}
	return out
}

// agreement is one row of the table.
type agreement struct {
	name, what      string
	checker, source string
	breaker         string
	ok              bool
}

// within says that the breaker's figure got agrees with the checker's
// figure want and its printed interval [lo, hi]: inside it, or within a
// factor of two.
func within(got, want, lo, hi float64) bool {
	switch {
	case math.IsInf(got, 1) || math.IsInf(want, 1):
		return math.IsInf(got, 1) == math.IsInf(want, 1)
	case got >= lo && got <= hi:
		return true
	case want == 0 || got == 0:
		return want < 1e-3 && got < 1e-3 || math.Abs(got-want) < 1e-3
	}
	return got/want <= 2 && want/got <= 2
}

// longRuns says the reference runs ten times longer.
var longRuns = os.Getenv("CHECK_AGREEMENT_LONG") != ""

// refBudget is the calls one reference figure makes.
func refBudget() float64 {
	switch {
	case longRuns:
		return 20_000_000
	case testutil.RaceEnabled:
		return 40_000
	}
	return 2_000_000
}

type gridCase struct {
	name string
	p    breaker.Policy
	t    Traffic
	// what the row holds against the breaker: "all" (the time to trip
	// when every call fails, and the never-trips verdict), "fault" (the
	// default fault with an 800 ms timeout), "false" (false trips a day).
	what string
}

func gridCases() []gridCase {
	pol := func(mod func(*breaker.Policy)) breaker.Policy {
		p := breaker.DefaultPolicy()
		if mod != nil {
			mod(&p)
		}
		return p
	}
	def := pol(nil)
	slow := func(d time.Duration, minReq int) breaker.Policy {
		return pol(func(p *breaker.Policy) { p.SlowCall, p.SlowRatio, p.MinRequests = d, 0.5, minReq })
	}
	var cs []gridCase
	for _, rate := range []float64{0.2, 1, 3, 5, 20, 100, 1000} {
		cs = append(cs, gridCase{fmt.Sprintf("default, %v/s", rate), def, Traffic{Rate: rate}, "all"})
	}
	cs = append(cs,
		gridCase{"min 5, 1/s (λW = M)", pol(func(p *breaker.Policy) { p.MinRequests = 5 }), Traffic{Rate: 1}, "all"},
		gridCase{"min 5050, 1000/s (λW < M)", pol(func(p *breaker.Policy) { p.MinRequests = 5050 }), Traffic{Rate: 1000}, "all"},
		gridCase{"min 20, 4/s (λW = M)", def, Traffic{Rate: 4}, "all"},
		gridCase{"consecutive 5, 0.2/s", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ConsecutiveFailures = 0, 5 }), Traffic{Rate: 0.2}, "all"},
		gridCase{"consecutive 5, 5/s", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ConsecutiveFailures = 0, 5 }), Traffic{Rate: 5}, "all"},
		gridCase{"batched ×5, 3/s", def, Traffic{Rate: 3, Batch: 5}, "all"},
	)
	timed := pol(func(p *breaker.Policy) { p.CallTimeout = 800 * time.Millisecond })
	for _, rate := range []float64{1, 5, 20, 100, 1000} {
		cs = append(cs, gridCase{fmt.Sprintf("timeout 800ms, %v/s, 40%%+20%% fault", rate), timed, Traffic{Rate: rate}, "fault"})
	}
	cs = append(cs,
		gridCase{"min 10, 4/s, 27% errors", pol(func(p *breaker.Policy) { p.MinRequests = 10 }), Traffic{Rate: 4, ErrorRatio: 0.27}, "false"},
		gridCase{"default, 6/s, 31% errors", def, Traffic{Rate: 6, ErrorRatio: 0.31}, "false"},
		gridCase{"default, 20/s, 35% errors", def, Traffic{Rate: 20, ErrorRatio: 0.35}, "false"},
		gridCase{"ratio 0.3, 40/s, 22% errors", pol(func(p *breaker.Policy) { p.ErrorRatio = 0.3 }), Traffic{Rate: 40, ErrorRatio: 0.22}, "false"},
		gridCase{"default, 100/s, 40% errors", def, Traffic{Rate: 100, ErrorRatio: 0.4}, "false"},
		gridCase{"default, 1000/s, 48% errors", def, Traffic{Rate: 1000, ErrorRatio: 0.48}, "false"},
		gridCase{"default, 1000/s, 30% errors (far)", def, Traffic{Rate: 1000, ErrorRatio: 0.3}, "false"},
		gridCase{"count 12, 20/s, 6.5% errors", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ErrorCount = 0, 12 }), Traffic{Rate: 20, ErrorRatio: 0.065}, "false"},
		gridCase{"consecutive 5, 10/s, 30% errors", pol(func(p *breaker.Policy) { p.ErrorRatio, p.ConsecutiveFailures = 0, 5 }), Traffic{Rate: 10, ErrorRatio: 0.3}, "false"},
		// The slow-call rule against the latency: p50 210 ms puts 57% of
		// the calls above slow_call 200 ms, over slow_ratio 0.5 (the
		// healthy traffic trips it after every close); p50 190 ms and
		// 180 ms put 44% and 38% there, near the line; slow_call 500 ms
		// is far above it.
		gridCase{"slow 200ms/0.5, min 10, 400/s, p50 210ms (over)", slow(200*time.Millisecond, 10), Traffic{Rate: 400, P50: 210 * time.Millisecond, P99: 400 * time.Millisecond}, "false"},
		gridCase{"slow 200ms/0.5, min 100, 40/s, p50 190ms (near)", slow(200*time.Millisecond, 100), Traffic{Rate: 40, P50: 190 * time.Millisecond, P99: 400 * time.Millisecond}, "false"},
		gridCase{"slow 200ms/0.5, min 10, 400/s, p50 180ms (near)", slow(200*time.Millisecond, 10), Traffic{Rate: 400, P50: 180 * time.Millisecond, P99: 400 * time.Millisecond}, "false"},
		gridCase{"slow 500ms/0.5, min 10, 400/s, p50 210ms (far)", slow(500*time.Millisecond, 10), Traffic{Rate: 400, P50: 210 * time.Millisecond, P99: 400 * time.Millisecond}, "false"},
		gridCase{"default, 5/s, 2% + six 5-min bursts at 42%", def, Traffic{Rate: 5, ErrorRatio: 0.02, Bursts: Bursts{PerDay: 6, Length: 5 * time.Minute, ErrorRatio: 0.42}}, "false"},
		gridCase{"default, 5/s, errors 5–45% over the day", def, diurnalErrors(), "false"},
		gridCase{"default, 0.5–9.5/s over the day", def, diurnalRate(), "all"},
	)
	return cs
}

func diurnalErrors() Traffic {
	t := Traffic{Profile: []Period{
		{0, 5, 0.05}, {4 * time.Hour, 5, 0.15}, {8 * time.Hour, 5, 0.25},
		{12 * time.Hour, 5, 0.45}, {16 * time.Hour, 5, 0.35}, {20 * time.Hour, 5, 0.25},
	}}
	return t.withMeans()
}

func diurnalRate() Traffic {
	t := Traffic{Profile: []Period{
		{0, 0.5, 0}, {4 * time.Hour, 2.5, 0}, {8 * time.Hour, 7.5, 0},
		{12 * time.Hour, 9.5, 0}, {16 * time.Hour, 7.5, 0}, {20 * time.Hour, 2.5, 0},
	}}
	return t.withMeans()
}

// finding returns r's finding of the given checks, the first found.
func finding(r *Report, checks ...string) (Finding, bool) {
	for _, c := range checks {
		for _, f := range r.Findings {
			if f.Check == c {
				return f, true
			}
		}
	}
	return Finding{}, false
}

// refSeeds are the seeds of the reference figures: the row's figure is
// their median, and the table gives their range.
func refSeeds() []uint64 {
	if testutil.RaceEnabled {
		return []uint64{1}
	}
	return []uint64{1, 2, 3}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

func fmtRange(xs []float64, f func(float64) string) string {
	if len(xs) == 1 {
		return f(xs[0])
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%s (%s–%s)", f(median(s)), f(s[0]), f(s[len(s)-1]))
}

func fmtSecs(s float64) string {
	if math.IsInf(s, 1) {
		return "never in 10m"
	}
	return dur(seconds(s))
}

// checkRow runs the checker and the reference on one case.
func checkRow(t *testing.T, c gridCase) agreement {
	t.Helper()
	row := agreement{name: c.name, what: c.what}
	opt := Options{Seed: 11}
	if testutil.RaceEnabled {
		opt.SimCalls = 40_000
	}
	if c.what == "fault" {
		opt.Fault = DefaultFault
	}
	r, err := Group(breaker.GroupPolicy{Default: c.p}, Workload{Keys: map[string]Traffic{"k": c.t}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	tr := refOf(c.t)
	switch c.what {
	case "all", "fault":
		errs, timeouts, te := 1.0, 0.0, time.Duration(0)
		checks := []string{CheckNeverTrips, CheckTripsOnBursts, CheckTimeToTrip}
		if c.p.ConsecutiveFailures > 0 {
			checks = []string{CheckTimeToTrip}
		}
		if c.what == "fault" {
			errs, timeouts, te = 0.4, 0.2, c.p.CallTimeout
			checks = []string{CheckNeverTrips, CheckFaultTimeToTrip}
		}
		f, ok := finding(r, checks...)
		if !ok {
			t.Fatalf("no finding of %v", checks)
		}
		if f.Check == CheckTimeToTrip && f.Severity == Error {
			f.Numbers["time_to_trip_s"] = math.Inf(1)
		}
		// A profile is judged at its worst period: the reference runs
		// that period's traffic.
		if from, ok := f.Numbers["period_from_s"]; ok {
			for _, per := range c.t.Profile {
				if per.From == time.Duration(from)*time.Second {
					tr = refTraffic{rate: per.Rate, errs: per.ErrorRatio}
				}
			}
		}
		per := tr.maxRate() * (1.5*c.p.Window.Seconds() + 60)
		most := 200.0
		if testutil.RaceEnabled {
			most = 20 // a timed breaker clears a latency histogram per call at low rates
		}
		n := int(min(most, max(20, refBudget()/per)))
		var meds, nevers []float64
		for _, seed := range refSeeds() {
			s := newSample(refTimes(c.p, tr, errs, timeouts, te, n, seed))
			m, _, _ := s.quantile(0.5)
			meds = append(meds, m)
			nevers = append(nevers, s.never())
		}
		got := median(meds)
		want, has := f.Numbers["time_to_trip_s"]
		if !has {
			want = math.Inf(1)
		}
		lo, hi := want, want
		if v, ok := f.Numbers["time_to_trip_low_s"]; ok {
			lo, hi = v, f.Numbers["time_to_trip_high_s"]
		}
		row.checker = fmt.Sprintf("%s: %s", f.Check, fmtSecs(want))
		if f.Source == SourceSimulated {
			row.checker += fmt.Sprintf(" [%s, %s]", fmtSecs(lo), fmtSecs(hi))
		}
		if a, ok := f.Numbers["analytic_time_to_trip_s"]; ok && f.Source == SourceSimulated {
			row.checker += fmt.Sprintf("; analytic %s", fmtSecs(a))
		}
		if f.Check == CheckNeverTrips {
			row.checker = f.Check
		}
		row.source = f.Source
		row.breaker = fmt.Sprintf("median %s; never in 10m: %s (%d trials)", fmtRange(meds, fmtSecs), fmtRange(nevers, pct), n)
		// The verdict: never-trips exactly where no reference fault
		// tripped it; the time where it does.
		never := f.Check == CheckNeverTrips
		row.ok = never == (median(nevers) == 1)
		if !never {
			row.ok = row.ok && within(got, want, lo, hi)
		}
	case "false":
		f, ok := finding(r, CheckFalseTrips)
		if !ok {
			t.Fatal("no false_trips finding")
		}
		want := f.Numbers["false_trips_per_day"]
		lo, hi := want, want
		if f.Source == SourceSimulated {
			lo, hi = f.Numbers["simulated_low"], f.Numbers["simulated_high"]
		}
		span := time.Duration(min(24*3600, refBudget()/c.t.Rate) * float64(time.Second))
		if len(c.t.Profile) > 0 || c.t.Bursts.PerDay > 0 {
			span = 24 * time.Hour
		}
		var per []float64
		var counts []float64
		for _, seed := range refSeeds() {
			res := refRun(c.p, tr, nil, span, seed)
			per = append(per, float64(res.trips)/span.Hours()*24)
			counts = append(counts, float64(res.trips))
		}
		got := median(per)
		n := int(median(counts))
		clo, chi := poissonInterval(n)
		d := span.Hours() / 24
		row.checker = fmt.Sprintf("%s/day", num(want))
		if f.Source == SourceSimulated {
			row.checker += fmt.Sprintf(" [%s, %s]; analytic %s", num(lo), num(hi), num(f.Numbers["analytic_false_trips_per_day"]))
		}
		row.source = f.Source
		row.breaker = fmt.Sprintf("%s/day [%s, %s] (%d trips in %v)", fmtRange(per, num), num(clo/d), num(chi/d), n, span.Round(time.Minute))
		warn := f.Severity >= Warning
		// The verdict is the threshold's; the number agrees within the
		// intervals of either, or a factor of two.
		row.ok = warn == (got > DefaultMaxFalseTripsPerDay || chi/d > DefaultMaxFalseTripsPerDay && want > DefaultMaxFalseTripsPerDay) &&
			(within(got, want, lo, hi) || want >= clo/d && want <= chi/d)
	}
	return row
}

// cheap says a row's figures are resolved by the small budgets of -race:
// a quiet key's times to trip, and false trips of a few a hour.
func cheap(c gridCase) bool {
	return c.t.Rate <= 6 && c.t.Bursts.PerDay == 0 && len(c.t.Profile) == 0 && c.t.Rate >= 1
}

// TestAgreement_Grid holds the checker against the real breaker over the
// grid: rates 0.2–1,000/s, min_requests small and at the edge of λW, the
// consecutive rule, error ratios near and far from the threshold, error
// bursts, daily profiles and batched arrivals.
func TestAgreement_Grid(t *testing.T) {
	t.Parallel()
	var rows []agreement
	for _, c := range gridCases() {
		t.Run(c.name, func(t *testing.T) {
			// The race detector slows the breaker many times over: under it
			// only the rows whose figures a few seconds resolve run.
			if testutil.RaceEnabled && !cheap(c) {
				t.Skip("too long under -race; run without it")
			}
			row := checkRow(t, c)
			rows = append(rows, row)
			if !row.ok {
				t.Errorf("%s (%s): checker %s (%s), breaker %s", c.name, c.what, row.checker, row.source, row.breaker)
			}
		})
	}
	if testing.Verbose() {
		var sb strings.Builder
		sb.WriteString("| case | judged | checker | source | real breaker | agrees |\n|---|---|---|---|---|---|\n")
		for _, r := range rows {
			ok := "yes"
			if !r.ok {
				ok = "**no**"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", r.name, r.what, r.checker, r.source, r.breaker, ok)
		}
		fmt.Print(sb.String())
	}
}
