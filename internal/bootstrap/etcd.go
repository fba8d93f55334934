package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/storecfg"
)

// EtcdUser runs the etcd members Corral manages: never root, and not
// corral-master either, so that a compromised corrald cannot read or
// rewrite etcd's data files behind the members' back.
const EtcdUser = "corral-etcd"

// Names in the etcd certificates. Members accept a client only when its
// certificate carries EtcdClientHostname, and a peer only with
// EtcdPeerHostname: every node daemon holds a certificate of the same
// cluster CA, and none of them may talk to etcd.
const (
	EtcdClientHostname = "corral-etcd-client"
	EtcdPeerHostname   = "corral-etcd-peer"
)

// Files under Layout.EtcdDir.
const (
	etcdPKIDir     = "pki"
	etcdMemberCert = "member.pem"
	etcdMemberKey  = "member.key"
	etcdCA         = "ca.pem"
	etcdWrapper    = "run-etcd"
	// EtcdUnitName is the systemd unit written for a single local member.
	EtcdUnitName = "corral-etcd.service"
)

// EnsureEtcdUser creates the corral-etcd system user when missing. It needs
// root.
func EnsureEtcdUser() error {
	if _, err := Lookup(EtcdUser); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("creating the %s user needs root", EtcdUser)
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", "--user-group", EtcdUser).CombinedOutput()
	if err != nil {
		return fmt.Errorf("useradd %s: %v: %s", EtcdUser, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IssueEtcdClientCert gives corrald its etcd client identity in the master
// state directory (storecfg's default file names), issued by the cluster
// CA, unless it has one already. With setOwners the files belong to
// corral-master.
func IssueEtcdClientCert(l Layout, setOwners bool) error {
	md := l.MasterDir()
	certPath, keyPath := filepath.Join(md, storecfg.FileEtcdClientCert), filepath.Join(md, storecfg.FileEtcdClientKey)
	if _, err := os.Stat(certPath); err == nil {
		return nil
	}
	ca, err := pki.LoadCA(filepath.Join(md, layout.MasterCAFile), filepath.Join(md, layout.MasterCAKeyFile))
	if err != nil {
		return err
	}
	if err := issueEtcd(ca, "corrald", pki.RoleEtcdClient, []string{EtcdClientHostname}, nil, certPath, keyPath); err != nil {
		return err
	}
	if setOwners {
		acct, err := Lookup(MasterUser)
		if err != nil {
			return err
		}
		for _, p := range []string{certPath, keyPath} {
			if err := os.Chown(p, acct.UID, acct.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

func issueEtcd(ca *pki.CA, name string, role pki.Role, dns []string, ips []net.IP, certPath, keyPath string) error {
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return err
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: role, DNSNames: dns, IPs: ips, PublicKey: key.Public()})
	if err != nil {
		return err
	}
	return pki.WriteKeyPair(certPath, keyPath, certPEM, keyPEM)
}

// EtcdOptions describe the etcd members a cluster runs for itself.
type EtcdOptions struct {
	Layout Layout
	// Members is 1 or 3 (default 1).
	Members int
	// Host is the IP address the members listen on (default 127.0.0.1).
	Host string
	// Binary is etcd (default etcdproc.Binary()).
	Binary string
	// SetOwners runs the members as corral-etcd (creating the user) and
	// gives it their files; it needs root. Without it they run as the
	// caller (tests as an ordinary user).
	SetOwners bool
	// ExitWithParent ties the members to the calling process (tests only:
	// a cluster's members must outlive the command that started them).
	ExitWithParent bool
	Logger         *slog.Logger
}

// EtcdMember is a started member: enough to stop it, restart it with the
// same flags, or write a service unit for it.
type EtcdMember struct {
	Name      string
	PID       int
	Args      []string // the etcd command line, binary first
	Log       string
	ClientURL string
	Dir       string
}

// StartEtcd starts a new etcd cluster of o.Members members under
// Layout.EtcdDir, with client and peer mutual TLS on certificates of the
// cluster CA, and waits until every member is healthy. The members run in
// sessions of their own and outlive the caller. On failure the members it
// started are stopped again.
//
// etcdproc runs the binary it is given as the caller's user and with its
// own flags only, so the members are started through a small script that
// drops to corral-etcd (setpriv) and adds the flags that restrict clients
// and peers to the etcd certificates.
func StartEtcd(ctx context.Context, o EtcdOptions) ([]EtcdMember, error) {
	if o.Members == 0 {
		o.Members = 1
	}
	if o.Members != 1 && o.Members != 3 {
		return nil, fmt.Errorf("%d etcd members: Corral runs 1 or 3", o.Members)
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	ip := net.ParseIP(o.Host)
	if ip == nil {
		return nil, fmt.Errorf("etcd host %q is not an IP address", o.Host)
	}
	if o.Binary == "" {
		bin, err := etcdproc.Binary()
		if err != nil {
			return nil, err
		}
		o.Binary = bin
	}
	acct := Account{UID: os.Getuid(), GID: os.Getgid()}
	if o.SetOwners {
		if err := EnsureEtcdUser(); err != nil {
			return nil, err
		}
		var err error
		if acct, err = Lookup(EtcdUser); err != nil {
			return nil, err
		}
	}
	dir := o.Layout.EtcdDir()
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("%s exists: this cluster has etcd members already", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files, err := etcdFiles(o.Layout, ip, acct, o.SetOwners)
	if err != nil {
		return nil, err
	}
	for i := range o.Members {
		// etcdproc names its members m0, m1, ...; made here first so that
		// they belong to the user etcd runs as.
		md := filepath.Join(dir, "m"+strconv.Itoa(i))
		if err := mkdirOwned(md, 0o700, acct, o.SetOwners); err != nil {
			return nil, err
		}
	}
	wrapper, err := writeWrapper(dir, o.Binary, acct, o.SetOwners)
	if err != nil {
		return nil, err
	}
	c, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary: wrapper, Dir: dir, Members: o.Members, Host: o.Host,
		ClientTLS: &files, PeerTLS: &files, Logger: o.Logger, ExitWithParent: o.ExitWithParent,
	})
	if err != nil {
		return nil, err
	}
	out := make([]EtcdMember, 0, len(c.Members))
	for _, m := range c.Members {
		args, err := cmdline(m.PID())
		if err == nil && filepath.Base(args[0]) != filepath.Base(o.Binary) {
			err = fmt.Errorf("member %s runs %q, not %s", m.Name, args[0], o.Binary)
		}
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("etcd member %s: %w", m.Name, err)
		}
		out = append(out, EtcdMember{Name: m.Name, PID: m.PID(), Args: args, Log: m.LogPath(), ClientURL: m.ClientURL, Dir: m.Dir})
	}
	return out, nil
}

// StopEtcd stops members this process started (SIGTERM, then SIGKILL after
// grace) and waits until they are gone.
func StopEtcd(members []EtcdMember, grace time.Duration) {
	for _, m := range members {
		if m.PID <= 0 || syscall.Kill(m.PID, syscall.SIGTERM) != nil {
			continue
		}
		deadline := time.Now().Add(grace)
		for running(m.PID) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(m.PID, syscall.SIGKILL)
				deadline = time.Now().Add(grace)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// running reports whether pid is alive and not a zombie waiting for its
// parent (etcdproc reaps its members in the background).
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// etcdFiles writes the members' certificate (one for all members of this
// machine) and a copy of the cluster CA where only their user reads them.
func etcdFiles(l Layout, ip net.IP, acct Account, setOwners bool) (etcdproc.TLSFiles, error) {
	md := l.MasterDir()
	ca, err := pki.LoadCA(filepath.Join(md, layout.MasterCAFile), filepath.Join(md, layout.MasterCAKeyFile))
	if err != nil {
		return etcdproc.TLSFiles{}, err
	}
	pdir := filepath.Join(l.EtcdDir(), etcdPKIDir)
	if err := mkdirOwned(pdir, 0o700, acct, setOwners); err != nil {
		return etcdproc.TLSFiles{}, err
	}
	f := etcdproc.TLSFiles{CertFile: filepath.Join(pdir, etcdMemberCert), KeyFile: filepath.Join(pdir, etcdMemberKey), CAFile: filepath.Join(pdir, etcdCA)}
	// etcd checks a peer's certificate against the address the peer
	// connects from, and on loopback that is 127.0.0.1 whichever 127.x
	// address the member listens on; local tools use it too.
	ips := []net.IP{ip}
	if !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		ips = append(ips, net.IPv4(127, 0, 0, 1))
	}
	if err := issueEtcd(ca, "corral-etcd", pki.RoleEtcdMember, []string{EtcdClientHostname, EtcdPeerHostname}, ips, f.CertFile, f.KeyFile); err != nil {
		return f, err
	}
	if err := os.WriteFile(f.CAFile, ca.CertPEM(), 0o644); err != nil {
		return f, err
	}
	if setOwners {
		for _, p := range []string{f.CertFile, f.KeyFile, f.CAFile} {
			if err := os.Chown(p, acct.UID, acct.GID); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

func mkdirOwned(dir string, mode os.FileMode, acct Account, setOwners bool) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	if setOwners {
		return os.Chown(dir, acct.UID, acct.GID)
	}
	return nil
}

// writeWrapper writes the script etcdproc starts as the member binary.
func writeWrapper(dir, bin string, acct Account, setOwners bool) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by Corral: starts an etcd member of the cluster's control plane.\n")
	exe := "exec " + shellQuote(bin)
	if setOwners {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			return "", fmt.Errorf("setpriv (util-linux) is needed to run etcd as %s: %w", EtcdUser, err)
		}
		exe = fmt.Sprintf("exec %s --reuid=%d --regid=%d --clear-groups --no-new-privs -- %s",
			shellQuote(setpriv), acct.UID, acct.GID, shellQuote(bin))
	}
	fmt.Fprintf(&b, "%s \"$@\" --client-cert-allowed-hostname=%s --peer-cert-allowed-hostname=%s\n",
		exe, EtcdClientHostname, EtcdPeerHostname)
	p := filepath.Join(dir, etcdWrapper)
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// cmdline reads a process's command line.
func cmdline(pid int) ([]string, error) {
	if pid <= 0 {
		return nil, errors.New("not running")
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	if len(args) == 0 || args[0] == "" {
		return nil, fmt.Errorf("pid %d has no command line", pid)
	}
	return args, nil
}

// WriteEtcdUnit writes a systemd unit that runs m at boot with the flags it
// runs with now, to path. The running member was started by Corral, not
// by systemd: the unit is for the next boot (systemctl enable), and
// systemctl start would fail while the member runs.
func WriteEtcdUnit(path string, m EtcdMember, user string) error {
	var args []string
	for _, a := range m.Args {
		args = append(args, systemdQuote(a))
	}
	unit := fmt.Sprintf(`# Written by Corral: etcd member %s of the cluster's control plane.
# Install: ln -s %s /etc/systemd/system/ && systemctl enable %s
[Unit]
Description=Corral etcd member %s
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
User=%s
Group=%s
ExecStart=%s
Restart=on-failure
RestartSec=5
LimitNOFILE=65536
NoNewPrivileges=yes

[Install]
WantedBy=multi-user.target
`, m.Name, path, filepath.Base(path), m.Name, user, user, strings.Join(args, " "))
	return os.WriteFile(path, []byte(unit), 0o644)
}

// systemdQuote quotes one ExecStart argument.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// MigrateOptions describe moving a stopped cluster's store to etcd.
type MigrateOptions struct {
	Layout Layout
	// CorraldBin is the corrald executable ("" = next to this executable,
	// else from PATH).
	CorraldBin string
	Endpoints  []string
	Prefix     string // "" = corrald's default, /corral/<cluster-name>/
	// CAFile, CertFile and KeyFile, when set, are an etcd PKI of the
	// operator's (members run outside Corral): they are copied into the
	// master state directory for corrald. Unset, corrald's client
	// certificate is issued by the cluster CA and the members must present
	// certificates of the cluster CA.
	CAFile, CertFile, KeyFile string
	// SetOwners runs corrald as corral-master (needs root).
	SetOwners bool
}

// CorraldPath finds the corrald executable: bin if set, else next to this
// executable, else in PATH.
func CorraldPath(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "corrald")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("corrald")
	if err != nil {
		return "", fmt.Errorf("corrald not found next to this program nor in PATH: %w", err)
	}
	return p, nil
}

// MasterCredential is the identity corrald runs with: corral-master, with
// corral-admin as a supplementary group.
func MasterCredential() (*syscall.Credential, error) {
	acct, err := Lookup(MasterUser)
	if err != nil {
		return nil, err
	}
	gid, err := GroupID(AdminGroup)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID), Groups: []uint32{uint32(gid)}}, nil
}

// EtcdCredential is the identity Corral's etcd members run with.
func EtcdCredential() (*syscall.Credential, error) {
	acct, err := Lookup(EtcdUser)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID), Groups: []uint32{}}, nil
}

// MigrateCommand prepares `corrald migrate-store` for a stopped cluster:
// it puts corrald's etcd client identity in place and returns the command,
// to run as corral-master. The caller connects its output.
func MigrateCommand(ctx context.Context, o MigrateOptions) (*exec.Cmd, error) {
	bin, err := CorraldPath(o.CorraldBin)
	if err != nil {
		return nil, err
	}
	if len(o.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints to migrate to")
	}
	args := []string{"migrate-store", "--state-dir", o.Layout.StateDir, "--etcd-endpoints", strings.Join(o.Endpoints, ",")}
	if o.Prefix != "" {
		args = append(args, "--etcd-prefix", o.Prefix)
	}
	https := strings.HasPrefix(o.Endpoints[0], "https:")
	own := o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""
	switch {
	case own && (o.CAFile == "" || o.CertFile == "" || o.KeyFile == ""):
		return nil, errors.New("an etcd PKI of your own needs the CA, certificate and key files together")
	case own:
		names := []struct{ src, dst, flag string }{
			{o.CAFile, "etcd-ca.pem", "--etcd-ca"}, {o.CertFile, storecfg.FileEtcdClientCert, "--etcd-cert"}, {o.KeyFile, storecfg.FileEtcdClientKey, "--etcd-key"},
		}
		for _, n := range names {
			if err := copyOwned(n.src, filepath.Join(o.Layout.MasterDir(), n.dst), o.SetOwners); err != nil {
				return nil, err
			}
			args = append(args, n.flag, n.dst)
		}
	case https:
		if err := IssueEtcdClientCert(o.Layout, o.SetOwners); err != nil {
			return nil, fmt.Errorf("issuing corrald's etcd client certificate: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if o.SetOwners {
		cred, err := MasterCredential()
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}

// copyOwned copies a file into the master state directory (mode 0600),
// owned by corral-master with setOwners.
func copyOwned(src, dst string, setOwners bool) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return err
	}
	if setOwners {
		acct, err := Lookup(MasterUser)
		if err != nil {
			return err
		}
		return os.Chown(dst, acct.UID, acct.GID)
	}
	return nil
}
