package breakeretcd_test

import (
	"context"
	"fmt"

	"github.com/govkit/breaker"
	breakeretcd "github.com/govkit/breaker/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A group runs on the policy document in its service's etcd key: each
// version delivered is loaded, a bad one is rejected and the policy in
// force stays, and a key that is absent (or deleted) leaves the group on
// the policy its code gave it.
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

	ctx, cancel := context.WithCancel(context.Background())
	delivered := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- src.Watch(ctx, func(doc breaker.PolicyDocument) {
			defer func() { delivered <- struct{}{} }()
			switch {
			case doc.Err != nil:
				fmt.Printf("%s: %v; keeping the policy in force\n", doc.Origin, doc.Err)
			case doc.Gone:
				fmt.Printf("%s@%s: absent; keeping the policy in force\n", doc.Origin, doc.Version)
			default:
				if err := g.LoadPolicies(doc.Data); err != nil {
					fmt.Printf("%s@%s: rejected: %v\n", doc.Origin, doc.Version, err)
					return
				}
				fmt.Printf("%s@%s: applied, error_ratio %v\n", doc.Origin, doc.Version, g.Policies().Default.ErrorRatio)
			}
		})
	}()

	<-delivered // the key is absent: the group runs on its defaults
	if _, err := cli.Put(ctx, key, `{"default": {"error_ratio": 0.3}}`); err != nil {
		panic(err)
	}
	<-delivered
	if _, err := cli.Put(ctx, key, `{"default": {"error_ratio": 3}}`); err != nil {
		panic(err)
	}
	<-delivered
	fmt.Println("in force: error_ratio", g.Policies().Default.ErrorRatio)

	cancel()
	fmt.Println("Watch returned:", <-done)
	// Output:
	// etcd:/services/payments/breakers@1: absent; keeping the policy in force
	// etcd:/services/payments/breakers@2: applied, error_ratio 0.3
	// etcd:/services/payments/breakers@3: rejected: breaker: invalid policy: default.error_ratio: must be in (0, 1], got 3
	// in force: error_ratio 0.3
	// Watch returned: context canceled
}
