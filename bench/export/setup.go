package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

// source is one instance whose disk the cases copy.
type source struct {
	kind string // random or zero
	mode string // os or raw
	name string // the instance on the first cluster, on node1
	path string // its disk file (the import case replaces the instance)
	ref  string // a file with the same bytes, what every copy is compared with
	// payload, on the OS path, is the data file in the disk's file system,
	// for copies a rename script has changed (the move's).
	payload string
}

// bench is the set-up every case runs against.
type bench struct {
	o       options
	started time.Time
	machine harness.Machine
	size    int64
	bin     string
	a, b    *harness.Cluster // b: the move's destination, nil without move
	ca, cb  *luxi.Client
	sources []source
	dir     string // certificates and password files
	// recv and send are socat's identities on node2's and node1's address.
	recv, send *harness.TLSEndpoint
	moveArgs   []string // the move command's options and clusters
}

// socatMode is the source mode whose disk file socat copies (one per data
// kind: every mode's file holds the same bytes).
func (b *bench) socatMode() string { return b.o.modes[0] }

// setUp starts the dev clusters, creates one instance per data kind and
// mode and fills its disk. The bench it returns (even with an error) must
// be closed.
func setUp(ctx context.Context, o options) (*bench, error) {
	b := &bench{o: o, started: time.Now(), machine: harness.ReadMachine(), size: o.sizeMiB << 20}
	var err error
	if b.bin, err = filepath.Abs(o.cluster.Bin); err != nil {
		return b, err
	}
	if b.dir, err = os.MkdirTemp("/var/tmp", "corral-bench-export-"); err != nil {
		return b, err
	}
	harness.Progress(b.started, "starting the dev cluster (node1, node2)")
	if b.a, err = harness.Start(ctx, o.cluster); err != nil {
		return b, err
	}
	if b.ca, err = b.a.Dial(ctx); err != nil {
		return b, err
	}
	if len(b.a.State.IPs) < 2 {
		return b, fmt.Errorf("the dev cluster has %d node(s), the benchmark needs two", len(b.a.State.IPs))
	}
	if b.recv, err = harness.NewTLSEndpoint(b.dir, "bench-recv", net.ParseIP(b.a.State.IPs[1])); err != nil {
		return b, err
	}
	if b.send, err = harness.NewTLSEndpoint(b.dir, "bench-send", net.ParseIP(b.a.State.IPs[0])); err != nil {
		return b, err
	}
	if slices.Contains(o.cases, "move") {
		if err := b.startDestination(ctx); err != nil {
			return b, err
		}
	}
	for _, kind := range o.kinds {
		for _, mode := range o.modes {
			src, err := b.newSource(ctx, kind, mode)
			if err != nil {
				return b, err
			}
			b.sources = append(b.sources, src)
		}
	}
	return b, nil
}

// newSource creates a stopped instance with one file disk on node1 and
// fills the disk.
func (b *bench) newSource(ctx context.Context, kind, mode string) (source, error) {
	s := source{kind: kind, mode: mode, name: "src-" + kind + "-" + mode}
	spec := harness.InstanceSpec{Template: "file", DiskMiB: int(b.o.sizeMiB), Node: "node1"}
	if mode == "os" {
		spec.OS = b.o.osName
	}
	harness.Progress(b.started, "creating %s (%d MiB file disk, %s data, %s)", s.name, b.o.sizeMiB, kind, mode)
	if err := harness.RunJob(ctx, b.ca, spec.CreateOp(s.name)); err != nil {
		return s, fmt.Errorf("creating %s: %w", s.name, err)
	}
	p, err := diskPath(ctx, b.ca, b.a.State.StateDir, "node1", s.name)
	if err != nil {
		return s, err
	}
	s.path, s.ref = p, filepath.Join(b.dir, s.name+".ref")
	if mode == "raw" {
		if err := harness.WriteDataFile(s.ref, b.size, kind == "random"); err != nil {
			return s, err
		}
		return s, copyFile(s.ref, s.path)
	}
	// The OS's rename script, which an import under another name and
	// every move run, needs the file system the create script made: the
	// data goes into a file in it, 7/8 of the disk.
	s.payload = filepath.Join(b.dir, s.name+".payload")
	if err := harness.WriteDataFile(s.payload, b.size/8*7>>20<<20, kind == "random"); err != nil {
		return s, err
	}
	out, err := exec.CommandContext(ctx, "debugfs", "-w", "-R", "write "+s.payload+" "+payloadFile, s.path).CombinedOutput()
	if err != nil {
		return s, fmt.Errorf("writing the data into the file system of %s: %w: %s", s.name, err, out)
	}
	if err := syncFile(s.path); err != nil {
		return s, err
	}
	if err := b.checkPayload(s, s.path); err != nil {
		return s, err
	}
	if err := copyFile(s.path, s.ref); err != nil {
		return s, err
	}
	return s, harness.SameContent(s.ref, s.path)
}

// payloadFile is the data file in an OS instance's file system.
const payloadFile = "/payload"

// syncFile flushes a file written by another program.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copyFile overwrites dst with src's bytes and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// diskPath is the file of an instance's first disk on node (a file disk
// lives at <node dir>/storage/file/<instance uuid>/<disk uuid>.raw).
func diskPath(ctx context.Context, c *luxi.Client, stateDir, node, name string) (string, error) {
	rows, err := c.QueryInstances(ctx, []string{name}, []string{"uuid", "disk.uuids"}, false)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return "", fmt.Errorf("instance %s: unexpected query answer %v", name, rows)
	}
	disks, _ := rows[0][1].([]any)
	if len(disks) == 0 {
		return "", fmt.Errorf("instance %s has no disk", name)
	}
	return filepath.Join(stateDir, node, "storage", "file", fmt.Sprint(rows[0][0]), fmt.Sprint(disks[0])+".raw"), nil
}

// startDestination starts the move's second dev cluster (one node), pairs
// the two and prepares the move command's options.
func (b *bench) startDestination(ctx context.Context) error {
	f := b.o.cluster
	f.Nodes = 0
	harness.Progress(b.started, "starting the destination dev cluster of the move")
	var err error
	if b.b, err = harness.Start(ctx, f); err != nil {
		return err
	}
	if b.cb, err = b.b.Dial(ctx); err != nil {
		return err
	}
	envA, err := devcluster.ReadRAPIEnv(b.a.State.StateDir)
	if err != nil {
		return err
	}
	envB, err := devcluster.ReadRAPIEnv(b.b.State.StateDir)
	if err != nil {
		return err
	}
	out, err := b.corral(b.a, "cluster", "pair", "create", "--rapi-url", envA.URL)
	if err != nil {
		return fmt.Errorf("pairing the clusters: %w: %s", err, out)
	}
	var token string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "corral-pair-1.") {
			token = strings.TrimSpace(l)
		}
	}
	if token == "" {
		return fmt.Errorf("no pairing token in: %s", out)
	}
	if out, err := b.corral(b.b, "cluster", "pair", "join", "--force", "--rapi-url", envB.URL, token); err != nil {
		return fmt.Errorf("joining the pair: %w: %s", err, out)
	}
	for _, side := range []struct {
		prefix string
		env    devcluster.RAPIEnv
	}{{"src", envA}, {"dest", envB}} {
		pw := filepath.Join(b.dir, side.prefix+"-password")
		if err := os.WriteFile(pw, []byte(side.env.Password+"\n"), 0o600); err != nil {
			return err
		}
		b.moveArgs = append(b.moveArgs, "--"+side.prefix+"-ca-file", side.env.CA, "--"+side.prefix+"-username", side.env.User,
			"--"+side.prefix+"-password-file", pw)
	}
	b.moveArgs = append(b.moveArgs, envA.URL, envB.URL)
	return nil
}

// corral runs the command line tool against cluster c.
func (b *bench) corral(c *harness.Cluster, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(b.bin, "corral"), args...)
	cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.State.StateDir, "CORRAL_RUN_DIR="+c.State.RunDir, "CORRAL_SOCKET="+c.State.Socket)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// close tears everything down.
func (b *bench) close() {
	for _, c := range []*luxi.Client{b.ca, b.cb} {
		if c != nil {
			c.Close()
		}
	}
	for _, c := range []*harness.Cluster{b.a, b.b} {
		if c != nil {
			_ = c.Close()
		}
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
