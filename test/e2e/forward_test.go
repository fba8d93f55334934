package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/storecfg"
)

// TestForwardThroughStandbys runs three forwarding master candidates: the
// CLI on a standby's socket creates an instance on the master (the job
// followed through the relay), 'corral cluster master-failover' sent
// through the target candidate's own socket hands the role to it, and,
// once the old master is back as a standby, the env file's socket and the
// dev cluster's corral-rapi, neither touched, serve the new master: RAPI
// answers /2/info and runs a job.
func TestForwardThroughStandbys(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 3, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	ctx := context.Background()
	cands := c.st.Candidates()
	if len(cands) != 3 {
		t.Fatalf("%d candidates, want 3", len(cands))
	}
	for _, cand := range cands {
		if cand.Forward == "" || !strings.HasPrefix(cand.Forward, "127.0.0.1:") {
			t.Fatalf("%s has forward address %q, want one on 127.0.0.1", cand.Proc, cand.Forward)
		}
	}
	first := c.leader(30 * time.Second)
	if first.Proc != cands[0].Proc {
		t.Fatalf("the first master is %s", first.Proc)
	}
	standby, target := cands[2], cands[1]

	// A job through a standby's socket runs on the master.
	out, err := c.corralAt(standby.Socket, "--socket", standby.Socket, "instance", "add", "-t", "file", "-o", "tiny+default",
		"-s", "64M", "-H", "fake", "-B", "memory=128", "--no-nics", "fw1")
	if err != nil {
		t.Fatalf("instance add through standby %s: %v\n%s", standby.Proc, err, out)
	}
	rows, err := c.luxi.QueryInstances(ctx, []string{"fw1"}, []string{"name", "admin_state"}, false)
	if err != nil || len(rows) != 1 || rows[0][1] != "up" {
		t.Fatalf("fw1 on the master: %v, %v", rows, err)
	}
	if b, _ := os.ReadFile(c.proc(standby.Proc).Log); strings.Contains(string(b), "elected master") {
		t.Fatalf("%s was master at some point: the job did not go through a standby", standby.Proc)
	}

	// The role moves on request sent through the target's own socket: the
	// reply comes back although the target stops relaying as it wins.
	oldPID := c.proc(first.Proc).PID
	oldLogOff := c.logSize(first.Proc)
	out, err = c.corralAt(target.Socket, "cluster", "master-failover", "--to", target.Name)
	if err != nil || !strings.Contains(out, "handed the master role over to "+target.Name) {
		t.Fatalf("master-failover through %s: %v\n%s", target.Proc, err, out)
	}
	if got := c.leader(30 * time.Second); got.Proc != target.Proc {
		t.Fatalf("after master-failover --to %s, %s leads", target.Name, got.Proc)
	}
	// The old master stands by again in the same process.
	waitFor(t, 30*time.Second, "the old master to log that its term ended", func() bool {
		return strings.Contains(c.logSince(first.Proc, oldLogOff), "master term ended")
	})
	if gone(oldPID) {
		t.Fatalf("the old master (pid %d) exited after handing over", oldPID)
	}
	c.luxi.Close()
	c.luxi = nil

	// The env file still names the first corrald's socket, which now
	// relays to the new master.
	sock := envSocket(t, c.st.StateDir)
	if sock != first.Socket {
		t.Fatalf("env file socket %q, want %q", sock, first.Socket)
	}
	waitFor(t, 30*time.Second, "the env file's socket to serve the new master", func() bool {
		out, err = c.corralAt(sock, "cluster", "info")
		return err == nil
	})
	if !strings.Contains(out, c.st.Master) {
		t.Fatalf("cluster info through the env file's socket:\n%s", out)
	}

	// corral-rapi, not restarted, answers and runs a job.
	env, err := devcluster.ReadRAPIEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	hc := rapiHTTPClient(t, env.CA)
	var info map[string]any
	if code := rapiDo(t, hc, env, "GET", "/2/info", &info); code != http.StatusOK || info["name"] == nil {
		t.Fatalf("/2/info after the failover: %d %v", code, info)
	}
	var job any
	if code := rapiDo(t, hc, env, "PUT", "/2/instances/fw1/shutdown", &job); code != http.StatusOK {
		t.Fatalf("shutdown through RAPI: %d %v", code, job)
	}
	id := fmt.Sprint(job)
	waitFor(t, time.Minute, "RAPI job "+id+" to end", func() bool {
		var j map[string]any
		if code := rapiDo(t, hc, env, "GET", "/2/jobs/"+id, &j); code != http.StatusOK {
			t.Fatalf("job %s: %d %v", id, code, j)
		}
		switch j["status"] {
		case "success":
			return true
		case "error", "canceled":
			t.Fatalf("RAPI job %s ended %v: %v", id, j["status"], j["opresult"])
		}
		return false
	})
	c.useMaster(target)
	rows, err = c.luxi.QueryInstances(ctx, []string{"fw1"}, []string{"name", "admin_state"}, false)
	if err != nil || len(rows) != 1 || rows[0][1] != "down" {
		t.Fatalf("fw1 after the RAPI shutdown: %v, %v", rows, err)
	}
}

// envSocket reads CORRAL_SOCKET from the dev cluster's env file.
func envSocket(t *testing.T, stateDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "export CORRAL_SOCKET="); ok {
			return v
		}
	}
	t.Fatalf("no CORRAL_SOCKET in the env file:\n%s", b)
	return ""
}

func rapiHTTPClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
}

// rapiDo sends an authenticated request and decodes the JSON answer into
// out; it returns the status code.
func rapiDo(t *testing.T, hc *http.Client, env devcluster.RAPIEnv, method, path string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(env.User, env.Password)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("%s %s: %v in %q", method, path, err, b)
	}
	return resp.StatusCode
}
