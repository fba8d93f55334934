// Package e2e starts real Corral daemons as processes — corrald as
// corral-master, corral-node as root on 127.0.0.x addresses — and drives
// them over the real LUXI socket and the real CLI. The tests need root (CI
// runs as root) and skip otherwise.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

var (
	binDir  string // built binaries
	repoDir string
	skipWhy string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoDir = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if os.Geteuid() != 0 {
		skipWhy = "end-to-end tests need root (they create users, taps and run corral-node as root)"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "corral-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/corral", "./cmd/corrald", "./cmd/corral-node", "./cmd/corral-rapi")
	cmd.Dir = repoDir
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building binaries: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// cluster is a running dev cluster for one test.
type cluster struct {
	t     *testing.T
	st    *devcluster.State
	dir   string
	luxi  *luxi.Client
	image string
}

type clusterOpts struct {
	nodes       int
	hypervisors []string
	imageDir    string
	watcher     time.Duration
	corraldArgs []string // extra corrald flags, e.g. "--max-connections", "50"
	osDir       string   // OS definitions (default: the repository's os/)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	requireRoot(t)
	dir, err := os.MkdirTemp("", "corral-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	// corrald runs as corral-master and must reach its directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if o.osDir == "" {
		o.osDir = filepath.Join(repoDir, "os")
	}
	st, err := devcluster.Up(ctx, devcluster.Options{
		StateDir: dir, Nodes: o.nodes, BinDir: binDir, OSDir: o.osDir,
		ImageDir: o.imageDir, Hypervisors: o.hypervisors, WatcherEvery: o.watcher, CorraldArgs: o.corraldArgs,
		Log: func(f string, a ...any) { t.Logf(f, a...) },
	})
	c := &cluster{t: t, st: st, dir: dir}
	t.Cleanup(c.down)
	if err != nil {
		c.dumpLogs()
		t.Fatalf("dev up: %v", err)
	}
	c.luxi = c.dial()
	return c
}

func (c *cluster) dial() *luxi.Client {
	c.t.Helper()
	cl, err := luxi.Dial(context.Background(), c.st.Socket)
	if err != nil {
		c.t.Fatalf("dial LUXI: %v", err)
	}
	return cl
}

func (c *cluster) down() {
	if c.luxi != nil {
		c.luxi.Close()
	}
	if c.t.Failed() {
		c.dumpLogs()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := devcluster.Down(ctx, c.dir, true, func(string, ...any) {}); err != nil {
		c.t.Logf("dev down: %v", err)
	}
	_ = os.Remove(c.dir)
}

func (c *cluster) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	members, _ := filepath.Glob(filepath.Join(c.dir, "etcd", "*", "*", "etcd.log"))
	logs = append(logs, members...)
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		name, _ := filepath.Rel(c.dir, l)
		c.t.Logf("==== %s ====\n%s", name, b)
	}
}

// submit runs a job and waits for it.
func (c *cluster) submit(ops ...map[string]any) (int64, string, []any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	anyOps := make([]any, len(ops))
	for i, o := range ops {
		anyOps[i] = o
	}
	id, err := c.luxi.SubmitJob(ctx, anyOps)
	if err != nil {
		c.t.Fatalf("submit %v: %v", ops, err)
	}
	status, res, err := luxi.WaitForJob(ctx, c.luxi, id, nil)
	if err != nil && status == "" {
		c.t.Fatalf("wait job %d: %v", id, err)
	}
	return id, status, res
}

// mustSucceed runs a job and fails the test unless it succeeds.
func (c *cluster) mustSucceed(ops ...map[string]any) []any {
	c.t.Helper()
	id, status, res := c.submit(ops...)
	if status != "success" {
		c.t.Fatalf("job %d (%v) ended %s: %v", id, ops[0]["OP_ID"], status, res)
	}
	return res
}

// mustFail runs a job, expects an error of the given Ganeti class, and
// returns the message.
func (c *cluster) mustFail(class string, ops ...map[string]any) string {
	c.t.Helper()
	id, status, res := c.submit(ops...)
	if status != "error" {
		c.t.Fatalf("job %d (%v): want error, got %s: %v", id, ops[0]["OP_ID"], status, res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), class) {
		c.t.Fatalf("job %d: error %s does not carry class %s", id, b, class)
	}
	return string(b)
}

// corral runs the CLI against the cluster.
func (c *cluster) corral(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "corral"), args...)
	cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+c.st.Socket)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// proc returns the dev cluster's record of a daemon.
func (c *cluster) proc(name string) devcluster.Proc {
	for _, p := range c.st.Procs {
		if p.Name == name {
			return p
		}
	}
	c.t.Fatalf("no process %s", name)
	return devcluster.Proc{}
}

// killCorrald SIGKILLs the master daemon.
func (c *cluster) killCorrald() {
	p := c.proc("corrald")
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID)); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("corrald pid %d did not die", p.PID)
}

// restartCorrald starts corrald again with its original arguments.
func (c *cluster) restartCorrald() {
	c.t.Helper()
	np, err := devcluster.Restart(c.st, "corrald")
	if err != nil {
		c.t.Fatal(err)
	}
	for i := range c.st.Procs {
		if c.st.Procs[i].Name == "corrald" {
			c.st.Procs[i] = np
		}
	}
	if c.luxi != nil {
		c.luxi.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := luxi.Dial(context.Background(), c.st.Socket)
		if err == nil {
			var v []any
			if err = cl.Call(context.Background(), "QueryConfigValues", []any{[]string{"cluster_name"}}, &v); err == nil {
				c.luxi = cl
				return
			}
			cl.Close()
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			c.t.Fatalf("corrald did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
