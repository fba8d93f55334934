package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/layout"
)

// diskPath is where an instance's disk N lives, from activate-disks'
// answer [[node, "disk/N", path], ...].
func (c *cluster) diskPath(inst string, idx int) string {
	c.t.Helper()
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": inst, "ignore_size": true})
	rows, _ := res[0].([]any)
	if idx >= len(rows) {
		c.t.Fatalf("activate-disks of %s: %v, no disk %d", inst, res, idx)
	}
	row, _ := rows[idx].([]any)
	p, _ := row[2].(string)
	if p == "" {
		c.t.Fatalf("activate-disks of %s: row %v has no path", inst, row)
	}
	return p
}

// TestClusterVersionAndMaster: `corral version` and `cluster getmaster`
// answer as gnt-cluster's version and getmaster do, and Ganeti's own
// tools print the same through drop-in mode.
func TestClusterVersionAndMaster(t *testing.T) {
	c := newDropinCluster(t, 1)
	out, err := c.corral("version")
	if err != nil || !strings.HasPrefix(out, "Software version: "+layout.Version+"\n") ||
		!strings.Contains(out, "\nInternode protocol: ") || !strings.Contains(out, "\nVCS version: corral "+layout.Version+"\n") {
		t.Errorf("corral version: %v\n%s", err, out)
	}
	if alias, err := c.corral("cluster", "version"); err != nil || alias != out {
		t.Errorf("corral cluster version differs from corral version: %v\n%s", err, alias)
	}
	gnt := c.mustGnt("gnt-cluster", "version")
	if !strings.HasPrefix(gnt, "Software version: "+layout.Version+"\n") || len(strings.Split(gnt, "\n")) != len(strings.Split(out, "\n")) {
		t.Errorf("gnt-cluster version:\n%s\ncorral version:\n%s", gnt, out)
	}
	if out, err := c.corral("cluster", "getmaster"); err != nil || out != "node1\n" {
		t.Errorf("corral cluster getmaster: %v %q, want node1", err, out)
	}
	if out := c.mustGnt("gnt-cluster", "getmaster"); out != "node1\n" {
		t.Errorf("gnt-cluster getmaster: %q, want node1", out)
	}

	// Rename, and back with Ganeti's tool; the ssconf files follow.
	if out, err := c.corral("cluster", "rename", "prod.example"); err == nil || !strings.Contains(out, "add -f to go ahead") {
		t.Errorf("rename without -f and without a terminal: %v\n%s", err, out)
	}
	if out, err := c.corral("cluster", "rename", "-f", "prod.example"); err != nil || !strings.Contains(out, "Cluster renamed from 'dev.corral' to 'prod.example'") {
		t.Errorf("corral cluster rename: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "ssconf_cluster_name after the rename", func() bool { return c.ssconf("cluster_name") == "prod.example\n" })
	if out, err := c.corral("cluster", "rename", "-f", "prod.example"); err == nil || !strings.Contains(out, "Neither the name nor the IP address of the cluster has changed") {
		t.Errorf("rename to the same name: %v\n%s", err, out)
	}
	if out := c.mustGnt("gnt-cluster", "rename", "-f", "dev.corral"); !strings.Contains(out, "Cluster renamed from 'prod.example' to 'dev.corral'") {
		t.Errorf("gnt-cluster rename: %s", out)
	}
	if got := c.mustGnt("gnt-cluster", "info"); !strings.Contains(got, "dev.corral") {
		t.Errorf("gnt-cluster info after renaming back:\n%s", got)
	}
}

// TestClusterVerifyAndRepairDisks: verify-disks finds a disk file that is
// missing and one that is shorter than recorded, through the CLI and
// gnt-cluster; repair-disk-sizes records the short one's real size, after
// which only the missing one is reported.
func TestClusterVerifyAndRepairDisks(t *testing.T) {
	c := newDropinCluster(t, 1)
	for _, name := range []string{"web1", "web2"} {
		c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
			"disks": []any{map[string]any{"size": 64}}, "nics": []any{}, "os_type": "tiny+default",
			"hypervisor": "fake", "start": false})
	}
	if out, err := c.corral("cluster", "verify-disks"); err != nil || !strings.Contains(out, "No disks need to be activated.") {
		t.Fatalf("verify-disks of a sound cluster: %v\n%s", err, out)
	}
	short, missing := c.diskPath("web1", 0), c.diskPath("web2", 0)
	if err := os.Truncate(short, 32<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}

	out, err := c.corral("cluster", "verify-disks")
	if err == nil || !strings.Contains(out, "Instance web1 has missing or short disks:\n\tnode") || !strings.Contains(out, short) ||
		!strings.Contains(out, "Instance web2 has missing or short disks:\n\tnode") || !strings.Contains(out, " disk/0\n") {
		t.Errorf("verify-disks with a short and a missing disk: %v\n%s", err, out)
	}
	gnt, rc := c.gnt("gnt-cluster", "verify-disks")
	if rc != 1 || strings.Contains(gnt, "Traceback") || !strings.Contains(gnt, "Instance web2 has missing logical volumes:") ||
		!strings.Contains(gnt, "Instance web1 has missing logical volumes:") {
		t.Errorf("gnt-cluster verify-disks: exit %d\n%s", rc, gnt)
	}

	// Only web2 named: web1's short disk stays recorded at 64 MiB.
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": []any{"web2"}})
	if b, _ := json.Marshal(res); string(b) != `[[]]` {
		t.Errorf("repair of web2 (its disk is missing): %s, want nothing changed", b)
	}
	if out, err := c.corral("cluster", "repair-disk-sizes"); err != nil || !strings.Contains(out, "Disk 0 of instance web1 has mismatched size, correcting: recorded 64, actual 32") {
		t.Errorf("corral cluster repair-disk-sizes: %v\n%s", err, out)
	}
	if sizes, _ := c.instanceField("web1", "disk.sizes").([]any); len(sizes) != 1 || sizes[0] != 32.0 {
		t.Errorf("web1's disk sizes after the repair: %v, want [32]", sizes)
	}
	res = c.mustSucceed(map[string]any{"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES"})
	if b, _ := json.Marshal(res); string(b) != `[[]]` {
		t.Errorf("a second repair: %s, want nothing changed", b)
	}
	c.mustGnt("gnt-cluster", "repair-disk-sizes")

	out, err = c.corral("cluster", "verify-disks")
	if err == nil || strings.Contains(out, "web1") || !strings.Contains(out, "Instance web2 has missing or short disks:") {
		t.Errorf("verify-disks after the repair: %v\n%s", err, out)
	}
}

// TestNodeModifyParamsAndReadd: node parameters and the secondary IP
// change with Ganeti's rules (the node must own the address), and a node
// that was offline and lost its certificate joins again with a readd
// token and is re-added with its uuid and flags reset.
func TestNodeModifyParamsAndReadd(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	if out, err := c.corral("node", "modify", "node2", "-N", "ssh_port=2222,spindle_count=3"); err != nil {
		t.Fatalf("node modify -N: %v\n%s", err, out)
	}
	nd, _ := c.nodeField("node2", "ndparams").(map[string]any)
	custom, _ := c.nodeField("node2", "custom_ndparams").(map[string]any)
	if nd["ssh_port"] != 2222.0 || nd["spindle_count"] != 3.0 || len(custom) != 2 {
		t.Errorf("node2 ndparams %v, custom %v; want ssh_port 2222, spindle_count 3", nd, custom)
	}
	if out, err := c.corral("node", "modify", "node2", "-N", "-ssh_port"); err != nil {
		t.Fatalf("node modify -N -ssh_port: %v\n%s", err, out)
	}
	if nd, _ := c.nodeField("node2", "ndparams").(map[string]any); nd["ssh_port"] != 22.0 {
		t.Errorf("ssh_port after the reset: %v, want 22", nd["ssh_port"])
	}
	if out, err := c.corral("node", "modify", "node2", "-N", "exclusive_storage=true"); err == nil || !strings.Contains(out, "global and cannot be customized at node level") {
		t.Errorf("node modify -N exclusive_storage: %v\n%s", err, out)
	}

	// The cluster is single-homed: only the master, with force, gets a
	// second address, and only one its node owns.
	// Every loopback address is the node's own (the dev cluster's nodes
	// share the machine); no node has this one.
	const spare = "127.0.99.7"
	if out, err := c.corral("node", "modify", "node2", "-s", spare); err == nil || !strings.Contains(out, "requires the --force option") {
		t.Errorf("secondary IP of node2 on a single-homed cluster: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "modify", "node1", "-s", "192.0.2.77", "--force"); err == nil || !strings.Contains(out, "doesn't have the secondary ip you gave (192.0.2.77)") {
		t.Errorf("secondary IP the node does not own: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "modify", "node1", "-s", spare, "--force"); err != nil || !strings.Contains(out, "secondary_ip -> "+spare) {
		t.Errorf("secondary IP of the master with force: %v\n%s", err, out)
	}
	if got := c.nodeField("node1", "sip"); got != spare {
		t.Errorf("node1 sip %v, want %s", got, spare)
	}

	// node2 goes offline, and its node daemon loses its certificate.
	id := c.nodeField("node2", "uuid")
	c.stopDaemon("corral-node node2")
	c.mustSucceed(map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "offline": true})
	nodeDir := filepath.Join(c.st.StateDir, "node2")
	for _, f := range []string{"node.pem", "node.key"} {
		if err := os.Remove(filepath.Join(nodeDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.corral("node", "join-token", "node2"); err == nil || !strings.Contains(out, "already in the cluster") {
		t.Errorf("join token for a node in the cluster without --readd: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "join-token", "node1", "--readd"); err == nil || !strings.Contains(out, "Cannot readd the master node") {
		t.Errorf("readd token for the master: %v\n%s", err, out)
	}
	out, err := c.corral("node", "join-token", "node2", "--readd")
	if err != nil || !strings.Contains(out, "corral node add --readd node2") {
		t.Fatalf("readd join token: %v\n%s", err, out)
	}
	token := strings.Fields(strings.SplitN(out, "\n", 3)[1])[0]
	join := exec.Command(filepath.Join(binDir, "corral-node"), "join", "--state-dir", nodeDir)
	join.Env = append(os.Environ(), "CORRAL_JOIN_TOKEN="+token)
	if b, err := join.CombinedOutput(); err != nil {
		t.Fatalf("corral-node join: %v\n%s", err, b)
	}
	c.startDaemon("corral-node node2")

	if out, err := c.corral("node", "add", "--readd", "--group", "default", "node2"); err == nil || !strings.Contains(out, "Cannot pass a node group when a node is being readded") {
		t.Errorf("readd with a group: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "add", "--readd", "node2"); err != nil {
		t.Fatalf("node add --readd: %v\n%s", err, out)
	}
	if c.nodeField("node2", "offline") != false || c.nodeField("node2", "uuid") != id {
		t.Errorf("after the readd: offline %v, uuid %v (was %v)", c.nodeField("node2", "offline"), c.nodeField("node2", "uuid"), id)
	}
	// The node answers the master again with its new certificate.
	c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.1, "on_master": false, "on_nodes": []any{"node2"}})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 16}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "pnode": "node2", "start": true})
}

// TestClusterCommandAndCopyFile: `cluster command` runs as root on each
// selected node through its node daemon (the master's node last) and
// prints gnt-cluster's layout; `cluster copyfile` has each node but the
// master's write the file; a node daemon with --cluster-commands=false
// refuses both; and corrald takes neither from a non-root member of
// corral-admin.
func TestClusterCommandAndCopyFile(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")

	out, err := c.corral("cluster", "command", "echo $CORRAL_NODE_NAME >> "+ran+"; id -u; exit 3")
	if err != nil {
		t.Fatalf("cluster command: %v\n%s", err, out)
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		if !strings.Contains(out, "------------------------------------------------\nnode: "+n+"\n0\n\nreturn code = 3\n") {
			t.Errorf("cluster command output lacks node %s's part:\n%s", n, out)
		}
	}
	if b, err := os.ReadFile(ran); err != nil || string(b) != "node2\nnode3\nnode1\n" {
		t.Errorf("the nodes that ran the command, in order: %q (%v), want node2, node3, then the master's node1", b, err)
	}
	out, err = c.corral("cluster", "command", "-n", "node3", "-M", "echo one; echo two")
	if err != nil || out != "------------------------------------------------\nnode3: one\nnode3: two\nreturn code = 0\n" {
		t.Errorf("cluster command -n node3 -M: %v\n%q", err, out)
	}
	if out, err := c.corral("cluster", "command", "--failure-only", "true"); err != nil || out != "" {
		t.Errorf("cluster command --failure-only true: %v\n%q", err, out)
	}

	src := filepath.Join(dir, "motd")
	if err := os.WriteFile(src, []byte("hello nodes\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A second name keeps the original file (and its inode) alive.
	orig := src + ".orig"
	if err := os.Link(src, orig); err != nil {
		t.Fatal(err)
	}
	offs := map[string]int64{}
	for _, n := range []string{"node1", "node2", "node3"} {
		offs[n] = c.logSize("corral-node " + n)
	}
	if out, err := c.corral("cluster", "copyfile", src); err != nil {
		t.Fatalf("cluster copyfile: %v\n%s", err, out)
	}
	// The dev cluster's nodes share one disk: each node's write replaced
	// the file (a new inode) with the same content and mode.
	b, err := os.ReadFile(src)
	fi, _ := os.Stat(src)
	fo, _ := os.Stat(orig)
	if err != nil || string(b) != "hello nodes\n" || fi.Mode().Perm() != 0o640 || os.SameFile(fi, fo) {
		t.Errorf("after copyfile: %q %v, mode %v, still the original file: %v", b, err, fi.Mode().Perm(), os.SameFile(fi, fo))
	}
	for n, wrote := range map[string]bool{"node1": false, "node2": true, "node3": true} {
		log := c.logSince("corral-node "+n, offs[n])
		if strings.Contains(log, "wrote a copied file") != wrote || (wrote && !strings.Contains(log, src)) {
			t.Errorf("node %s's log after copyfile (want a write: %v):\n%s", n, wrote, log)
		}
		if strings.Contains(log, "hello nodes") {
			t.Errorf("node %s logged the file's content", n)
		}
	}
	// The finished job keeps neither the content nor a secret of it.
	jobs, err := c.corral("job", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(jobs), "\n")
	last := strings.Fields(lines[len(lines)-1])[0]
	if info, err := c.corral("job", "info", last); err != nil || !strings.Contains(info, "CLUSTER_COPY_FILE") || strings.Contains(info, "aGVsbG8gbm9kZXMK") {
		t.Errorf("job info of the copy: %v\n%s", err, info)
	}

	// A node daemon that refuses cluster commands.
	c.stopDaemon("corral-node node3")
	c.startDaemon("corral-node node3", "CORRAL_NODE_CLUSTER_COMMANDS=false")
	out, err = c.corral("cluster", "command", "-n", "node2,node3", "true")
	if err == nil || !strings.Contains(out, "node: node3\nFailure: ") || !strings.Contains(out, "--cluster-commands=false") ||
		!strings.Contains(out, "node: node2\n\nreturn code = 0") {
		t.Errorf("cluster command with node3 refusing: %v\n%s", err, out)
	}
	if out, err := c.corral("cluster", "copyfile", "-n", "node3", src); err == nil || !strings.Contains(out, "Copy of file "+src+" to node node3 failed") {
		t.Errorf("copyfile to node3 refusing: %v\n%s", err, out)
	}

	// corral-rapi is in corral-admin and may use the socket, but not
	// for these.
	cmd := exec.Command("setpriv", "--reuid=corral-rapi", "--regid=corral-rapi", "--init-groups", filepath.Join(binDir, "corral"), "cluster", "command", "touch "+ran+".rapi")
	cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+c.st.Socket)
	b, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "only root on the master's LUXI socket may submit it, not uid") {
		t.Errorf("cluster command as corral-rapi: %v\n%s", err, b)
	}
	if _, err := os.Stat(ran + ".rapi"); err == nil {
		t.Error("the command submitted by corral-rapi ran")
	}
}

// TestClusterRedistConf: redist-conf, through the CLI, gnt-cluster and
// Ganeti's RAPI client (PUT /2/redistribute-config), writes again an
// ssconf file that was damaged on disk, which the ssconf writer would
// otherwise leave until its value changes.
func TestClusterRedistConf(t *testing.T) {
	requireRAPIClient(t)
	c := newDropinCluster(t, 1)
	s := devRAPI(t, c)
	path := c.ganetiLayout().SsconfPath("cluster_name")
	want := c.ssconf("cluster_name")
	damage := func() {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("garbage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restored := func(how string) {
		t.Helper()
		b, err := os.ReadFile(path)
		fi, _ := os.Stat(path)
		if err != nil || string(b) != want || fi.Mode().Perm() != 0o444 {
			t.Errorf("ssconf_cluster_name after %s: %q %v, mode %v; want %q, 0444", how, b, err, fi.Mode().Perm(), want)
		}
	}

	damage()
	if out, err := c.corral("cluster", "redist-conf"); err != nil || !strings.Contains(out, "Checked and rewrote the ssconf files") {
		t.Errorf("corral cluster redist-conf: %v\n%s", err, out)
	}
	restored("corral cluster redist-conf")

	damage()
	c.mustGnt("gnt-cluster", "redist-conf")
	restored("gnt-cluster redist-conf")

	damage()
	r := s.py(t, "redist")
	if v, _ := r["redist"].(map[string]any); v["ok"] != true || v["status"] != "success" {
		t.Errorf("RedistributeConfig: %v", r["redist"])
	}
	restored("RAPI's RedistributeConfig")
}

// TestNodePowercycleThroughMachine: a node linked to a bare-metal machine
// (node parameter machine) is power cycled by a child job of the
// bare-metal conductor, through the CLI and Ganeti's RAPI client; a node
// without the link, an unknown machine and the master's node without
// force are refused.
func TestNodePowercycleThroughMachine(t *testing.T) {
	requireRAPIClient(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	s := devRAPI(t, c)
	if out, err := c.corral("node", "powercycle", "--yes-do-it", "node2"); err == nil || !strings.Contains(out, "has no out-of-band power control") {
		t.Errorf("powercycle of a node without a machine: %v\n%s", err, out)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_MACHINE_CREATE", "name": "bm1", "driver": "fake-hardware"})
	if out, err := c.corral("node", "modify", "node2", "-N", "machine=bm9"); err != nil {
		t.Fatalf("node modify -N machine=bm9: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "powercycle", "--yes-do-it", "node2"); err == nil || !strings.Contains(out, "runs on machine 'bm9', which the cluster does not manage") {
		t.Errorf("powercycle with an unknown machine: %v\n%s", err, out)
	}
	if out, err := c.corral("node", "modify", "node2", "-N", "machine=bm1"); err != nil {
		t.Fatalf("node modify -N machine=bm1: %v\n%s", err, out)
	}
	powerState := func() string {
		out, err := c.corral("baremetal", "node", "show", "bm1", "-o", "json")
		var m map[string]any
		if err != nil || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("baremetal node show bm1: %v\n%s", err, out)
		}
		return fmt.Sprint(m["power_state"])
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": "bm1", "target": "power off"})
	if got := powerState(); got != "power off" {
		t.Fatalf("bm1 after power off: %s", got)
	}
	out, err := c.corral("node", "powercycle", "--yes-do-it", "node2")
	if err != nil || !strings.Contains(out, "Node node2: job ") || !strings.Contains(out, " reboots machine bm1") {
		t.Fatalf("node powercycle node2: %v\n%s", err, out)
	}
	var child int64
	fmt.Sscanf(out[strings.Index(out, "Node node2: job "):], "Node node2: job %d", &child)
	if status, res := c.waitJob(child, time.Minute); status != "success" {
		t.Fatalf("power job %d: %s %v", child, status, res)
	}
	if got := powerState(); got != "power on" {
		t.Errorf("bm1 after the power cycle: %s, want power on", got)
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": "bm1", "target": "power off"})
	r := s.py(t, "powercycle", "node2", "node1")
	if v, _ := r["node"].(map[string]any); v["ok"] != true || v["status"] != "success" {
		t.Errorf("PowercycleNode(node2): %v", r["node"])
	}
	if v, _ := r["master"].(map[string]any); v["ok"] != false || v["status"] != "error" {
		t.Errorf("PowercycleNode(master) without force: %v, want a failed job", r["master"])
	}
	waitFor(t, time.Minute, "bm1 powered on by the RAPI power cycle", func() bool { return powerState() == "power on" })
}
