package testutil

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Prometheus is a prometheus process of the test's own, on a free
// loopback port with its storage in a temporary directory, scraping one
// target and evaluating its rules every Every. It stops when the test
// ends, and shows its output if the test failed.
type Prometheus struct {
	T      testing.TB
	Base   string // its URL, http://127.0.0.1:port
	Client *http.Client
	Every  time.Duration // how often it scrapes and evaluates
	Wait   time.Duration // how long Eventually waits
}

// StartPrometheus runs the prometheus program bin, scraping target under
// job, with the rule file rules (none if nil), and waits until it is
// ready.
func StartPrometheus(t testing.TB, bin, job, target string, rules []byte, every, wait time.Duration) *Prometheus {
	t.Helper()
	dir := t.TempDir()
	ruleFiles := ""
	if rules != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644))
		ruleFiles = "rule_files: [rules.yml]\n"
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]dms
  scrape_timeout: %[1]dms
  evaluation_interval: %[1]dms
%[2]sscrape_configs:
  - job_name: %[3]s
    static_configs:
      - targets: [%[4]q]
`, every.Milliseconds(), ruleFiles, job, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // another process could take it first; at this scale none does
	out := &LogBuffer{}            // written from the process's pipes' goroutines, read when the test fails
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	p := &Prometheus{T: t, Base: "http://" + addr, Every: every, Wait: wait,
		Client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		p.Client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	p.Eventually("ready", func() (bool, string) {
		resp, err := p.Client.Get(p.Base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// Eventually polls cond every half Every until it holds, failing the
// test with cond's last word after Wait.
func (p *Prometheus) Eventually(what string, cond func() (bool, string)) {
	p.T.Helper()
	deadline := time.Now().Add(p.Wait)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.T.Fatalf("prometheus: no %s after %v; last: %s", what, p.Wait, last)
		}
		time.Sleep(p.Every / 2)
	}
}

// API calls the HTTP API at path and decodes its data into data, failing
// the test unless the status is success.
func (p *Prometheus) API(path string, params url.Values, data any) {
	p.T.Helper()
	resp, err := p.Client.Get(p.Base + path + "?" + params.Encode())
	require.NoError(p.T, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.T, err)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	require.NoError(p.T, json.Unmarshal(body, &env), "%s: %s", path, body)
	require.Equal(p.T, "success", env.Status, "%s %v: %s", path, params, env.Error)
	require.NoError(p.T, json.Unmarshal(env.Data, data))
}
