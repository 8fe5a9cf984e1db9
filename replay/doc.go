// Package replay tries breaker policies against injected faults before they
// ship. It simulates a chain of services in virtual time, drives the real
// breakers of package breaker through their injectable clock, and reports
// what the chain's entry answered, second by second, with and without the
// breakers.
//
// It rebuilds the replay of the incident behind the breaker's defaults:
// inject 40% errors and 20% slow calls in front of the inventory service
// for 20 s while the entry holds a constant 1200 requests per second,
// record the entry's goodput with and without breakers, and let no
// parameter change ship before it has passed the replay. The shipped
// scenario [DefaultScenario] is that replay; [ScenarioNames] lists the
// others.
//
// # The model
//
// A [Scenario] is a chain of tiers (gateway → orders → inventory, say). Each
// tier has a pool of workers and a queue. A request takes a worker for its
// own service time, drawn from the tier's distribution, then makes the
// tier's downstream calls one after the other, holding the worker while it
// waits for each answer: that holding is how a slow downstream fills its
// callers' pools and takes the chain down. A call's own timeout frees the
// caller's worker; a failed call is retried if the call has a retry policy,
// then either fails the request or, with a fallback, degrades it. A
// bounded queue refuses requests when full (load shedding). By default no
// tier stops work its caller has given up on, as with a thread blocked on
// I/O, but a request still waiting in a queue when its caller gives up
// leaves the queue; a tier can instead ignore deadlines altogether, or
// propagate them down the chain.
//
// Faults are injected in front of a tier, as a fault-injection proxy would:
// errors answered at once, calls delayed before they reach the tier, an
// outage, a cold instance. The breaker of each guarded call is consulted
// with [breaker.Breaker.Allow] when the call is made and told the outcome
// when its answer or its timeout comes: nil, the error, or
// context.DeadlineExceeded.
//
// The simulation is a discrete-event loop on one goroutine: no sleeps, no
// timers. Its clock ([Clock]) is the breakers' clock. Every random draw
// comes from a PCG source seeded from the scenario's seed, and every run of
// a scenario draws its arrivals from the same stream, so the report is the
// same byte for byte for the same scenario and seed, and the runs differ
// only where their breakers make them differ.
//
// # Runs and figures
//
// [Run] simulates a scenario four ways: a baseline without faults, the
// faults without breakers, the faults with the scenario's policies, and,
// if the scenario has one, the faults with a candidate policy. For each
// run the [Report] has the entry's goodput per second (requests answered
// successfully within the client's timeout) and how much of it a fallback
// degraded, the worst second against the baseline for goodput and for full
// answers (good and not degraded), the goodput amplification (the
// baseline's goodput over the run's, in the worst second of goodput: the
// one amplification the reports print), the requests answered with an
// error or too late, when full service came back after the fault (full
// answers within 5% of the baseline for 5 s), and per call the breaker's
// transitions, probes, rejections, and the calls and worker time wasted on
// a broken downstream. [Report.WriteText] prints it; [Report.WriteSVG]
// charts it.
//
// # Scenario files
//
// A scenario is a JSON document. Decoding is strict: an unknown field or a
// value of the wrong type is an error, and every error names the field by
// its path ("tiers[1].calls[0].timeout") and says what is wrong. Durations
// are strings in Go's syntax ("500ms", "1m30s"); fractions are numbers in
// [0, 1]. A name (the scenario's, a tier's, the candidate's label) that
// holds a character that does not show as itself (a control, format or
// invisible character, such as a right-to-left override) is an error:
// reports and charts would show it as another name.
//
//	{
//	  "name": "seeds000",               // shown in reports; default ""
//	  "description": "...",             // what the scenario shows; default ""
//	  "duration": "5m",                 // required; at most 1h
//	  "seed": 1,                        // seeds every random draw; default 1
//	  "entry": {                        // required: the load
//	    "tier": "gateway",              // required: the tier requests arrive at
//	    "rate": 1200,                   // required: requests per second, at most 100000
//	    "arrivals": "uniform",          // "poisson" (default) or "uniform" (evenly spaced)
//	    "timeout": "1s"                 // required: how long a client waits for its answer
//	  },
//	  "tiers": [{                       // required: at least one
//	    "name": "orders",               // required, unique, no spaces or "->"
//	    "workers": 200,                 // required: worker pool size, 1 to 100000
//	    "queue": 1000,                  // requests that may wait for a worker (an accept
//	                                    // queue); leave out for no bound, 0 for no queue;
//	                                    // a full queue refuses a request at once
//	    "deadlines": "queue",           // "queue" (default): a waiting request whose caller
//	                                    // gave up leaves the queue; "ignore": it is served
//	                                    // anyway; "propagate": as "queue", and each call
//	                                    // waits at most until the request's deadline (the
//	                                    // earliest of the client's and every caller's),
//	                                    // no call is made once it has passed, and the
//	                                    // deadline goes along with the call
//	    "service": {                    // the tier's own work per request
//	      "dist": "lognormal",          // "exponential" (default), "lognormal" or "constant"
//	      "mean": "50ms",               // required: mean service time
//	      "p99": "150ms"                // lognormal only: 99th percentile, above the mean and
//	                                    // at most 14.9 times it; default 3 × mean
//	    },
//	    "calls": [{                     // downstream calls, made in order; default none
//	      "to": "inventory",            // required: the called tier; no cycles
//	      "probability": 1,             // fraction of requests that make the call, (0, 1]; default 1
//	      "timeout": "600ms",           // how long the caller waits before it gives up and
//	                                    // frees its worker; default none (it waits for the
//	                                    // answer, or for its deadline if it propagates them)
//	      "retry": {                    // retry a failed, timed out or shed call; default none
//	        "attempts": 3,              // required: tries in all, 2 to 10
//	        "backoff": "50ms",          // wait before the first retry, doubled for each next
//	                                    // one, holding the worker; default "0s"
//	        "budget": 0.1               // retries at most this fraction of first tries (a
//	                                    // bank of at most 10 tokens); default 0, no budget
//	      },                            // a call the breaker refused is never retried
//	      "fallback": true,             // a failed call degrades the request instead of
//	                                    // failing it; default false
//	      "breaker": true,              // guard the call with a breaker; default true
//	      "policy": {"min_requests": 50} // this call's policy, over the scenario's;
//	                                    // default the scenario's policy
//	    }]
//	  }],
//	  "faults": [{                      // default none; one at a time per tier
//	    "tier": "inventory",            // required: the faulty tier
//	    "start": "1m",                  // when it begins, in [0, duration); default 0s
//	    "duration": "20s",              // required: how long each occurrence lasts; at most 1h
//	    "every": "25s", "repeat": 9,    // recur: repeat occurrences, one every "every"
//	                                    // (at least duration, at most 1h); default once;
//	                                    // at most 10000 occurrences in all
//	    "error_rate": 0.4,              // fraction of calls answered at once with an error
//	    "slow_fraction": 0.2,           // fraction of calls delayed by slow_latency;
//	    "slow_latency": "5s",           // error_rate + slow_fraction is at most 1
//	    "added_latency": "0s",          // delay for every call not answered with an error
//	    "capacity_loss": 0.6,           // share of the tier's workers out of service, in
//	                                    // [0, 1); running requests finish; default 0
//	    "outage": "hang",               // "hang" (no answer: the caller times out) or
//	                                    // "refuse" (connection refused at once); excludes
//	                                    // the fields above
//	    "cold_start": false             // the tier is a new instance: calls carry its
//	                                    // start time for the breaker's warmup
//	  }],
//	  "policy": {"warmup": "1m"},       // breaker policy of every guarded call, over
//	                                    // breaker.DefaultPolicy(); default the default
//	  "candidate": {                    // a second policy, run on its own; default none
//	    "label": "no warmup",           // the run's name; default "candidate"
//	    "policy": {"warmup": "0s"},     // a change, over each call's own policy (or the
//	                                    // scenario's); or, instead, "policies": a group
//	                                    // policy document, {"default": ..., "overrides":
//	                                    // {"inventory": ...}}, keyed by the call's name,
//	                                    // the tier it calls or a method of it
//	    "calls": ["orders->inventory"]  // calls it applies to; default every guarded call
//	  }
//	}
//
// The work a scenario may ask for is bounded, so that a run takes minutes
// at most: one entry request can make at most [MaxCallsPerRequest]
// downstream calls (counted through the chain, every call made and every
// retry tried: a chain that fans out at each tier asks for a power of its
// depth), and a run simulates at most [MaxTierRequests] requests at all
// tiers (the entry's rate × duration, times one plus those calls). A
// scenario beyond a bound is refused with what it asks for and the bound.
//
// Policies are breaker policy documents, the JSON form of [breaker.Policy]
// (snake_case fields, durations as strings), each laid over the policy it
// refines, so a document names only what it changes. A policy's timeout,
// when set and shorter, also shortens the call's timeout, as the deadline
// the breaker puts on the call's context would.
//
// # Replaying recorded traffic
//
// [ReplayTrace] answers "what would this policy have done last Tuesday?":
// it reads a trace recorded with package github.com/govkit/breaker/calltrace
// (one JSON line per call: when, key, duration, outcome, probe or
// refused, and whether a refusal was the throttle's) and replays each key's calls through a breaker with the
// candidate's policy, on the trace's own time. A recorded call the
// candidate would have refused counts, by its recorded outcome, as a
// failure avoided or a success lost; a recorded refusal the candidate
// would have admitted is unknown, and the candidate is told nothing about
// it. The [TraceReport] says per key when the candidate opens and closes
// against when the recorded breaker refused calls; [TraceReport.WriteText]
// prints it, starting with a self-check (the share of the recorded
// refusals that a replay of the policy that ran reproduces, see
// [ReplayTraceWith]), and [TraceReport.WriteSVG] charts it.
//
// # Using it from a test
//
// A team can keep its own replays beside its code and fail the build when a
// policy change makes them worse:
//
//	func TestCheckoutSurvivesInventoryFault(t *testing.T) {
//		s, err := replay.ParseScenario(checkoutScenario) // or replay.LoadScenario("seeds000")
//		if err != nil {
//			t.Fatal(err)
//		}
//		s.Policy = myPolicy // the policy about to ship
//		rep, err := replay.Run(s)
//		if err != nil {
//			t.Fatal(err)
//		}
//		if got := rep.Run(replay.WithBreaker).WorstDrop; got > 0.3 {
//			t.Errorf("entry lost %.0f%% of its goodput in the worst second, want at most 30%%", got*100)
//		}
//	}
//
// A run of the seeds000 scenario (three runs of five simulated minutes,
// about three million simulated requests) takes about a second.
package replay
