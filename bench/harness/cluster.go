// Package harness is the shared plumbing of the benchmark programs under
// bench/: a dev cluster to measure against (real corrald and node daemons,
// reached through the real LUXI socket), latency statistics, process figures
// read from /proc, job helpers, and the output every program prints: one
// JSON line on stdout and a readable summary on stderr.
package harness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/devcluster"
	devharness "github.com/corral/corral/internal/devcluster/harness"
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

// Cluster is the cluster under measurement. The embedded dev-cluster
// harness gives it Socket, State, Dial, CorraldPID, StopCorrald and
// RestartCorrald.
type Cluster struct {
	devharness.Cluster
	// SetupTime is how long bringing up the dev cluster took (0 if none
	// was started).
	SetupTime time.Duration
	// Store is the store backend measured ("bbolt" or "etcd"; "" when only
	// --socket names the cluster), for the programs' results.
	Store string

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
		return &Cluster{Cluster: devharness.Cluster{Socket: f.Socket}, logf: logf}, nil
	case f.StateDir != "":
		st, err := devcluster.Load(f.StateDir)
		if err != nil {
			return nil, err
		}
		return &Cluster{Cluster: *devharness.Attach(st), Store: storeOf(st), logf: logf}, nil
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
	members := f.EtcdMembers
	if f.Store != "etcd" {
		members = 0 // so one command line can measure both backends
	}
	t0 := time.Now()
	dc, err := devharness.Up(ctx, "corral-bench-", devcluster.Options{
		BinDir: bin, OSDir: osDir, Hypervisors: []string{"fake"},
		Nodes: f.Nodes, FakeMemMiB: f.FakeMemMiB, Log: logf,
		Store: f.Store, EtcdMembers: members,
	})
	if dc == nil {
		return nil, err
	}
	c := &Cluster{Cluster: *dc, keep: f.Keep, logf: logf}
	if err != nil {
		c.keep = false
		_ = c.Close()
		return nil, err
	}
	c.SetupTime = time.Since(t0)
	c.Store = storeOf(c.State)
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
		fmt.Fprintf(os.Stderr, "tearing down the dev cluster in %s: %v\n", c.Dir, err)
	}
	return err
}

func (c *Cluster) close() error {
	if c.Dir == "" {
		return nil
	}
	if c.keep {
		fmt.Fprintf(os.Stderr, "dev cluster left running: state %s, socket %s (corral dev down --state-dir %s --purge)\n", c.Dir, c.Socket, c.Dir)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Down(ctx, c.logf)
}
