package replay

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/govkit/breaker"
)

// ParseScenario decodes a JSON scenario and validates it. Decoding is
// strict: unknown fields and values of the wrong type are errors. The error,
// if any, is a *[ScenarioError] naming every bad field by its path.
func ParseScenario(data []byte) (*Scenario, error) {
	var p problems
	s := decodeScenario(&p, data)
	if err := p.err(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func decodeScenario(p *problems, data []byte) *Scenario {
	s := &Scenario{Seed: 1, Policy: breaker.DefaultPolicy()}
	o, ok := newObject(p, "", data)
	if !ok {
		return s
	}
	o.str("name", &s.Name)
	o.str("description", &s.Description)
	o.duration("duration", &s.Duration)
	o.uint64("seed", &s.Seed)
	// The scenario's policy comes first: calls and the candidate overlay
	// their documents onto it.
	o.policy("policy", &s.Policy)
	if raw := o.take("entry"); raw != nil {
		if eo, ok := newObject(p, "entry", raw); ok {
			s.Entry = decodeEntry(eo)
		}
	} else {
		p.add("entry", "required")
	}
	if items, ok := o.array("tiers"); ok {
		for i, raw := range items {
			if to, ok := newObject(p, fmt.Sprintf("tiers[%d]", i), raw); ok {
				s.Tiers = append(s.Tiers, decodeTier(to, s.Policy))
			} else {
				s.Tiers = append(s.Tiers, Tier{})
			}
		}
	}
	if items, ok := o.array("faults"); ok {
		for i, raw := range items {
			if fo, ok := newObject(p, fmt.Sprintf("faults[%d]", i), raw); ok {
				s.Faults = append(s.Faults, decodeFault(fo))
			} else {
				s.Faults = append(s.Faults, Fault{})
			}
		}
	}
	if raw := o.take("candidate"); raw != nil {
		if co, ok := newObject(p, "candidate", raw); ok {
			s.Candidate = decodeCandidate(co)
		}
	}
	o.done()
	return s
}

func decodeEntry(o object) Entry {
	e := Entry{Arrivals: Poisson}
	o.str("tier", &e.Tier)
	o.number("rate", &e.Rate)
	var a string
	if o.str("arrivals", &a) {
		e.Arrivals = Arrivals(a)
	}
	o.duration("timeout", &e.Timeout)
	o.done()
	return e
}

func decodeTier(o object, base breaker.Policy) Tier {
	t := Tier{Queue: Unbounded}
	o.str("name", &t.Name)
	o.integer("workers", &t.Workers)
	o.integer("queue", &t.Queue)
	var d string
	if o.str("deadlines", &d) {
		t.Deadlines = Deadlines(d)
	}
	if raw := o.take("service"); raw != nil {
		if so, ok := newObject(o.p, o.field("service"), raw); ok {
			t.Service = decodeService(so)
		}
	}
	if items, ok := o.array("calls"); ok {
		for i, raw := range items {
			if co, ok := newObject(o.p, fmt.Sprintf("%s[%d]", o.field("calls"), i), raw); ok {
				t.Calls = append(t.Calls, decodeCall(co, base))
			} else {
				t.Calls = append(t.Calls, Call{Probability: 1})
			}
		}
	}
	o.done()
	return t
}

func decodeService(o object) Service {
	s := Service{Dist: Exponential}
	var d string
	if o.str("dist", &d) {
		s.Dist = Dist(d)
	}
	o.duration("mean", &s.Mean)
	o.duration("p99", &s.P99)
	o.done()
	return s
}

func decodeCall(o object, base breaker.Policy) Call {
	c := Call{Probability: 1}
	o.str("to", &c.To)
	o.number("probability", &c.Probability)
	o.duration("timeout", &c.Timeout)
	o.boolean("fallback", &c.Fallback)
	if raw := o.take("retry"); raw != nil {
		if ro, ok := newObject(o.p, o.field("retry"), raw); ok {
			r := &Retry{}
			ro.integer("attempts", &r.Attempts)
			ro.duration("backoff", &r.Backoff)
			ro.number("budget", &r.Budget)
			ro.done()
			c.Retry = r
		}
	}
	on := true
	o.boolean("breaker", &on)
	c.NoBreaker = !on
	if o.has("policy") {
		if !on {
			o.p.add(o.field("policy"), `is set but "breaker" is false`)
		}
		q := base
		if o.policy("policy", &q) {
			c.Policy = &q
		}
	}
	o.done()
	return c
}

func decodeFault(o object) Fault {
	var f Fault
	o.str("tier", &f.Tier)
	o.duration("start", &f.Start)
	o.duration("duration", &f.Duration)
	o.duration("every", &f.Every)
	o.integer("repeat", &f.Repeat)
	o.number("error_rate", &f.ErrorRate)
	o.number("slow_fraction", &f.SlowFraction)
	o.duration("slow_latency", &f.SlowLatency)
	o.duration("added_latency", &f.AddedLatency)
	o.number("capacity_loss", &f.CapacityLoss)
	var out string
	if o.str("outage", &out) {
		f.Outage = Outage(out)
	}
	o.boolean("cold_start", &f.ColdStart)
	o.done()
	return f
}

// decodeCandidate reads the candidate. Its policy is kept as written, a
// change that Validate lays over each call's own policy; its policies,
// a group policy document, are decoded as a group reads them.
func decodeCandidate(o object) *Candidate {
	c := &Candidate{}
	o.str("label", &c.Label)
	if raw := o.take("policy"); raw != nil {
		// A JSON object; its fields are checked over each call's policy.
		if _, ok := newObject(o.p, o.field("policy"), raw); ok {
			var buf bytes.Buffer
			if json.Compact(&buf, raw) == nil {
				c.Overlay = buf.String()
			}
		}
	}
	if raw := o.take("policies"); raw != nil {
		gp, err := breaker.ParseGroupPolicy(raw)
		if err != nil {
			o.policyProblems(o.field("policies"), err)
		} else {
			c.Policies = &gp
		}
	}
	if items, ok := o.array("calls"); ok {
		for i, raw := range items {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				o.p.add(fmt.Sprintf("%s[%d]", o.field("calls"), i), `want a call name such as "orders->inventory", got %s`, short(raw))
				continue
			}
			c.Calls = append(c.Calls, name)
		}
	}
	o.done()
	return c
}
