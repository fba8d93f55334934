package systemd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/privsep"
)

var units = []string{"corrald.service", "corral-node.service", "corral-rapi.service", "corral.target"}

// unit is a parsed unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func (u unit) get(section, key string) []string { return u[section][key] }

func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u.get(section, key)
	if len(v) != 1 {
		t.Fatalf("[%s] %s: %q, want exactly one", section, key, v)
	}
	return v[0]
}

func parse(t *testing.T, name string) unit {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is no key=value in a section", name, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUnitsMatchTheSecurityModel checks the units' users and paths against
// the ones the code uses, and the hardening each daemon gets.
func TestUnitsMatchTheSecurityModel(t *testing.T) {
	l := bootstrap.Layout{StateDir: bootstrap.DefaultStateDir, RunDir: bootstrap.DefaultRunDir}
	for _, tc := range []struct {
		file, user, group, supplementary string
		exec                             []string // ExecStart must hold each
	}{
		{"corrald.service", bootstrap.MasterUser, bootstrap.MasterUser, bootstrap.AdminGroup,
			[]string{"/usr/sbin/corrald ", "--state-dir=" + l.StateDir, "--run-dir=" + l.RunDir}},
		{"corral-node.service", "root", "root", "",
			[]string{"/usr/sbin/corral-node ", "--state-dir=" + l.NodeDir(""), "--run-dir=" + l.NodeRunDir("")}},
		{"corral-rapi.service", bootstrap.RAPIUser, bootstrap.RAPIUser, bootstrap.AdminGroup,
			[]string{"/usr/sbin/corral-rapi ", "--luxi-socket=" + l.Socket(), "--cert=" + l.RAPICert(), "--key=" + l.RAPIKey(), "--users=" + l.RAPIUsers()}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			u := parse(t, tc.file)
			if got := u.one(t, "Service", "User"); got != tc.user {
				t.Errorf("User=%s, want %s", got, tc.user)
			}
			if got := u.one(t, "Service", "Group"); got != tc.group {
				t.Errorf("Group=%s, want %s", got, tc.group)
			}
			if got := strings.Join(u.get("Service", "SupplementaryGroups"), " "); got != tc.supplementary {
				t.Errorf("SupplementaryGroups=%s, want %s", got, tc.supplementary)
			}
			ex := u.one(t, "Service", "ExecStart")
			for _, w := range tc.exec {
				if !strings.Contains(ex, w) {
					t.Errorf("ExecStart=%s lacks %q", ex, w)
				}
			}
			if got := u.one(t, "Service", "Restart"); got != "on-failure" {
				t.Errorf("Restart=%s, want on-failure", got)
			}
			if got := u.get("Install", "WantedBy"); !slices.Equal(got, []string{"corral.target"}) {
				t.Errorf("WantedBy=%q, want corral.target", got)
			}
			if got := u.get("Unit", "PartOf"); !slices.Equal(got, []string{"corral.target"}) {
				t.Errorf("PartOf=%q, want corral.target", got)
			}
			if tc.user == "root" {
				// Instances are the node daemon's children: they must
				// outlive its restart.
				if got := u.one(t, "Service", "KillMode"); got != "process" {
					t.Errorf("KillMode=%s, want process", got)
				}
				for _, k := range []string{"ProtectSystem", "DevicePolicy", "DeviceAllow", "PrivateDevices", "ProtectClock", "ProtectHome", "RestrictSUIDSGID", "NoNewPrivileges"} {
					if v := u.get("Service", k); v != nil {
						t.Errorf("%s=%q would break the node daemon (devices, /etc, /root/.ssh, OS installs)", k, v)
					}
				}
				return
			}
			for k, want := range map[string]string{
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
				"PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes", "UMask": "0077",
			} {
				if got := u.get("Service", k); !slices.Equal(got, []string{want}) {
					t.Errorf("%s=%q, want %q", k, got, want)
				}
			}
			rw := strings.Fields(strings.Join(u.get("Service", "ReadWritePaths"), " "))
			if tc.user == bootstrap.MasterUser {
				want := []string{"-" + l.MasterDir(), "-" + l.MasterRunDir()}
				if !slices.Equal(rw, want) {
					t.Errorf("ReadWritePaths=%q, want %q", rw, want)
				}
			} else if len(rw) != 0 {
				t.Errorf("corral-rapi writes nothing, yet ReadWritePaths=%q", rw)
			}
		})
	}
	target := parse(t, "corral.target")
	if got := target.get("Unit", "Wants"); !slices.Equal(got, []string{"corral-node.service"}) {
		t.Errorf("corral.target Wants=%q: every node runs corral-node, the master daemons are enabled on the master only", got)
	}
	if privsep.MasterUser != bootstrap.MasterUser || privsep.RAPIUser != bootstrap.RAPIUser {
		t.Errorf("privsep's users %s, %s differ from bootstrap's %s, %s", privsep.MasterUser, privsep.RAPIUser, bootstrap.MasterUser, bootstrap.RAPIUser)
	}
}

// TestSystemdAnalyzeVerify runs systemd's own checker on the units. It
// needs no running systemd. verify fails a unit whose ExecStart binary is
// missing, and /usr/sbin/corrald and the others exist only once the
// package is installed, so the units are checked from a copy whose
// ExecStart points at executable stand-ins of the same names: the checker
// looks at the path only, never runs it.
func TestSystemdAnalyzeVerify(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	sbin := filepath.Join(dir, "sbin")
	if err := os.Mkdir(sbin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"corrald", "corral-node", "corral-rapi"} {
		if err := os.WriteFile(filepath.Join(sbin, b), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for _, name := range units {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "ExecStart=/usr/sbin/", "ExecStart="+sbin+"/")
		if strings.HasSuffix(name, ".service") && !strings.Contains(s, "ExecStart="+sbin+"/") {
			t.Fatalf("%s: no ExecStart=/usr/sbin/...", name)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command(tool, append([]string{"verify"}, paths...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Unknown keys and unparsable values are only warnings (exit 0); a
	// unit must not draw any. Lines about the host's own units are not
	// ours to judge.
	for _, line := range strings.Split(string(out), "\n") {
		for _, name := range units {
			if strings.Contains(line, name) {
				t.Errorf("systemd-analyze verify: %s", line)
				break
			}
		}
	}
}

// TestSysusersAndTmpfiles applies the sysusers.d and tmpfiles.d entries to
// an empty root directory and checks the users, groups and runtime
// directories they make.
func TestSysusersAndTmpfiles(t *testing.T) {
	sysusers, err1 := exec.LookPath("systemd-sysusers")
	tmpfiles, err2 := exec.LookPath("systemd-tmpfiles")
	if err1 != nil || err2 != nil {
		t.Skip("systemd-sysusers or systemd-tmpfiles not installed (Debian package systemd)")
	}
	if os.Geteuid() != 0 {
		t.Skip("systemd-tmpfiles sets owners: needs root")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := func(name string) string {
		p, err := filepath.Abs(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, err := exec.Command(sysusers, "--root="+root, abs("corral.sysusers")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	ids := func(file string) map[string][]string {
		b, err := os.ReadFile(filepath.Join(root, "etc", file))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Split(line, ":")
			m[f[0]] = f
		}
		return m
	}
	passwd, group := ids("passwd"), ids("group")
	for _, u := range []string{bootstrap.MasterUser, bootstrap.RAPIUser, bootstrap.QemuUser, bootstrap.EtcdUser} {
		p, ok := passwd[u]
		if !ok {
			t.Fatalf("sysusers made no user %s: %v", u, passwd)
		}
		if p[6] != "/usr/sbin/nologin" {
			t.Errorf("%s has shell %s", u, p[6])
		}
		if g, ok := group[u]; !ok || g[2] != p[3] {
			t.Errorf("%s's primary group is not its own: %v", u, p)
		}
	}
	admin, ok := group[bootstrap.AdminGroup]
	if !ok {
		t.Fatalf("no group %s", bootstrap.AdminGroup)
	}
	members := strings.Split(admin[3], ",")
	slices.Sort(members)
	if want := []string{bootstrap.MasterUser, bootstrap.RAPIUser}; !slices.Equal(members, want) {
		t.Errorf("%s members %q, want %q", bootstrap.AdminGroup, members, want)
	}

	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", abs("corral.tmpfiles")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	l := bootstrap.Layout{StateDir: bootstrap.DefaultStateDir, RunDir: bootstrap.DefaultRunDir}
	for _, d := range []struct {
		path        string
		mode        os.FileMode
		user, group string
	}{
		{l.RunDir, 0o755, "", ""},
		{l.MasterRunDir(), 0o750, bootstrap.MasterUser, bootstrap.AdminGroup},
		{l.NodeRunDir(""), 0o755, "", ""},
	} {
		fi, err := os.Stat(filepath.Join(root, d.path))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid := "0", "0"
		if d.user != "" {
			uid, gid = passwd[d.user][2], group[d.group][2]
		}
		if fi.Mode().Perm() != d.mode || !fi.IsDir() || strconv.Itoa(int(st.Uid)) != uid || strconv.Itoa(int(st.Gid)) != gid {
			t.Errorf("%s: %v %d:%d, want directory %v %s:%s", d.path, fi.Mode(), st.Uid, st.Gid, d.mode, uid, gid)
		}
	}
}
