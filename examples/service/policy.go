package main

import (
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/govkit/breaker/live"
)

// policyFlags choose where the service's breaker policies come from once
// it runs: nowhere (the built-in document), a file, or a key in etcd.
// The group follows one of them at most, so giving both is an error.
type policyFlags struct {
	file     string
	interval time.Duration
	etcd     string // comma-separated endpoints
	etcdKey  string
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.file, "policy", "",
		"follow this JSON policy file: read at start and every -policy-interval; a bad version is refused and logged")
	fs.DurationVar(&p.interval, "policy-interval", live.DefaultFileInterval,
		"how often to look at the -policy file")
	fs.StringVar(&p.etcd, "etcd", "",
		"comma-separated etcd endpoints: follow the policy document at -etcd-key instead of a file")
	fs.StringVar(&p.etcdKey, "etcd-key", "/services/shop/breakers",
		"the etcd key that holds the policy document, one per service")
}

// newEtcdSource makes the source of the -etcd flag: a source of package
// breakeretcd (github.com/govkit/breaker/breakeretcd) following key. It is nil in
// a build without etcd support, and -etcd is then an error.
var newEtcdSource func(endpoints []string, key string) (live.Source, error)

// source returns the source the flags name, or nil for none. tick, when
// not nil, drives a file source in place of a ticker (the tests pass the
// mock clock's).
func (p policyFlags) source(tick func(time.Duration) (<-chan time.Time, func())) (live.Source, error) {
	switch {
	case p.file != "" && p.etcd != "":
		return nil, errors.New("give -policy or -etcd, not both: the breakers follow one source")
	case p.etcd != "":
		if newEtcdSource == nil {
			return nil, errors.New("-etcd: this build has no etcd support")
		}
		if p.etcdKey == "" {
			return nil, errors.New("-etcd needs -etcd-key")
		}
		return newEtcdSource(strings.Split(p.etcd, ","), p.etcdKey)
	case p.file != "":
		return live.NewFileSource(p.file, live.FileConfig{Interval: p.interval, Tick: tick})
	}
	return nil, nil
}
