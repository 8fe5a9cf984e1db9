package breakeretcd_test

import (
	"context"
	"fmt"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakeretcd"
	"github.com/govkit/breaker/live"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A group runs on the policy document in its service's etcd key: each
// version delivered is loaded, a bad one is rejected and the policy in
// force stays, and a key that is absent (or deleted) leaves the group on
// the policy its code gave it.
// A group follows the key: each version is applied whole, or refused and
// reported while the version in force stays.
func ExampleSource_Watch() {
	endpoint, stop := startExampleEtcd()
	defer stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	defer cli.Close()

	const key = "/services/payments/breakers"
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	src, err := breakeretcd.New(breakeretcd.Config{Client: cli, Key: key})
	if err != nil {
		panic(err)
	}

	// Each document delivered ends in one record; here they are printed.
	records := make(chan live.Change)
	show := func() {
		c := <-records
		fmt.Printf("%s@%s: %s", c.Origin, c.Version, c.Result)
		for _, p := range c.Problems {
			fmt.Printf(": %s: %s", p.Field, p.Problem)
		}
		fmt.Printf("; error_ratio in force %v\n", g.Policies().Default.ErrorRatio)
	}

	f, err := live.Follow(context.Background(), g, src, live.OnChange(func(c live.Change) { records <- c }))
	if err != nil {
		panic(err)
	}
	show() // the key is absent: the group runs on its defaults
	if _, err := cli.Put(context.Background(), key, `{"default": {"error_ratio": 0.3}}`); err != nil {
		panic(err)
	}
	show()
	if _, err := cli.Put(context.Background(), key, `{"default": {"error_ratio": 3}}`); err != nil {
		panic(err)
	}
	show()
	fmt.Println("Close:", f.Close())
	// Output:
	// etcd:/services/payments/breakers@1: gone; error_ratio in force 0.5
	// etcd:/services/payments/breakers@2: applied; error_ratio in force 0.3
	// etcd:/services/payments/breakers@3: rejected: default.error_ratio: must be in (0, 1], got 3; error_ratio in force 0.3
	// Close: <nil>
}
