package check_test

import (
	"fmt"
	"os"
	"time"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/check"
)

// A group's policy document checked against the traffic of its keys: a
// busy method and a quiet one that the default MinRequests leaves
// unprotected.
func ExampleGroup() {
	policies, err := breaker.ParseGroupPolicy([]byte(`{"default": {"call_timeout": "150ms"}}`))
	if err != nil {
		panic(err)
	}
	traffic, err := check.ParseWorkload([]byte(`{
	  "defaults": {"deadline": "1s", "rtt": "1ms", "instances": 6},
	  "keys": {
	    "orders.Create":  {"rate": 300, "p50": "12ms", "p99": "60ms", "error_ratio": 0.002},
	    "reports.Export": {"rate": 1, "p50": "30ms", "p99": "90ms"}
	  }
	}`))
	if err != nil {
		panic(err)
	}
	report, err := check.Group(policies, traffic, check.Options{})
	if err != nil {
		panic(err)
	}
	if err := report.WriteText(os.Stdout, check.Warning); err != nil {
		panic(err)
	}
	if report.Count(check.Error) > 0 {
		fmt.Println("do not ship")
	}
	// Output:
	// checked 2 keys against a fault of 40% errors + 20% timeouts; false-trip threshold 0.1 a day
	//
	// reports.Export  (1 calls/s, p50 30ms, p99 90ms, 0% errors, deadline 1s, rtt 1ms; policy default)
	//   error    never_trips             min_requests 20 > 1 calls/s × 5s window = 5 calls: the window's rules can never trip (a trip within a 10-minute outage is below 0.1% likely: analytic bound 0.033%); set min_requests to at most 2, or consecutive_failures for a key this quiet
	//
	// 1 error, 0 warnings, 5 notes
	// analytic numbers assume: steady Poisson arrivals at each period's rate, independent failures at its error ratio, lognormal latency; times to trip from expected counts (fluid), false trips from the rate of failures that cross the line, through the cooldowns and the refill of the window after a close
	// do not ship
}

// The two models for one policy: how often it trips on a healthy
// downstream, and how fast it opens in a fault.
func ExampleTimeToTrip() {
	p := breaker.DefaultPolicy()
	p.CallTimeout = 200 * time.Millisecond
	t := check.Traffic{Rate: 50, P50: 20 * time.Millisecond, P99: 80 * time.Millisecond, ErrorRatio: 0.01, Deadline: time.Second}

	d, ok := check.TimeToTrip(p, t, check.DefaultFault)
	fmt.Println("opens", d, ok, "into 40% errors + 20% timeouts")
	d, ok = check.TimeToTrip(p, t, check.Fault{Errors: 0.3})
	fmt.Println("opens", d, ok, "into 30% errors")
	fmt.Println("healthy trips a day below one in a million:", check.FalseTripsPerDay(p, t) < 1e-6)

	// A quiet key with noisy errors and a touchy policy.
	p.MinRequests, p.ErrorRatio = 10, 0.3
	t = check.Traffic{Rate: 4, ErrorRatio: 0.08}
	fmt.Printf("%.0f false trips a day\n", check.FalseTripsPerDay(p, t))
	// Output:
	// opens 4.03125s true into 40% errors + 20% timeouts
	// opens 0s false into 30% errors
	// healthy trips a day below one in a million: true
	// 217 false trips a day
}
