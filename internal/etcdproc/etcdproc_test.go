package etcdproc_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
)

func newClient(t *testing.T, endpoints []string, tlsCfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMemberLifecycle starts a member, checks that a write survives a
// SIGKILL and a restart on the same ports, then stops it.
func TestMemberLifecycle(t *testing.T) {
	c := etcdtest.Start(t, etcdproc.Config{})
	m := c.Members[0]
	if len(c.Members) != 1 || !m.Running() || m.PID() == 0 {
		t.Fatalf("members %v, running %v, pid %d", c.Members, m.Running(), m.PID())
	}
	b, err := os.ReadFile(m.PIDPath())
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(m.PID()) {
		t.Errorf("pid file %q, %v; want %d", b, err, m.PID())
	}
	if fi, err := os.Stat(m.DataDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v, %v; want mode 0700", fi, err)
	}
	ctx := ctxT(t)
	cli := newClient(t, c.Endpoints(), nil)
	put, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	// The member was started with the store's limits.
	big := strings.Repeat("x", etcdproc.MaxRequestBytes-etcdproc.RequestOverheadBytes)
	if _, err := cli.Put(ctx, "big", big); err != nil {
		t.Errorf("put of the store's largest value: %v", err)
	}
	ops := make([]clientv3.Op, etcdproc.MaxTxnOps)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("ops/%d", i), "")
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Errorf("transaction of %d ops: %v", len(ops), err)
	}

	pid := m.PID()
	if !guardRunning(t, pid) {
		t.Errorf("no exit guard for member %d", pid)
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.Running() || processAlive(pid) {
		t.Fatalf("member still running after Kill")
	}
	if guardRunning(t, pid) {
		t.Errorf("exit guard of member %d left after Kill", pid)
	}
	if _, err := os.Stat(m.PIDPath()); !os.IsNotExist(err) {
		t.Errorf("pid file left after Kill: %v", err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := m.Start(ctx); err == nil {
		t.Errorf("second Start of a running member succeeded")
	}
	// A member that dies by another hand takes its guard along.
	pid = m.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); m.Running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("member %d still running after SIGKILL", pid)
		}
	}
	if guardRunning(t, pid) {
		t.Errorf("exit guard of member %d left after it died", pid)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("restart after a crash: %v", err)
	}
	got, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Errorf("after kill and restart: %v, want k=v at %d", got.Kvs, put.Header.Revision)
	}

	pid = m.PID()
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("process %d alive after Stop", pid)
	}
	if err := m.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := m.WaitReady(ctx); err == nil {
		t.Errorf("WaitReady of a stopped member succeeded")
	}
	// The log is appended to across restarts.
	if n := strings.Count(readFile(t, m.LogPath()), `"msg":"starting an etcd server"`); n != 3 {
		t.Errorf("member log %s shows %d starts, want 3", m.LogPath(), n)
	}
}

func TestThreeMembers(t *testing.T) {
	c := etcdtest.Start(t, etcdproc.Config{Members: 3})
	eps := c.Endpoints()
	if len(eps) != 3 || eps[0] == eps[1] || eps[1] == eps[2] || eps[0] == eps[2] {
		t.Fatalf("endpoints %v", eps)
	}
	cli := newClient(t, eps[:1], nil)
	list, err := cli.MemberList(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	if len(names) != 3 {
		t.Errorf("members %v, want 3", names)
	}
	for _, m := range c.Members {
		if c.Member(m.Name) != m {
			t.Errorf("Member(%q) does not find it", m.Name)
		}
	}
	if c.Member("nope") != nil {
		t.Errorf("Member of an unknown name")
	}
}

// TestMutualTLS checks that members serve clients and each other over TLS
// and refuse clients without a certificate.
func TestMutualTLS(t *testing.T) {
	certs := etcdtest.NewCerts(t)
	c := etcdtest.Start(t, etcdproc.Config{Members: 3, ClientTLS: &certs.Member, PeerTLS: &certs.Member})
	for _, ep := range c.Endpoints() {
		if !strings.HasPrefix(ep, "https://") {
			t.Errorf("endpoint %s is not https", ep)
		}
	}
	for _, m := range c.Members {
		if !strings.HasPrefix(m.PeerURL, "https://") {
			t.Errorf("peer URL %s is not https", m.PeerURL)
		}
	}
	ctx := ctxT(t)
	cli := newClient(t, c.Endpoints(), certs.ClientTLS(t))
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put over mTLS: %v", err)
	}
	// Without a client certificate the handshake fails.
	noCert := certs.ClientTLS(t)
	noCert.Certificates = nil
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	if resp, err := hc.Get(c.Endpoints()[0] + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("health check without a client certificate: HTTP %d, want a refused handshake", resp.StatusCode)
	}
}

func TestStartErrors(t *testing.T) {
	bin := etcdtest.Require(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	if err := os.MkdirAll(filepath.Join(existing, "m0", "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  etcdproc.Config
		want string
	}{
		{"no dir", etcdproc.Config{Binary: bin}, "Dir is required"},
		{"too many members", etcdproc.Config{Binary: bin, Dir: dir, Members: 10}, "10 members"},
		{"bad host", etcdproc.Config{Binary: bin, Dir: dir, Host: "localhost"}, "not an IP"},
		{"tls without files", etcdproc.Config{Binary: bin, Dir: dir, ClientTLS: &etcdproc.TLSFiles{CertFile: "x"}}, "all required"},
		{"tls files missing", etcdproc.Config{Binary: bin, Dir: dir, PeerTLS: &etcdproc.TLSFiles{CertFile: "/nope/a", KeyFile: "/nope/b", CAFile: "/nope/c"}}, "no such file"},
		{"data exists", etcdproc.Config{Binary: bin, Dir: existing}, "already holds"},
		{"no binary", etcdproc.Config{Binary: filepath.Join(dir, "missing-etcd"), Dir: filepath.Join(dir, "nobin")}, "starting member m0"},
		// A binary that exits at once: the error says so and quotes its log.
		{"exits", etcdproc.Config{Binary: writeScript(t, "echo broken-etcd-says-no; exit 3"), Dir: filepath.Join(dir, "exits")}, "broken-etcd-says-no"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := etcdproc.Start(ctxT(t), tc.cfg)
			if err == nil {
				c.Stop()
				t.Fatalf("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestReadyTimeout: a member that never becomes healthy fails Start within
// the ready timeout and is stopped again.
func TestReadyTimeout(t *testing.T) {
	bin := writeScript(t, "echo $$ > \"$(dirname \"$0\")/pid\"; exec sleep 60")
	_, err := etcdproc.Start(ctxT(t), etcdproc.Config{Binary: bin, Dir: t.TempDir(), ReadyTimeout: 500 * time.Millisecond, StopTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not healthy") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start: %v, want a ready timeout", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(filepath.Dir(bin), "pid"))))
	if pid == 0 || processAlive(pid) {
		t.Errorf("fake member %d still running after the failed Start", pid)
	}
}

// TestParentExit starts members from a child process that then exits
// without stopping them: a member without ExitWithParent survives (it must
// outlive corrald), one with it is killed.
func TestParentExit(t *testing.T) {
	if os.Getenv("ETCDPROC_CHILD_DIR") != "" {
		parentExitChild()
		return
	}
	etcdtest.Require(t)
	for _, tie := range []bool{false, true} {
		t.Run(fmt.Sprintf("ExitWithParent=%v", tie), func(t *testing.T) {
			dir := etcdtest.ShortTempDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestParentExit$")
			cmd.Env = append(os.Environ(), "ETCDPROC_CHILD_DIR="+dir, "ETCDPROC_CHILD_TIE="+strconv.FormatBool(tie))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			var pid int
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				if p, ok := strings.CutPrefix(sc.Text(), "member-pid "); ok {
					pid, _ = strconv.Atoi(p)
				}
			}
			if pid == 0 {
				t.Fatalf("child printed no member pid: %q", out)
			}
			// The member is ours to clean up whatever happens.
			t.Cleanup(func() {
				if processAlive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			// A tied member goes at once; the wait is generous for a
			// loaded machine. An untied one has no way to be killed late,
			// so a short look suffices.
			limit := time.Second
			if tie {
				limit = 15 * time.Second
			}
			dead := waitDead(pid, limit)
			if tie && !dead {
				t.Errorf("member %d survived its starter despite ExitWithParent", pid)
			}
			if !tie && dead {
				t.Errorf("member %d died with its starter", pid)
			}
		})
	}
}

// parentExitChild starts a member, prints its pid and exits without
// stopping it.
func parentExitChild() {
	tie, _ := strconv.ParseBool(os.Getenv("ETCDPROC_CHILD_TIE"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdproc.Start(ctx, etcdproc.Config{Dir: os.Getenv("ETCDPROC_CHILD_DIR"), ExitWithParent: tie})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("member-pid %d\n", c.Members[0].PID())
	os.Exit(0)
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// guardRunning reports whether an exit guard for member pid is running.
func guardRunning(t *testing.T, pid int) bool {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	want := "\x00etcd-guard\x00" + strconv.Itoa(pid) + "\x00"
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), want) {
			if gpid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p))); processAlive(gpid) {
				return true
			}
		}
	}
	return false
}

// waitDead polls until pid is gone or limit passes.
func waitDead(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-etcd")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
