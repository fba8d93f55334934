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
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	devharness "github.com/corral/corral/internal/devcluster/harness"
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
	// The CLI is built as the Makefile builds it, without cgo.
	for _, b := range []struct {
		env  []string
		pkgs []string
	}{
		{[]string{"CGO_ENABLED=0"}, []string{"./cmd/corral"}},
		{nil, []string{"./cmd/corrald", "./cmd/corral-node", "./cmd/corral-rapi"}},
	} {
		cmd := exec.Command("go", append([]string{"build", "-o", binDir + "/"}, b.pkgs...)...)
		cmd.Dir = repoDir
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %v: %v\n%s", b.pkgs, err, out)
			return 1
		}
	}
	return m.Run()
}

// cluster is a running dev cluster for one test.
type cluster struct {
	t     *testing.T
	h     *devharness.Cluster
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
	return newClusterWith(t, devcluster.Options{
		Nodes: o.nodes, OSDir: o.osDir, ImageDir: o.imageDir, Hypervisors: o.hypervisors,
		WatcherEvery: o.watcher, CorraldArgs: o.corraldArgs,
	})
}

// newClusterWith is newCluster for options clusterOpts does not carry, the
// store backend among them. The directories and binaries are filled in (the
// OS directory when not given).
func newClusterWith(t *testing.T, o devcluster.Options) *cluster {
	t.Helper()
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.BinDir = binDir
	if o.OSDir == "" {
		o.OSDir = filepath.Join(repoDir, "os")
	}
	o.Log = func(f string, a ...any) { t.Logf(f, a...) }
	h, err := devharness.Up(ctx, "corral-e2e-", o)
	if h == nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, h: h, st: h.State, dir: h.Dir}
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
	cl, err := c.h.Dial(context.Background())
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
	if err := c.h.Down(ctx, func(string, ...any) {}); err != nil {
		c.t.Logf("dev down: %v", err)
	}
}

func (c *cluster) dumpLogs() { c.h.DumpLogs(c.t.Logf, 6000) }

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
	p, err := c.h.Proc(name)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// killCorrald SIGKILLs the master daemon.
func (c *cluster) killCorrald() {
	c.t.Helper()
	c.killDaemon("corrald")
}

// restartCorrald starts corrald again with its original arguments and
// reconnects once it answers LUXI calls.
func (c *cluster) restartCorrald() {
	c.t.Helper()
	if c.luxi != nil {
		c.luxi.Close()
		c.luxi = nil
	}
	if _, err := c.h.RestartCorrald(context.Background(), 30*time.Second); err != nil {
		c.dumpLogs()
		c.t.Fatal(err)
	}
	c.luxi = c.dial()
}
