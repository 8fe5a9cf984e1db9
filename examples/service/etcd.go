package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/govkit/breaker/breakeretcd"
	"github.com/govkit/breaker/live"
)

func init() { newEtcdSource = etcdSource }

// etcdSource follows key on the etcd cluster at endpoints. The client it
// makes is closed when the source's Watch returns.
func etcdSource(endpoints []string, key string) (live.Source, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	src, err := breakeretcd.New(breakeretcd.Config{Client: cli, Key: key})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return ownedClient{src, cli}, nil
}

// ownedClient is a source that owns its etcd client.
type ownedClient struct {
	*breakeretcd.Source
	cli *clientv3.Client
}

func (s ownedClient) Watch(ctx context.Context, deliver func(live.Document)) error {
	defer s.cli.Close()
	return s.Source.Watch(ctx, deliver)
}
