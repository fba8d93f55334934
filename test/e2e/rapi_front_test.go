package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// TestRAPIFollowsCandidateSockets runs a second corral-rapi given two
// master candidates' sockets (--luxi-socket twice). It uses the first:
// killing the second candidate's corrald does not disturb it. With the
// second candidate back, the corrald of the first, the master, is killed
// for good: the second corral-rapi moves to the other socket and answers
// again once a new master is elected, and so does the dev cluster's own,
// which was given every candidate's socket, without a restart.
func TestRAPIFollowsCandidateSockets(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 3, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	cands := c.st.Candidates()
	first := c.leader(30 * time.Second)
	if first.Proc != cands[0].Proc {
		t.Fatalf("the first master is %s", first.Proc)
	}
	env, err := devcluster.ReadRAPIEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	devRAPI := c.proc(devcluster.RAPIName)
	var devSockets []string
	for i, a := range devRAPI.Args {
		if a == "--luxi-socket" && i+1 < len(devRAPI.Args) {
			devSockets = append(devSockets, devRAPI.Args[i+1])
		}
	}
	for i, cand := range cands {
		if i >= len(devSockets) || devSockets[i] != cand.Socket {
			t.Fatalf("the dev cluster's corral-rapi has LUXI sockets %q, want every candidate's in order: %+v", devSockets, cands)
		}
	}
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	// A free port on the dev cluster's RAPI address, which its certificate
	// names.
	ln, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	l := bootstrap.Layout{StateDir: c.dir, RunDir: c.st.RunDir}
	logPath := filepath.Join(t.TempDir(), "corral-rapi.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(binDir, "corral-rapi"), "--allow-root", "--bind", u.Hostname(), "--port", strconv.Itoa(port),
		"--cert", l.RAPICert(), "--key", l.RAPIKey(), "--users", l.RAPIUsers(),
		"--luxi-socket", cands[0].Socket, "--luxi-socket", cands[1].Socket)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("==== second corral-rapi's log ====\n%s", b)
		}
	})
	second := env
	second.URL = "https://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	hc := rapiHTTPClient(t, env.CA)
	hc.Timeout = 10 * time.Second
	info := func(e devcluster.RAPIEnv) int {
		req, err := http.NewRequest(http.MethodGet, e.URL+"/2/info", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(e.User, e.Password)
		resp, err := hc.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	waitFor(t, 30*time.Second, "the second corral-rapi to answer", func() bool { return info(second) == http.StatusOK })

	// The second candidate is only a fallback.
	c.killDaemon(cands[1].Proc)
	for range 20 {
		if code := info(second); code != http.StatusOK {
			t.Fatalf("second corral-rapi with the second candidate down: %d, want 200 through the first", code)
		}
	}
	if _, err := devcluster.Restart(c.st, cands[1].Proc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, cands[1].Proc+" to answer on its socket", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cl, err := luxi.Dial(ctx, cands[1].Socket)
		if err != nil {
			return false
		}
		defer cl.Close()
		_, err = cl.QueryClusterInfo(ctx)
		return err == nil
	})

	c.killDaemon(cands[0].Proc)
	if got := c.leader(60 * time.Second); got.Proc == cands[0].Proc {
		t.Fatalf("the killed %s leads", got.Proc)
	}
	waitFor(t, 30*time.Second, "the second corral-rapi to answer after the takeover", func() bool {
		return info(second) == http.StatusOK
	})
	// The first candidate is still gone, so the answers above came through
	// the second socket.
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if cl, err := luxi.Dial(dctx, cands[0].Socket); err == nil {
		cl.Close()
		t.Fatalf("the killed %s's socket still accepts connections", cands[0].Proc)
	}
	for range 20 {
		if code := info(second); code != http.StatusOK {
			t.Fatalf("second corral-rapi after recovering: %d", code)
		}
	}
	// The dev cluster's corral-rapi, the same process as before the kill,
	// has moved on from the dead first socket too.
	waitFor(t, 30*time.Second, "the dev cluster's corral-rapi to answer after the takeover", func() bool {
		return info(env) == http.StatusOK
	})
	for range 20 {
		if code := info(env); code != http.StatusOK {
			t.Fatalf("the dev cluster's corral-rapi after recovering: %d", code)
		}
	}
	if pid := c.proc(devcluster.RAPIName).PID; pid != devRAPI.PID || gone(pid) {
		t.Fatalf("the dev cluster's corral-rapi was restarted or is gone: pid %d, was %d", pid, devRAPI.PID)
	}
}
