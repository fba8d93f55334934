package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/nodeserver"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rapi"
)

func TestInitWritesRAPIFiles(t *testing.T) {
	l := newTestCluster(t)
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{l.RAPIDir(), os.ModeDir | 0o700},
		{l.RAPIKey(), 0o600},
		{l.RAPIUsers(), 0o600},
		{l.RAPICert(), 0o644},
		{l.RAPICA(), 0o644},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	if _, err := tls.LoadX509KeyPair(l.RAPICert(), l.RAPIKey()); err != nil {
		t.Fatalf("RAPI key pair: %v", err)
	}
	users, err := rapi.LoadUsers(l.RAPIUsers())
	if err != nil {
		t.Fatal(err)
	}
	if users.Len() != 0 {
		t.Errorf("a new users file has %d users, want none", users.Len())
	}
	caPEM, err := os.ReadFile(l.RAPICA())
	if err != nil {
		t.Fatal(err)
	}
	masterCA, err := os.ReadFile(filepath.Join(l.MasterDir(), master.FileCA))
	if err != nil {
		t.Fatal(err)
	}
	if string(caPEM) != string(masterCA) {
		t.Error("the RAPI directory's CA is not the cluster CA")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	certPEM, err := os.ReadFile(l.RAPICert())
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	// Clients reach the master by name or by IP: both must verify.
	for _, host := range []string{"m1", "127.0.0.1"} {
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("RAPI certificate for %s: %v", host, err)
		}
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "m2"}); err == nil {
		t.Error("RAPI certificate verifies for another host")
	}
}

func TestInitKeepsRAPIUsersFile(t *testing.T) {
	dir := t.TempDir()
	l := Layout{StateDir: dir, RunDir: filepath.Join(dir, "run")}
	const existing = "ops {cleartext}kept write\n"
	if err := os.MkdirAll(l.RAPIDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.RAPIUsers(), []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Init(context.Background(), InitOptions{Name: "c1", Layout: l, MasterName: "m1", EnabledHypervisors: []string{"fake"}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.RAPIUsers())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != existing {
		t.Errorf("users file %q, want it kept as %q", got, existing)
	}
	if fi, err := os.Stat(l.RAPIDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("RAPI directory: %v, %v; want 0700", fi.Mode(), err)
	}
}

func TestRAPIUserLine(t *testing.T) {
	for _, c := range []struct {
		name, password string
		options        []string
		wantErr        bool
		write          bool
	}{
		{name: "admin", password: "s3cret", options: []string{"write"}, write: true},
		{name: "viewer", password: "look", options: []string{"read"}},
		{name: "both", password: "p w#d", options: []string{"read", "write"}, write: true},
		{name: "none", password: "x"},
		{name: "", password: "x", wantErr: true},
		{name: "a b", password: "x", wantErr: true},
		{name: "#c", password: "x", wantErr: true},
		{name: "ok", password: "x", options: []string{"read,write"}, wantErr: true},
		{name: "ok", password: "x", options: []string{""}, wantErr: true},
	} {
		line, err := RAPIUserLine(c.name, c.password, c.options...)
		if c.wantErr {
			if err == nil {
				t.Errorf("%q %v: no error, line %q", c.name, c.options, line)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.name, err)
			continue
		}
		if strings.Contains(line, c.password) {
			t.Errorf("%q: the line %q holds the password", c.name, line)
		}
		users := rapi.ParseUsers([]byte(line))
		u, ok := users.Authenticate(c.name, c.password)
		if !ok {
			t.Errorf("%q: line %q does not authenticate", c.name, line)
			continue
		}
		if _, ok := users.Authenticate(c.name, c.password+"x"); ok {
			t.Errorf("%q: a wrong password authenticates", c.name)
		}
		if got := u.Allowed([]string{rapi.AccessWrite}); got != c.write {
			t.Errorf("%q: write allowed %v, want %v", c.name, got, c.write)
		}
	}
}

func TestAddRAPIUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := AddRAPIUser(path, "a", "b", "write"); err == nil {
		t.Fatal("AddRAPIUser created a missing users file")
	}
	if err := os.WriteFile(path, []byte("# users\nold {cleartext}o read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := AddRAPIUser(path, "dev", "pw", "write"); err != nil {
		t.Fatal(err)
	}
	users, err := rapi.LoadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := users.Authenticate("old", "o"); !ok {
		t.Error("the existing user is gone")
	}
	if u, ok := users.Authenticate("dev", "pw"); !ok || !u.Allowed([]string{rapi.AccessWrite}) {
		t.Errorf("the new user: %v, %v", u, ok)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("users file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// TestRAPIUserCannotReadSecrets checks the privilege separation on real
// users: corral-rapi reads its own key and users file and nothing that would
// let it impersonate the master or sign certificates.
func TestRAPIUserCannotReadSecrets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create the corral users and switch to corral-rapi")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd")
	}
	// Not t.TempDir: its parent is private to root, which would deny
	// corral-rapi everything for the wrong reason.
	dir, err := os.MkdirTemp("", "corral-rapi-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := Layout{StateDir: dir, RunDir: filepath.Join(dir, "run")}
	if err := Init(context.Background(), InitOptions{Name: "c1", Layout: l, MasterName: "m1", EnabledHypervisors: []string{"fake"}, SetOwners: true}); err != nil {
		t.Fatal(err)
	}
	acct, err := Lookup(RAPIUser)
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(RAPIUser)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	adminGID, err := GroupID(AdminGroup)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(groups, strconv.Itoa(adminGID)) {
		t.Errorf("%s is in groups %v, not in %s (%d)", RAPIUser, groups, AdminGroup, adminGID)
	}
	for _, p := range []string{l.RAPIDir(), l.RAPIKey(), l.RAPIUsers(), l.RAPICert()} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != acct.UID {
			t.Errorf("%s is owned by uid %d, want %s (%d)", p, st.Uid, RAPIUser, acct.UID)
		}
	}
	cred, err := RAPICredential()
	if err != nil {
		t.Fatal(err)
	}
	readAs := func(path string) (string, error) {
		cmd := exec.Command("/bin/cat", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, p := range []string{l.RAPIKey(), l.RAPIUsers(), l.RAPICert()} {
		if out, err := readAs(p); err != nil {
			t.Errorf("%s cannot read its own %s: %v: %s", RAPIUser, p, err, out)
		}
	}
	md := l.MasterDir()
	for _, f := range []string{master.FileCAKey, master.FileMasterKey, master.FileDomainSecret} {
		p := filepath.Join(md, f)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out, err := readAs(p)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s reading %s: err %v, output %q; want permission denied", RAPIUser, p, err, out)
		}
	}
	// The node daemon's key is as private.
	nodeKey := filepath.Join(l.NodeDir(""), nodeserver.FileKey)
	if out, err := readAs(nodeKey); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("%s reading %s: err %v, output %q; want permission denied", RAPIUser, nodeKey, err, out)
	}
}
