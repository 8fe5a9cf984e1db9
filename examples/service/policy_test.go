package main

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/govkit/breaker/live"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built-in document, and the same with pricing's cooldown raised.
const (
	policyV1 = `{
  "default":   {"min_requests": 10, "open_for": "15s", "max_open_for": "1m"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "200ms"},
    "pricing.GetPrice":   {"call_timeout": "300ms"}
  }
}`
	policyV2 = `{
  "default":   {"min_requests": 10, "open_for": "15s", "max_open_for": "1m"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "200ms"},
    "pricing.GetPrice":   {"call_timeout": "300ms", "open_for": "45s"}
  }
}`
	policyBad = `{
  "default":   {"min_requests": 10, "open_for": "15s", "max_open_for": "1m"},
  "overrides": {
    "inventory.GetStock": {"call_timeout": "200ms"},
    "pricing.GetPrice":   {"call_timeout": "300ms", "open_for": "2m"}
  }
}`
)

// policyView is the part of /breakers that says which policy is in force.
type policyView struct {
	Policy struct {
		Origin    string `json:"origin"`
		Version   string `json:"version"`
		Following string `json:"following"`
		Changes   []struct {
			Path string `json:"path"`
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"changes"`
		Last struct {
			Result   string `json:"result"`
			Problems []struct {
				Field   string `json:"field"`
				Problem string `json:"problem"`
			} `json:"problems"`
		} `json:"last"`
	} `json:"policy"`
	Breakers []struct {
		Name   string `json:"name"`
		Policy struct {
			OpenFor string `json:"open_for"`
		} `json:"policy"`
	} `json:"breakers"`
}

func (in *instance) policy() policyView {
	in.t.Helper()
	code, body := in.get("/breakers")
	require.Equal(in.t, http.StatusOK, code, body)
	var v policyView
	require.NoError(in.t, json.Unmarshal([]byte(body), &v))
	return v
}

// replace writes content to path the way an editor does: a new file
// renamed over the old one.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// The operator edits the policy file while the service runs: within a
// check interval /breakers shows the new version and what it changed, and
// the breaker applies it; a bad edit is refused, shown and logged, and
// the version in force stays.
func TestService_FollowsThePolicyFileWhileItRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "breakers.json")
	require.NoError(t, os.WriteFile(path, []byte(policyV1), 0o644))
	records := make(chan live.Change, 4)
	in := startFollowing(t, func(in *instance) live.Source {
		src, err := policyFlags{file: path}.source(func(d time.Duration) (<-chan time.Time, func()) {
			tk := in.clk.Ticker(d)
			return tk.C, tk.Stop
		})
		require.NoError(t, err)
		return src
	}, func(c live.Change) { records <- c })
	// next moves the mock clock a check interval at a time until the
	// source has delivered a document.
	next := func() live.Change {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case c := <-records:
				return c
			case <-time.After(20 * time.Millisecond):
				in.clk.Add(live.DefaultFileInterval)
			}
		}
		t.Fatal("no policy record")
		return live.Change{}
	}

	v1 := next()
	require.Equal(t, live.Applied, v1.Result)
	in.product() // makes both breakers
	p := in.policy()
	assert.Equal(t, "file:"+path, p.Policy.Origin)
	assert.Equal(t, "file:"+path, p.Policy.Following)
	assert.Equal(t, v1.Version, p.Policy.Version)

	replace(t, path, policyV2)
	v2 := next()
	require.Equal(t, live.Applied, v2.Result)
	p = in.policy()
	assert.Equal(t, v2.Version, p.Policy.Version, "the new version is live")
	assert.NotEqual(t, v1.Version, v2.Version)
	require.Len(t, p.Policy.Changes, 1)
	assert.Equal(t, `overrides["pricing.GetPrice"].open_for`, p.Policy.Changes[0].Path)
	assert.Equal(t, "15s", p.Policy.Changes[0].From)
	assert.Equal(t, "45s", p.Policy.Changes[0].To)
	for _, b := range p.Breakers {
		want := map[string]string{keyPrice: "45s", keyStock: "15s"}[b.Name]
		assert.Equal(t, want, b.Policy.OpenFor, b.Name)
	}

	replace(t, path, policyBad)
	bad := next()
	require.Equal(t, live.Rejected, bad.Result)
	p = in.policy()
	assert.Equal(t, v2.Version, p.Policy.Version, "the last good version stays")
	assert.Equal(t, "rejected", p.Policy.Last.Result)
	require.Len(t, p.Policy.Last.Problems, 1)
	assert.Equal(t, `overrides["pricing.GetPrice"].open_for`, p.Policy.Last.Problems[0].Field)
	assert.Contains(t, in.logs.String(), `level=ERROR msg="breaker policy rejected" breaker.origin=file:`+path)
	assert.Contains(t, in.metrics(), `breaker_policy_info{origin="file:`+path+`",version="`+v2.Version+`"} 1`)
}

func TestService_PolicyFlags(t *testing.T) {
	parse := func(args ...string) (live.Source, error) {
		var pf policyFlags
		fs := flag.NewFlagSet("service", flag.ContinueOnError)
		pf.register(fs)
		require.NoError(t, fs.Parse(args))
		return pf.source(nil)
	}
	src, err := parse()
	require.NoError(t, err)
	assert.Nil(t, src, "no flag: the built-in policies")

	src, err = parse("-policy", "/etc/shop/breakers.json")
	require.NoError(t, err)
	require.IsType(t, &live.FileSource{}, src)
	assert.Equal(t, "file:/etc/shop/breakers.json", src.(*live.FileSource).Origin())

	_, err = parse("-policy", "/etc/shop/breakers.json", "-etcd", "127.0.0.1:2379")
	assert.ErrorContains(t, err, "not both")

	_, err = parse("-etcd", "127.0.0.1:2379", "-etcd-key", "")
	assert.ErrorContains(t, err, "-etcd needs -etcd-key")
	_, err = parse("-policy", "x.json", "-policy-interval", "-1s")
	assert.Error(t, err)
}
