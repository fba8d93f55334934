package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dirStatvfs is the test's own statvfs of dir, in MiB rounded as Ganeti
// rounds: the file system's size and the space free to unprivileged users.
func dirStatvfs(t *testing.T, dir string) (size, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	mib := func(blocks uint64) int64 {
		return int64(math.RoundToEven(float64(blocks) * float64(st.Frsize) / (1 << 20)))
	}
	return mib(st.Blocks), mib(st.Bavail)
}

// storageCheck compares one reported unit with the directory: the size
// equals statvfs, free lies within what statvfs said before and after the
// report (other work shares the file system), used is what the test put
// there.
type storageCheck struct {
	dir            string
	size, used     int64
	freeLo, freeHi int64
}

func (sc storageCheck) check(t *testing.T, who string, name string, size, used, free int64) {
	t.Helper()
	const slack = 16 // MiB written or freed by others between two readings
	if name != sc.dir || size != sc.size || used != sc.used || free < sc.freeLo-slack || free > sc.freeHi+slack {
		t.Errorf("%s: unit %s size %d used %d free %d; want %s size %d used %d free in [%d, %d]",
			who, name, size, used, free, sc.dir, sc.size, sc.used, sc.freeLo, sc.freeHi)
	}
}

// TestNodeStorageUnits lists the file storage units of two real nodes
// with corral, Ganeti's gnt-node (drop-in mode) and Ganeti's RAPI client,
// and checks each figure against the test's own statvfs of the node's
// directory and the files it put there; modify and repair are refused
// with Ganeti's reasons.
func TestNodeStorageUnits(t *testing.T) {
	requireRAPIClient(t)
	c := newDropinCluster(t, 1)
	s := devRAPI(t, c)
	nodes := []string{"node1", "node2"}
	dirs := map[string]string{}
	for _, n := range nodes {
		dirs[n] = filepath.Join(c.dir, n, "storage", "file")
		if err := os.MkdirAll(filepath.Join(dirs[n], "inst"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// node2 holds 3 MiB written and a 1 MiB sparse file: 4 MiB used.
	if err := os.WriteFile(filepath.Join(dirs["node2"], "inst", "a.raw"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dirs["node2"], "inst", "b.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	used := map[string]int64{"node1": 0, "node2": 4}

	// measured runs report, which lists the units, between two statvfs.
	measured := func(report func()) map[string]storageCheck {
		t.Helper()
		checks := map[string]storageCheck{}
		for _, n := range nodes {
			size, free := dirStatvfs(t, dirs[n])
			checks[n] = storageCheck{dir: dirs[n], size: size, used: used[n], freeLo: free, freeHi: free}
		}
		report()
		for _, n := range nodes {
			size, free := dirStatvfs(t, dirs[n])
			sc := checks[n]
			if size != sc.size {
				t.Fatalf("%s: the file system's size changed from %d to %d MiB", n, sc.size, size)
			}
			sc.freeLo, sc.freeHi = min(sc.freeLo, free), max(sc.freeHi, free)
			checks[n] = sc
		}
		return checks
	}
	atoi := func(s string) int64 {
		t.Helper()
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return v
	}
	// checkLines checks "node|name|size|used|free|allocatable" lines.
	checkLines := func(who, out string, checks map[string]storageCheck) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(nodes) {
			t.Fatalf("%s: %d lines, want one per node:\n%s", who, len(lines), out)
		}
		for i, l := range lines {
			f := strings.Split(l, "|")
			if len(f) != 6 || f[0] != nodes[i] || f[5] != "Y" {
				t.Fatalf("%s: line %q, want node %s, 6 fields, allocatable Y", who, l, nodes[i])
			}
			checks[f[0]].check(t, who+" "+f[0], f[1], atoi(f[2]), atoi(f[3]), atoi(f[4]))
		}
	}

	var out string
	checks := measured(func() {
		out, err = c.corral("node", "list-storage", "--storage-type", "file", "--no-headers", "--separator", "|",
			"-o", "node,name,size,used,free,allocatable")
		if err != nil {
			t.Fatalf("corral node list-storage: %v\n%s", err, out)
		}
	})
	checkLines("corral", out, checks)

	checks = measured(func() {
		out = c.mustGnt("gnt-node", "list-storage", "--storage-type", "file", "--no-headers", "--separator=|", "--units=m",
			"-o", "node,name,size,used,free,allocatable")
	})
	checkLines("gnt-node", out, checks)

	// The human table names its columns as Ganeti's.
	if out, err := c.corral("node", "list-storage", "node2"); err != nil || !strings.HasPrefix(out, "Node ") ||
		!strings.Contains(out, "Allocatable") || !strings.Contains(out, dirs["node2"]) || strings.Contains(out, dirs["node1"]) {
		t.Errorf("corral node list-storage node2: %v\n%s", err, out)
	}

	// Ganeti's RAPI client: the query is a job whose result is the rows.
	var r map[string]any
	checks = measured(func() {
		cmd := exec.Command("/usr/bin/python3", filepath.Join(repoDir, "test/e2e/testdata/rapi/storage.py"),
			"node2", "file", "name,size,used,free,allocatable", dirs["node2"])
		cmd.Env = s.vars
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("storage.py: %v\n%s", err, stderr.String())
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("storage.py output %q: %v", b, err)
		}
	})
	job := func(step string) (string, string) {
		j, _ := r[step].(map[string]any)
		st, _ := j["status"].(string)
		b, _ := json.Marshal(j["opresult"])
		return st, string(b)
	}
	st, res := job("query")
	var rows [][][]any
	if err := json.Unmarshal([]byte(res), &rows); st != "success" || err != nil || len(rows) != 1 || len(rows[0]) != 1 || len(rows[0][0]) != 5 {
		t.Fatalf("GetNodeStorageUnits: %s %s (%v)", st, res, err)
	}
	row := rows[0][0]
	num := func(v any) int64 { x, _ := v.(float64); return int64(x) }
	checks["node2"].check(t, "rapi node2", fmt.Sprint(row[0]), num(row[1]), num(row[2]), num(row[3]))
	if row[4] != true {
		t.Errorf("rapi: allocatable %v", row[4])
	}
	for step, want := range map[string]string{
		"modify":     "Storage units of type 'file' can not be modified",
		"repair":     "Storage units of type 'file' can not be repaired",
		"modify_lvm": "No disk template of storage type 'lvm-vg' is enabled",
		"repair_lvm": "no device-mapper",
	} {
		if st, res := job(step); st != "error" || !strings.Contains(res, want) || !strings.Contains(res, "OpPrereqError") {
			t.Errorf("%s: %s %s, want an OpPrereqError with %q", step, st, res, want)
		}
	}

	// corral over RAPI (remote mode): one node per job, as the resource.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(s.env.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "corral"), append([]string{"--rapi", s.env.URL, "--rapi-user", s.env.User,
			"--rapi-password-file", pw, "--rapi-ca", s.env.CA}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	checks = measured(func() {
		out, err = remote("node", "list-storage", "-t", "file", "--no-headers", "--separator", "|", "-o", "node,name,size,used,free,allocatable", "node2")
		if err != nil {
			t.Fatalf("corral --rapi node list-storage node2: %v\n%s", err, out)
		}
	})
	if f := strings.Split(strings.TrimSpace(out), "|"); len(f) != 6 || f[0] != "node2" || f[5] != "Y" {
		t.Errorf("corral --rapi node list-storage node2: %q", out)
	} else {
		checks["node2"].check(t, "corral --rapi node2", f[1], atoi(f[2]), atoi(f[3]), atoi(f[4]))
	}
	if out, err := remote("node", "list-storage", "-t", "file"); err == nil || !strings.Contains(out, "not available over RAPI") {
		t.Errorf("corral --rapi node list-storage of every node: %v\n%s", err, out)
	}
	if out, err := remote("node", "modify-storage", "--allocatable=yes", "node1", "lvm-pv", "/dev/sdb1"); err == nil || !strings.Contains(out, "no device-mapper") {
		t.Errorf("corral --rapi node modify-storage: %v\n%s", err, out)
	}

	// The refusals through both command lines, and an LVM listing.
	for _, cmd := range []struct {
		gnt  bool
		args []string
		want string
	}{
		{false, []string{"node", "list-storage", "--storage-type", "lvm-vg"}, "no device-mapper"},
		{false, []string{"node", "modify-storage", "--allocatable=no", "node2", "lvm-pv", "/dev/sdb1"}, "no device-mapper"},
		{false, []string{"node", "repair-storage", "node2", "file", dirs["node2"]}, "Storage units of type 'file' can not be repaired"},
		{true, []string{"modify-storage", "--allocatable=no", "node2", "file", dirs["node2"]}, "Storage units of type 'file' can not be modified"},
		{true, []string{"repair-storage", "node1", "lvm-vg", "xenvg"}, "no device-mapper"},
		{true, []string{"list-storage", "--storage-type", "lvm-pv"}, "No disk template of storage type 'lvm-vg' is enabled"},
	} {
		var out string
		var failed bool
		if cmd.gnt {
			var rc int
			out, rc = c.gnt("gnt-node", cmd.args...)
			failed = rc != 0
		} else {
			var err error
			out, err = c.corral(cmd.args...)
			failed = err != nil
		}
		if !failed || !strings.Contains(out, cmd.want) || strings.Contains(out, "Traceback") {
			t.Errorf("%v (gnt %v): failed %v, output %s; want %q", cmd.args, cmd.gnt, failed, out, cmd.want)
		}
	}
}
