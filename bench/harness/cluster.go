// Package harness is the shared plumbing of the benchmark programs under
// bench/: a dev cluster to measure against (real corrald and node daemons,
// reached through the real LUXI socket), latency statistics, process figures
// read from /proc, job helpers, and the output every program prints: one
// JSON line on stdout and a readable summary on stderr.
package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

// Flags select the cluster a benchmark runs against. Their values when
// Register is called are the defaults shown by -help.
type Flags struct {
	Socket     string // LUXI socket of a running cluster; no dev cluster is started
	StateDir   string // state directory of a running dev cluster; none is started
	Bin        string // directory with corrald and corral-node
	OS         string // OS definitions; default <Bin>/../os
	Nodes      int    // node daemons besides the master's
	FakeMemMiB int64  // memory each fake node reports; 0 = devcluster's default
	Keep       bool   // leave the dev cluster running (and print where it is)
	Verbose    bool   // log the dev cluster's progress on stderr
	// Store is the dev cluster's store backend, bbolt or etcd, so every
	// benchmark can measure either; EtcdMembers is how many etcd members
	// it runs (1 or 3).
	Store       string
	EtcdMembers int
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	if f.Bin == "" {
		f.Bin = "bin"
	}
	fs.StringVar(&f.Socket, "socket", f.Socket, "LUXI socket of a running cluster (default: start a dev cluster); figures that need corrald's pid are then unavailable")
	fs.StringVar(&f.StateDir, "state-dir", f.StateDir, "state directory of a running dev cluster to use instead of starting one")
	fs.StringVar(&f.Bin, "bin", f.Bin, "directory with corrald and corral-node for the dev cluster (make build)")
	fs.StringVar(&f.OS, "os", f.OS, "OS definitions directory for the dev cluster (default <bin>/../os)")
	fs.IntVar(&f.Nodes, "nodes", f.Nodes, "node daemons besides the master's in the dev cluster")
	fs.Int64Var(&f.FakeMemMiB, "fake-mem", f.FakeMemMiB, "memory (MiB) each fake-hypervisor node reports (0: the dev cluster's default)")
	fs.BoolVar(&f.Keep, "keep", f.Keep, "leave the dev cluster running afterwards")
	if f.Store == "" {
		f.Store = "bbolt"
	}
	fs.StringVar(&f.Store, "store", f.Store, "store backend of the dev cluster: bbolt or etcd (members started by the dev cluster)")
	fs.IntVar(&f.EtcdMembers, "etcd-members", f.EtcdMembers, "with -store etcd: etcd members of the dev cluster, 1 or 3 (0: the dev cluster's default, 1)")
	fs.BoolVar(&f.Verbose, "v", f.Verbose, "log the dev cluster's progress")
}

// Cluster is the cluster under measurement.
type Cluster struct {
	Socket string
	// State is nil when the cluster was given by --socket alone.
	State *devcluster.State
	// SetupTime is how long bringing up the dev cluster took (0 if none
	// was started).
	SetupTime time.Duration
	// Store is the store backend measured ("bbolt" or "etcd"; "" when only
	// --socket names the cluster), for the programs' results.
	Store string

	dir  string // state directory of a dev cluster we started
	keep bool
	logf func(string, ...any)
}

// Start brings up a dev cluster with the fake hypervisor (needs root and
// the built binaries), or attaches to the one named by --socket or
// --state-dir.
func Start(ctx context.Context, f Flags) (*Cluster, error) {
	logf := func(string, ...any) {}
	if f.Verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	switch {
	case f.Socket != "":
		return &Cluster{Socket: f.Socket, logf: logf}, nil
	case f.StateDir != "":
		st, err := devcluster.Load(f.StateDir)
		if err != nil {
			return nil, err
		}
		return &Cluster{Socket: st.Socket, State: st, Store: storeOf(st), logf: logf}, nil
	}
	bin, err := filepath.Abs(f.Bin)
	if err != nil {
		return nil, err
	}
	osDir := f.OS
	if osDir == "" {
		osDir = filepath.Join(bin, "..", "os")
	}
	if osDir, err = filepath.Abs(osDir); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		return nil, err
	}
	// The daemons run as other users and must reach their directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, keep: f.Keep, logf: logf}
	members := f.EtcdMembers
	if f.Store != "etcd" {
		members = 0 // so one command line can measure both backends
	}
	t0 := time.Now()
	st, err := devcluster.Up(ctx, devcluster.Options{
		StateDir: dir, BinDir: bin, OSDir: osDir, Hypervisors: []string{"fake"},
		Nodes: f.Nodes, FakeMemMiB: f.FakeMemMiB, Log: logf,
		Store: f.Store, EtcdMembers: members,
	})
	if err != nil {
		c.keep = false
		_ = c.Close()
		return nil, err
	}
	c.SetupTime = time.Since(t0)
	c.Socket, c.State, c.Store = st.Socket, st, storeOf(st)
	return c, nil
}

func storeOf(st *devcluster.State) string {
	if st.Store == "" {
		return "bbolt"
	}
	return st.Store
}

// Close tears down a dev cluster Start brought up, unless --keep was given.
// Clusters attached to are left alone. A failure is also reported on
// stderr, since Close usually runs deferred.
func (c *Cluster) Close() error {
	err := c.close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tearing down the dev cluster in %s: %v\n", c.dir, err)
	}
	return err
}

func (c *Cluster) close() error {
	if c.dir == "" {
		return nil
	}
	if c.keep {
		fmt.Fprintf(os.Stderr, "dev cluster left running: state %s, socket %s (corral dev down --state-dir %s --purge)\n", c.dir, c.Socket, c.dir)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := devcluster.Down(ctx, c.dir, true, c.logf)
	// Down leaves a state directory it did not create itself (ours is from
	// MkdirTemp), and Up may have failed before recording anything for Down
	// to use: the directory is ours to remove either way.
	if rerr := os.RemoveAll(c.dir); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Dial opens a new LUXI connection.
func (c *Cluster) Dial(ctx context.Context) (*luxi.Client, error) {
	return luxi.Dial(ctx, c.Socket)
}

// CorraldPID returns the pid of the running corrald.
func (c *Cluster) CorraldPID() (int, error) {
	if c.State == nil {
		return 0, errors.New("corrald's pid is unknown when only --socket is given (use --state-dir or a dev cluster)")
	}
	for _, p := range c.State.Procs {
		if p.Name == "corrald" {
			return p.PID, nil
		}
	}
	return 0, errors.New("the dev cluster has no corrald")
}

// StopCorrald sends corrald SIGTERM and waits for it to exit (SIGKILL after
// grace). It returns how long the orderly stop took.
func (c *Cluster) StopCorrald(ctx context.Context, grace time.Duration) (time.Duration, error) {
	pid, err := c.CorraldPID()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("stopping corrald (pid %d): %w", pid, err)
	}
	deadline := t0.Add(grace)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return time.Since(t0), fmt.Errorf("corrald (pid %d) did not stop within %s; killed", pid, grace)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return time.Since(t0), nil
}

// RestartCorrald starts a stopped corrald again with its original arguments
// and measures the time from starting the process to its first answered
// LUXI call (QueryConfigValues).
func (c *Cluster) RestartCorrald(ctx context.Context, limit time.Duration) (time.Duration, error) {
	if c.State == nil {
		return 0, errors.New("restarting corrald needs a dev cluster")
	}
	t0 := time.Now()
	if _, err := devcluster.Restart(c.State, "corrald"); err != nil {
		return 0, err
	}
	for {
		if cl, err := luxi.Dial(ctx, c.Socket); err == nil {
			_, err = cl.QueryConfigValues(ctx, []string{"cluster_name"})
			cl.Close()
			if err == nil {
				return time.Since(t0), nil
			}
		}
		if time.Since(t0) > limit {
			return 0, fmt.Errorf("corrald did not answer within %s after restart", limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	st, err := ReadStat(pid)
	return err == nil && st.State != 'Z'
}
