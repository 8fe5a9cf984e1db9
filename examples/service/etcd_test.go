package main

import (
	"context"
	"flag"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/govkit/breaker/live"
)

// startEtcd starts an etcd server in this process, on loopback ports, with
// its data in a temporary directory; the test's cleanup stops it.
func startEtcd(t *testing.T) string {
	t.Helper()
	// Both listeners stay open until both ports are picked, so they differ.
	var lns [2]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = ln
	}
	peer := url.URL{Scheme: "http", Host: lns[0].Addr().String()}
	client := url.URL{Scheme: "http", Host: lns[1].Addr().String()}
	for _, ln := range lns {
		ln.Close()
	}
	cfg := embed.NewConfig()
	cfg.Name = "service-test"
	cfg.Dir = t.TempDir()
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		t.Fatal("etcd did not become ready")
	}
	return client.String()
}

// The service started with -etcd follows the key: a version put while it
// runs shows in /breakers with what it changed, and a bad one is refused
// while the version in force stays.
func TestService_FollowsAnEtcdKeyWhileItRuns(t *testing.T) {
	endpoint := startEtcd(t)
	const key = "/services/shop/breakers"
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	ctx := context.Background()
	_, err = cli.Put(ctx, key, policyV1)
	require.NoError(t, err)

	var flags policyFlags
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	flags.register(fs)
	require.NoError(t, fs.Parse([]string{"-etcd", endpoint, "-etcd-key", key}))
	records := make(chan live.Change, 4)
	in := startFollowing(t, func(*instance) live.Source {
		src, err := flags.source(nil)
		require.NoError(t, err)
		return src
	}, func(c live.Change) { records <- c })
	next := func() live.Change {
		t.Helper()
		select {
		case c := <-records:
			return c
		case <-time.After(20 * time.Second):
			t.Fatal("no policy record")
			return live.Change{}
		}
	}

	v1 := next()
	require.Equal(t, live.Applied, v1.Result)
	in.product() // makes both breakers
	p := in.policy()
	assert.Equal(t, "etcd:"+key, p.Policy.Origin)
	assert.Equal(t, v1.Version, p.Policy.Version)

	_, err = cli.Put(ctx, key, policyV2)
	require.NoError(t, err)
	v2 := next()
	require.Equal(t, live.Applied, v2.Result)
	p = in.policy()
	assert.Equal(t, v2.Version, p.Policy.Version, "the new revision is live")
	require.Len(t, p.Policy.Changes, 1)
	assert.Equal(t, `overrides["pricing.GetPrice"].open_for`, p.Policy.Changes[0].Path)
	assert.Equal(t, "45s", p.Policy.Changes[0].To)

	_, err = cli.Put(ctx, key, policyBad)
	require.NoError(t, err)
	require.Equal(t, live.Rejected, next().Result)
	p = in.policy()
	assert.Equal(t, v2.Version, p.Policy.Version, "the refused revision is not live")
	assert.Equal(t, "rejected", p.Policy.Last.Result)
}
