package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/master"
)

// moverOS is an OS definition whose export and import scripts copy the
// disk as it is and whose rename script records its names, so a move can
// be checked byte for byte.
var moverOS = map[string]string{
	"ganeti_api_version": "20\n",
	"parameters.list":    "",
	"create":             "#!/bin/sh\nexit 0\n",
	"verify":             "#!/bin/sh\nexit 0\n",
	"export":             "#!/bin/sh\nset -eu\nexec cat \"$EXPORT_DISK_PATH\"\n",
	"import":             "#!/bin/sh\nset -eu\nexec dd of=\"$IMPORT_DISK_PATH\" bs=1M conv=notrunc status=none\n",
	"rename":             "#!/bin/sh\nset -eu\necho \"old=$OLD_INSTANCE_NAME new=$INSTANCE_NAME\" >> \"$(dirname \"$0\")/renames.log\"\n",
}

// osDirWithMover makes an OS search directory with the project's tiny OS
// and the mover OS.
func osDirWithMover(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repoDir, "os", "tiny"), filepath.Join(dir, "tiny")); err != nil {
		t.Fatal(err)
	}
	mover := filepath.Join(dir, "mover")
	if err := os.Mkdir(mover, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range moverOS {
		mode := os.FileMode(0o755)
		if !strings.Contains(body, "#!") {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(mover, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// diskPaths returns an instance's disk files in disk order.
func (c *cluster) diskPaths(node, name string) []string {
	c.t.Helper()
	uuid := fmt.Sprint(c.instanceField(name, "uuid"))
	disks, _ := c.instanceField(name, "disk.uuids").([]any)
	var out []string
	for _, d := range disks {
		out = append(out, filepath.Join(c.dir, node, "storage", "file", uuid, fmt.Sprint(d)+".raw"))
	}
	return out
}

// fillRandom overwrites every disk of an instance with random bytes and
// returns their sha256 sums in disk order.
func (c *cluster) fillRandom(node, name string) []string {
	c.t.Helper()
	var sums []string
	for _, f := range c.diskPaths(node, name) {
		fi, err := os.Stat(f)
		if err != nil {
			c.t.Fatal(err)
		}
		w, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			c.t.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(w, h), rand.Reader, fi.Size()); err != nil {
			c.t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			c.t.Fatal(err)
		}
		sums = append(sums, hex.EncodeToString(h.Sum(nil)))
	}
	return sums
}

// diskSums returns the sha256 of an instance's disks in disk order.
func (c *cluster) diskSums(node, name string) []string {
	c.t.Helper()
	var sums []string
	for _, f := range c.diskPaths(node, name) {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		s := sha256.Sum256(b)
		sums = append(sums, hex.EncodeToString(s[:]))
	}
	return sums
}

// transferKeys lists the transfer key directories left on the nodes.
func (c *cluster) transferKeys() []string {
	keys, _ := filepath.Glob(filepath.Join(c.dir, "node*", "crypto", "x509-*"))
	return keys
}

// domainSecretPath is the master's cluster domain secret file.
func (c *cluster) domainSecretPath() string {
	return filepath.Join(bootstrap.Layout{StateDir: c.dir}.MasterDir(), master.FileDomainSecret)
}

// moveArgs are the move tool's options for moving from a to b.
func moveArgs(t *testing.T, a, b *cluster) []string {
	t.Helper()
	var args []string
	for _, side := range []struct {
		prefix string
		c      *cluster
	}{{"src", a}, {"dest", b}} {
		env, err := devcluster.ReadRAPIEnv(side.c.dir)
		if err != nil {
			t.Fatal(err)
		}
		pw := filepath.Join(t.TempDir(), side.prefix+"-password")
		if err := os.WriteFile(pw, []byte(env.Password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+side.prefix+"-ca-file", env.CA, "--"+side.prefix+"-username", env.User,
			"--"+side.prefix+"-password-file", pw)
	}
	return args
}

func rapiURL(t *testing.T, c *cluster) string {
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	return env.URL
}

// TestMoveBetweenClusters moves a stopped and a running instance, each
// with two 64 MiB disks of random data, from one dev cluster to another
// through both RAPIs with `corral instance move`.
func TestMoveBetweenClusters(t *testing.T) {
	osDir := osDirWithMover(t)
	a := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}, osDir: osDir})
	b := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}, osDir: osDir})
	pairClusters(t, a, b)

	create := func(name string, start bool, nics ...any) map[string]any {
		return map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
			"disks": []any{map[string]any{"size": 64}, map[string]any{"size": 64}}, "nics": append([]any{}, nics...),
			"os_type": "mover", "pnode": "node1", "start": start}
	}
	// m1 has a NIC: the move reads it from the source's instance info
	// (Ganeti's 9-item NIC tuples) and recreates it on the destination.
	a.mustSucceed(create("m1", false, map[string]any{"name": "eth0", "mac": "aa:00:00:5e:00:01", "ip": "192.0.2.10", "mode": "routed", "link": "rt1"}))
	a.mustSucceed(create("m2", true))
	sums := map[string][]string{}
	for _, name := range []string{"m1", "m2"} {
		sums[name] = a.fillRandom("node1", name)
		if len(sums[name]) != 2 {
			t.Fatalf("%s has disk files %v", name, sums[name])
		}
	}
	src, dst := rapiURL(t, a), rapiURL(t, b)

	// The preflight checks everything and moves nothing.
	out, err := a.corral(append(append([]string{"instance", "move", "--dry-run"}, moveArgs(t, a, b)...), src, dst, "m1")...)
	if err != nil {
		t.Fatalf("move --dry-run: %v\n%s", err, out)
	}
	if rows, _ := b.luxi.QueryInstances(t.Context(), nil, []string{"name"}, false); len(rows) != 0 {
		t.Fatalf("the dry run created %v on the destination", rows)
	}

	// m1, stopped, moves under a new name to node2; the source goes.
	out, err = a.corral(append(append([]string{"instance", "move", "--dest-instance-name", "m1-moved",
		"--dest-primary-node", "node2", "--compress", "zstd"}, moveArgs(t, a, b)...), src, dst, "m1")...)
	if err != nil {
		t.Fatalf("move m1: %v\n%s", err, out)
	}
	t.Logf("move m1:\n%s", out)
	if got := b.diskSums("node2", "m1-moved"); strings.Join(got, " ") != strings.Join(sums["m1"], " ") {
		t.Errorf("m1-moved disks %v, want %v", got, sums["m1"])
	}
	nicRows, err := b.luxi.QueryInstances(t.Context(), []string{"m1-moved"}, []string{"nic.names", "nic.macs", "nic.ips", "nic.modes", "nic.links"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(nicRows[0]); got != "[[eth0] [aa:00:00:5e:00:01] [192.0.2.10] [routed] [rt1]]" {
		t.Errorf("m1-moved NICs %s, want the source's eth0", got)
	}
	if st := b.instanceField("m1-moved", "admin_state"); st != "down" {
		t.Errorf("m1-moved is %v, want down as the source was", st)
	}
	if rows, _ := a.luxi.QueryInstances(t.Context(), []string{"m1"}, []string{"name"}, false); len(rows) != 0 {
		t.Errorf("m1 is still on the source: %v", rows)
	}
	renames, _ := os.ReadFile(filepath.Join(osDir, "mover", "renames.log"))
	if !strings.Contains(string(renames), "old=m1 new=m1-moved") {
		t.Errorf("the rename script did not run with OLD_INSTANCE_NAME=m1: %q", renames)
	}

	// m2 runs: it moves with gzip, starts on the destination and stays on
	// the source as asked.
	out, err = a.corral(append(append([]string{"instance", "move", "--keep-source-instance", "--compress", "gzip"},
		moveArgs(t, a, b)...), src, dst, "m2")...)
	if err != nil {
		t.Fatalf("move m2: %v\n%s", err, out)
	}
	if !strings.Contains(out, "MiB") {
		t.Errorf("the move printed no progress:\n%s", out)
	}
	node := fmt.Sprint(b.instanceField("m2", "pnode"))
	if got := b.diskSums(node, "m2"); strings.Join(got, " ") != strings.Join(sums["m2"], " ") {
		t.Errorf("m2 disks on the destination %v, want %v", got, sums["m2"])
	}
	if st := b.instanceField("m2", "status"); st != "running" {
		t.Errorf("m2 on the destination is %v, want running", st)
	}
	if st := a.instanceField("m2", "admin_state"); st != "up" {
		t.Errorf("the kept source m2 is %v, want up again", st)
	}
	for _, c := range []*cluster{a, b} {
		if keys := c.transferKeys(); len(keys) != 0 {
			t.Errorf("transfer keys left behind: %v", keys)
		}
	}
}
