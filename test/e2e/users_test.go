package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/nodeserver"
)

// procIDs is a process's identity from /proc/PID/status: real, effective,
// saved and filesystem uids and gids, and its supplementary groups.
type procIDs struct {
	uids, gids, groups []string
}

func readProcIDs(t *testing.T, pid int) procIDs {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	var ids procIDs
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Uid":
			ids.uids = strings.Fields(v)
		case "Gid":
			ids.gids = strings.Fields(v)
		case "Groups":
			ids.groups = strings.Fields(v)
		}
	}
	if len(ids.uids) != 4 || len(ids.gids) != 4 {
		t.Fatalf("pid %d: status without Uid/Gid lines:\n%s", pid, b)
	}
	return ids
}

// credential is the identity of ids, for running a command as the process.
func (ids procIDs) credential(t *testing.T) *syscall.Credential {
	t.Helper()
	num := func(s string) uint32 {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(n)
	}
	c := &syscall.Credential{Uid: num(ids.uids[1]), Gid: num(ids.gids[1]), Groups: []uint32{}}
	for _, g := range ids.groups {
		c.Groups = append(c.Groups, num(g))
	}
	return c
}

// TestDaemonUsers checks the security model on a running dev cluster: each
// daemon under its user (corrald corral-master, corral-node root,
// corral-rapi corral-rapi), the owners and modes of the state, the RAPI
// process unable to read the cluster's secrets, and each daemon refusing to
// start as a wrong user with a message naming the right one.
func TestDaemonUsers(t *testing.T) {
	c := newCluster(t, clusterOpts{hypervisors: []string{"fake"}})
	adminGID, err := bootstrap.GroupID(bootstrap.AdminGroup)
	if err != nil {
		t.Fatal(err)
	}
	admin := strconv.Itoa(adminGID)
	acct := func(name string) bootstrap.Account {
		a, err := bootstrap.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	masterAcct, rapiAcct := acct(bootstrap.MasterUser), acct(bootstrap.RAPIUser)
	rootAcct := bootstrap.Account{Name: "root"}

	var rapiIDs procIDs
	for _, want := range []struct {
		proc   string
		acct   bootstrap.Account
		groups []string
	}{
		{"corrald", masterAcct, []string{admin}},
		{"corral-node node1", rootAcct, nil},
		{devcluster.RAPIName, rapiAcct, []string{admin}},
	} {
		p := c.proc(want.proc)
		ids := readProcIDs(t, p.PID)
		uid, gid := strconv.Itoa(want.acct.UID), strconv.Itoa(want.acct.GID)
		if slices.ContainsFunc(ids.uids, func(u string) bool { return u != uid }) {
			t.Errorf("%s (pid %d): Uid %v, want %s (%s) throughout", want.proc, p.PID, ids.uids, uid, want.acct.Name)
		}
		if slices.ContainsFunc(ids.gids, func(g string) bool { return g != gid }) {
			t.Errorf("%s (pid %d): Gid %v, want %s throughout", want.proc, p.PID, ids.gids, gid)
		}
		if !slices.Equal(ids.groups, want.groups) {
			t.Errorf("%s (pid %d): Groups %v, want %v", want.proc, p.PID, ids.groups, want.groups)
		}
		if want.proc == devcluster.RAPIName {
			rapiIDs = ids
		}
	}

	// The owners and modes docs/SECURITY.md lists for a dev cluster.
	l := bootstrap.Layout{StateDir: c.dir, RunDir: c.st.RunDir}
	md, nd := l.MasterDir(), l.NodeDir("node1")
	for _, f := range []struct {
		path        string
		mode        os.FileMode
		user, group bootstrap.Account
		groupID     int // overrides group when > 0
	}{
		{md, os.ModeDir | 0o700, masterAcct, masterAcct, 0},
		{filepath.Join(md, master.FileCAKey), 0o400, masterAcct, masterAcct, 0},
		{filepath.Join(md, master.FileCA), 0o644, masterAcct, masterAcct, 0},
		{filepath.Join(md, master.FileMasterKey), 0o600, masterAcct, masterAcct, 0},
		{filepath.Join(md, master.FileDomainSecret), 0o400, masterAcct, masterAcct, 0},
		{filepath.Join(md, master.FileStore), 0o600, masterAcct, masterAcct, 0},
		{l.RAPIDir(), os.ModeDir | 0o700, rapiAcct, rapiAcct, 0},
		{l.RAPIKey(), 0o600, rapiAcct, rapiAcct, 0},
		{l.RAPIUsers(), 0o600, rapiAcct, rapiAcct, 0},
		{l.MasterRunDir(), os.ModeDir | 0o750, masterAcct, masterAcct, adminGID},
		{l.Socket(), os.ModeSocket | 0o660, masterAcct, masterAcct, adminGID},
		{nd, os.ModeDir | 0o700, rootAcct, rootAcct, 0},
		{filepath.Join(nd, nodeserver.FileKey), 0o600, rootAcct, rootAcct, 0},
		{filepath.Join(c.dir, devcluster.RAPIEnvFile), 0o600, rootAcct, rootAcct, 0},
	} {
		fi, err := os.Lstat(f.path)
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		gid := f.group.GID
		if f.groupID > 0 {
			gid = f.groupID
		}
		if fi.Mode() != f.mode || int(st.Uid) != f.user.UID || int(st.Gid) != gid {
			t.Errorf("%s: %v %d:%d, want %v %d:%d", f.path, fi.Mode(), st.Uid, st.Gid, f.mode, f.user.UID, gid)
		}
	}

	// corral-rapi's identity reads its own key (so a refusal below is about
	// permissions, not a broken command) and none of the cluster's secrets.
	cred := rapiIDs.credential(t)
	cat := func(path string) (string, error) {
		cmd := exec.Command("/bin/cat", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cat(l.RAPIKey()); err != nil {
		t.Fatalf("corral-rapi's identity cannot read its own key: %v: %s", err, out)
	}
	for _, f := range []string{master.FileCAKey, master.FileDomainSecret, master.FileMasterKey, master.FileStore} {
		p := filepath.Join(md, f)
		if out, err := cat(p); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("corral-rapi's identity reading %s: err %v, output %q; want permission denied", p, err, out)
		}
	}

	// Each daemon started as a wrong user refuses at once, naming the user
	// it must run as.
	tmp := t.TempDir()
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	asUser := func(user string, bin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", user, "--", filepath.Join(binDir, bin)}, args...)...)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("%s as %s started instead of refusing: %s", bin, user, out)
		}
		if err == nil {
			t.Fatalf("%s as %s exited 0: %s", bin, user, out)
		}
		return string(out)
	}
	rapiArgs := []string{"--bind", "127.0.0.1", "--port", "0", "--cert", l.RAPICert(), "--key", l.RAPIKey(),
		"--users", l.RAPIUsers(), "--luxi-socket", l.Socket()}
	for _, tc := range []struct {
		user, bin string
		args      []string
		want      []string
	}{
		{bootstrap.RAPIUser, "corrald", []string{"--state-dir", c.dir, "--run-dir", tmp},
			[]string{"belongs to " + bootstrap.MasterUser, "must run as " + bootstrap.MasterUser, "runuser -u " + bootstrap.MasterUser}},
		{bootstrap.MasterUser, "corral-node", []string{"--state-dir", nd, "--run-dir", tmp, "--listen", "127.0.0.1:0"},
			[]string{"corral-node must run as root", "runs as " + bootstrap.MasterUser}},
		{bootstrap.MasterUser, "corral-rapi", rapiArgs,
			[]string{"must not run as " + bootstrap.MasterUser, "run it as " + bootstrap.RAPIUser}},
		{bootstrap.QemuUser, "corral-rapi", rapiArgs,
			[]string{"cannot read its TLS key " + l.RAPIKey(), "belongs to " + bootstrap.RAPIUser, "run it as " + bootstrap.RAPIUser}},
	} {
		out := asUser(tc.user, tc.bin, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s as %s: %q lacks %q", tc.bin, tc.user, out, w)
			}
		}
	}
}
