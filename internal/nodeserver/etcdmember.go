package nodeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// etcdUser runs the etcd members of the cluster's store, never root (the
// same user the master's bootstrap members run as).
const etcdUser = "corral-etcd"

// etcdStopTimeout is how long a member gets to exit after SIGTERM.
const etcdStopTimeout = 10 * time.Second

// etcdBaseDir holds the members this node runs: beside the node's state
// directory rather than inside it, because the node's directory is root's
// alone (0700) and the member runs as corral-etcd. It is the directory the
// cluster's bootstrap members live in on the master's machine, and a
// member's directory is named so that it never meets theirs (m0, pki).
func (s *Server) etcdBaseDir() string { return filepath.Join(filepath.Dir(s.opts.StateDir), "etcd") }

func (s *Server) etcdMemberDir(name string) string {
	return filepath.Join(s.etcdBaseDir(), "member-"+name)
}

// etcdMemberStart starts the member a master has added to the cluster as a
// learner. A member that already runs from its directory is left alone; one
// whose directory holds data from an earlier run is started again on it
// (etcd then ignores the initial-cluster flags), so a retried call or a
// call after a reboot is harmless.
func (s *Server) etcdMemberStart(ctx context.Context, a nodeapi.EtcdMemberStartArgs) (any, error) {
	if !pki.ValidNodeName(a.Name) {
		return nil, ecode.Errorf(ecode.Inval, "invalid etcd member name %q", a.Name)
	}
	if a.CertPEM == "" || a.KeyPEM == "" || a.CAPEM == "" {
		return nil, ecode.Errorf(ecode.Inval, "etcd member %s: certificate, key and CA are required", a.Name)
	}
	dir := s.etcdMemberDir(a.Name)
	data := filepath.Join(dir, "data")
	if pid := runningEtcd(dir); pid > 0 {
		s.log.Info("etcd member already running", "member", a.Name, "pid", pid)
		return nodeapi.EtcdMemberStartReply{PID: pid, DataDir: data}, nil
	}
	uid, gid, setOwners, err := etcdAccount()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.etcdBaseDir(), 0o755); err != nil {
		return nil, err
	}
	pdir := filepath.Join(dir, "pki")
	for _, d := range []string{dir, pdir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if setOwners {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	files := etcdproc.TLSFiles{CertFile: filepath.Join(pdir, "member.pem"), KeyFile: filepath.Join(pdir, "member.key"), CAFile: filepath.Join(pdir, "ca.pem")}
	for _, f := range []struct{ path, pem string }{{files.CertFile, a.CertPEM}, {files.KeyFile, a.KeyPEM}, {files.CAFile, a.CAPEM}} {
		if err := os.WriteFile(f.path, []byte(f.pem), 0o600); err != nil {
			return nil, err
		}
		if setOwners {
			if err := os.Chown(f.path, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	bin, err := etcdproc.Binary()
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "node %s cannot run an etcd member: %v", s.name, err)
	}
	wrapper, err := writeEtcdWrapper(dir, bin, uid, gid, setOwners)
	if err != nil {
		return nil, err
	}
	m, err := etcdproc.Join(etcdproc.Config{Binary: wrapper, ClientTLS: &files, PeerTLS: &files, Logger: s.log},
		etcdproc.JoinSpec{Name: a.Name, Dir: dir, ClientURL: a.ClientURL, PeerURL: a.PeerURL, InitialCluster: a.InitialCluster})
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "starting etcd member %s on node %s: %v", a.Name, s.name, err)
	}
	s.log.Info("etcd member started", "member", a.Name, "pid", m.PID(), "client", a.ClientURL, "peer", a.PeerURL, "log", m.LogPath())
	return nodeapi.EtcdMemberStartReply{PID: m.PID(), DataDir: data}, nil
}

// etcdMemberStop stops a member the cluster has removed and deletes its
// directory: a removed member's data can never serve again (etcd refuses a
// removed member), and a later promotion starts from nothing. Stopping a
// member that is gone already is not an error.
func (s *Server) etcdMemberStop(ctx context.Context, a nodeapi.EtcdMemberStopArgs) (any, error) {
	if !pki.ValidNodeName(a.Name) {
		return nil, ecode.Errorf(ecode.Inval, "invalid etcd member name %q", a.Name)
	}
	dir := s.etcdMemberDir(a.Name)
	if pid := runningEtcd(dir); pid > 0 {
		if err := stopPID(ctx, pid, etcdStopTimeout); err != nil {
			return nil, fmt.Errorf("stopping etcd member %s (pid %d): %w", a.Name, pid, err)
		}
		s.log.Info("etcd member stopped", "member", a.Name, "pid", pid)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	return nil, nil
}

// etcdAccount is the user a member runs as: corral-etcd when the daemon
// runs as root (created as a system user when missing, as the cluster's
// bootstrap does on the master), else the daemon's own user (tests).
func etcdAccount() (uid, gid int, setOwners bool, err error) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid(), false, nil
	}
	u, err := user.Lookup(etcdUser)
	if err != nil {
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", "--user-group", etcdUser).CombinedOutput()
		if aerr != nil {
			return 0, 0, false, ecode.Errorf(ecode.Environ, "the %s user is missing on this node and useradd failed: %v: %s", etcdUser, aerr, strings.TrimSpace(string(out)))
		}
		if u, err = user.Lookup(etcdUser); err != nil {
			return 0, 0, false, ecode.Errorf(ecode.Environ, "the %s user: %v", etcdUser, err)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, true, nil
}

// etcdWrapper is the script started as the member's binary: it drops to the
// member's user and adds the flags that admit only etcd's own client and
// peer certificates of the cluster CA.
func etcdWrapper(bin string, uid, gid int, setpriv string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by corral-node: runs an etcd member of the cluster's store.\n")
	exe := "exec " + shQuote(bin)
	if setpriv != "" {
		exe = fmt.Sprintf("exec %s --reuid=%d --regid=%d --clear-groups --no-new-privs -- %s", shQuote(setpriv), uid, gid, shQuote(bin))
	}
	fmt.Fprintf(&b, "%s \"$@\" --client-cert-allowed-hostname=%s --peer-cert-allowed-hostname=%s\n",
		exe, etcdproc.ClientHostname, etcdproc.PeerHostname)
	return b.String()
}

func writeEtcdWrapper(dir, bin string, uid, gid int, setOwners bool) (string, error) {
	setpriv := ""
	if setOwners {
		var err error
		if setpriv, err = exec.LookPath("setpriv"); err != nil {
			return "", ecode.Errorf(ecode.Environ, "setpriv (util-linux) is needed to run etcd as %s: %v", etcdUser, err)
		}
	}
	p := filepath.Join(dir, "run-etcd")
	if err := os.WriteFile(p, []byte(etcdWrapper(bin, uid, gid, setpriv)), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runningEtcd returns the pid of the etcd process serving dir's data, or 0.
// The pid file alone is not trusted: the process must still be etcd with
// that data directory (pids are reused).
func runningEtcd(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "etcd.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return etcdPIDServes(pid, filepath.Join(dir, "data"))
}

func etcdPIDServes(pid int, data string) int {
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmd, []byte("\x00--data-dir="+data+"\x00")) {
		return 0
	}
	if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err != nil || bytes.Contains(st, []byte(") Z ")) {
		return 0
	}
	return pid
}

// stopPID sends SIGTERM, then SIGKILL after timeout, and waits until the
// process is gone (or a zombie its parent has yet to reap).
func stopPID(ctx context.Context, pid int, timeout time.Duration) error {
	alive := func() bool {
		st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err == nil && !bytes.Contains(st, []byte(") Z "))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
