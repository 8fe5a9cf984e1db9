package breakeretcd_test

import (
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startExampleEtcd starts a throwaway etcd server for the examples and
// returns its client URL and a function that stops it and removes its
// data. A service would be given its cluster's endpoints instead.
func startExampleEtcd() (endpoint string, stop func()) {
	dir, err := os.MkdirTemp("", "breakeretcd-example-")
	if err != nil {
		panic(err)
	}
	// Both listeners stay open until both ports are picked, so that the
	// two differ.
	var lns [2]net.Listener
	for i := range lns {
		if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			panic(err)
		}
	}
	peer := url.URL{Scheme: "http", Host: lns[0].Addr().String()}
	client := url.URL{Scheme: "http", Host: lns[1].Addr().String()}
	for _, ln := range lns {
		ln.Close()
	}
	cfg := embed.NewConfig()
	cfg.Name = "example"
	cfg.Dir = dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		panic(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(10 * time.Second):
		panic("etcd not ready")
	}
	return client.String(), func() {
		e.Close()
		os.RemoveAll(dir)
	}
}
