package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/ganetidropin"
)

// Ganeti's tools as Debian's ganeti package installs them.
const (
	gntDir      = "/usr/sbin"
	burninPath  = "/usr/lib/ganeti/tools/burnin"
	ganetiOSDir = "/usr/share/ganeti/os"
)

// requireGaneti skips without Ganeti's tools (and its noop OS), but fails
// when CORRAL_REQUIRE_GANETI=1 (CI).
func requireGaneti(t *testing.T) {
	t.Helper()
	requireRoot(t)
	for _, p := range []string{filepath.Join(gntDir, "gnt-cluster"), burninPath, filepath.Join(ganetiOSDir, "noop")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CORRAL_REQUIRE_GANETI") == "1" {
				t.Fatalf("Ganeti's tools are required (CORRAL_REQUIRE_GANETI=1) but %s is missing: install the ganeti and ganeti-os-noop packages (scripts/install-deps.sh)", p)
			}
			t.Skipf("Ganeti's tools are not installed (%s missing); scripts/install-deps.sh installs them", p)
		}
	}
}

// newDropinCluster brings up a dev cluster in Ganeti drop-in mode with
// nodes extra nodes, the fake hypervisor, and Corral's OS definitions
// followed by Ganeti's (noop).
func newDropinCluster(t *testing.T, nodes int) *cluster {
	t.Helper()
	requireGaneti(t)
	return newClusterWith(t, devcluster.Options{
		Nodes: nodes, Hypervisors: []string{"fake"}, GanetiDropin: true,
		OSDir: filepath.Join(repoDir, "os") + ":" + ganetiOSDir,
	})
}

// gnt runs one of Ganeti's tools against the cluster, as Ganeti's own
// documentation shows it, with the environment that points Ganeti at the
// drop-in root. It returns the combined output and the exit code.
func (c *cluster) gnt(tool string, args ...string) (string, int) {
	c.t.Helper()
	path := tool
	if !filepath.IsAbs(tool) {
		path = filepath.Join(gntDir, tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), c.st.GanetiEnv()...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	c.t.Fatalf("%s %v: %v\n%s", tool, args, err, out)
	return "", -1
}

// mustGnt runs a Ganeti tool and fails the test unless it exits 0 without
// a Python traceback.
func (c *cluster) mustGnt(tool string, args ...string) string {
	c.t.Helper()
	out, rc := c.gnt(tool, args...)
	if rc != 0 || strings.Contains(out, "Traceback") {
		c.t.Fatalf("%s %s: exit %d\n%s", tool, strings.Join(args, " "), rc, out)
	}
	return out
}

func (c *cluster) ganetiLayout() ganetidropin.Layout {
	return ganetidropin.Layout{Root: c.st.GanetiRoot}
}

// ssconf reads one of the cluster's ssconf files.
func (c *cluster) ssconf(key string) string {
	c.t.Helper()
	b, err := os.ReadFile(c.ganetiLayout().SsconfPath(key))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// TestGanetiDropinSocketsAndSsconf checks what Ganeti's tools rely on to
// find their master: the ssconf files, with Ganeti's format and modes,
// kept current as the configuration changes and across a restart of
// corrald, and the LUXI sockets, with the same access rules as Corral's.
func TestGanetiDropinSocketsAndSsconf(t *testing.T) {
	c := newDropinCluster(t, 1)
	l := c.ganetiLayout()
	if filepath.Base(l.Root) != "node1" {
		t.Fatalf("drop-in root %s: its last component must be the master's name for GANETI_ROOTDIR", l.Root)
	}
	for key, want := range map[string]string{
		"master_node":      "node1\n",
		"cluster_name":     "dev.corral\n",
		"node_list":        "node1\nnode2\n",
		"online_nodes":     "node1\nnode2\n",
		"master_ip":        c.st.IPs[0] + "\n",
		"node_primary_ips": "node1 " + c.st.IPs[0] + "\nnode2 " + c.st.IPs[1] + "\n",
		"instance_list":    "",
	} {
		if got := c.ssconf(key); got != want {
			t.Errorf("ssconf_%s = %q, want %q", key, got, want)
		}
	}
	group := ganetidropin.AccessGroup("corral-admin")
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	for _, k := range ganetidropin.Keys() {
		fi, err := os.Stat(l.SsconfPath(k))
		if err != nil {
			t.Fatalf("ssconf_%s: %v", k, err)
		}
		if fi.Mode().Perm() != ganetidropin.SsconfFileMode {
			t.Errorf("ssconf_%s: mode %v, want 0444", k, fi.Mode().Perm())
		}
	}
	for _, s := range l.Sockets() {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatalf("drop-in socket: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
			t.Errorf("%s: mode %v gid %d, want a socket 0660 of group %s (%d)", s, fi.Mode(), st.Gid, group, gid)
		}
	}
	// Only root, corrald's user and the access group get in.
	fi, err := os.Stat(l.SocketDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("socket directory %s is open to others: %v", l.SocketDir(), fi.Mode())
	}

	// Ganeti's own client (version 3000000 in every request) is served.
	if out := c.mustGnt("gnt-cluster", "getmaster"); strings.TrimSpace(out) != "node1" {
		t.Fatalf("gnt-cluster getmaster: %q", out)
	}

	// A change of the configuration reaches the files.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "diskless",
		"os_type": "tiny+default", "mode": "create", "pnode": "node2", "disks": []any{}, "nics": []any{},
		"name_check": false, "ip_check": false, "start": false, "hypervisor": "fake"})
	waitFor(t, 10*time.Second, "ssconf_instance_list to name web1", func() bool { return c.ssconf("instance_list") == "web1\n" })
	c.mustSucceed(map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "offline": true})
	waitFor(t, 10*time.Second, "ssconf_offline_nodes to name node2", func() bool {
		return c.ssconf("offline_nodes") == "node2\n" && c.ssconf("online_nodes") == "node1\n"
	})

	// The mode is part of the configuration: a restarted corrald keeps it.
	c.killCorrald()
	c.restartCorrald()
	if out := c.mustGnt("gnt-instance", "list", "--no-headers", "-o", "name"); strings.TrimSpace(out) != "web1" {
		t.Fatalf("gnt-instance list after a restart of corrald: %q", out)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web1"})
	waitFor(t, 10*time.Second, "ssconf_instance_list to be empty", func() bool { return c.ssconf("instance_list") == "" })
}

// TestGanetiDropinOffByDefault: a cluster not asked for drop-in mode
// creates nothing of Ganeti's.
func TestGanetiDropinOffByDefault(t *testing.T) {
	c := newClusterWith(t, devcluster.Options{Hypervisors: []string{"fake"}})
	if c.st.GanetiRoot != "" || len(c.st.GanetiEnv()) != 0 {
		t.Fatalf("drop-in root %q recorded without drop-in mode", c.st.GanetiRoot)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "ganeti")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Ganeti paths created without drop-in mode: %v", err)
	}
	log, err := os.ReadFile(c.proc("corrald").Log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "drop-in") {
		t.Fatalf("corrald runs drop-in mode unasked:\n%s", log)
	}
}
