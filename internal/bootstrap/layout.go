// Package bootstrap creates a cluster on disk: the users and directories of
// the security model, the CA and certificates, the domain secret and the
// initial configuration in a new store. `corral cluster init` and
// `corral dev up` use it.
package bootstrap

import "path/filepath"

// Defaults for a production installation.
const (
	DefaultStateDir = "/var/lib/corral"
	DefaultRunDir   = "/run/corral"
	MasterUser      = "corral-master"
	QemuUser        = "corral-qemu"
	AdminGroup      = "corral-admin"
)

// Layout names the directories of one machine's share of a cluster.
type Layout struct {
	StateDir string
	RunDir   string
}

// MasterDir holds corrald's state (owned by corral-master, 0700).
func (l Layout) MasterDir() string { return filepath.Join(l.StateDir, "master") }

// NodeDir holds a node daemon's state (root, 0700). Dev clusters run
// several node daemons on one machine, each with its own directory.
func (l Layout) NodeDir(name string) string {
	if name == "" {
		name = "node"
	}
	return filepath.Join(l.StateDir, name)
}

// EtcdDir holds the etcd members Corral runs on this machine: their
// certificates (pki/, corral-etcd only), one directory per member (m0, ...)
// with its data, log and pid file, and the systemd unit of a lone member.
func (l Layout) EtcdDir() string { return filepath.Join(l.StateDir, "etcd") }

// MasterRunDir holds the LUXI socket (corral-master:corral-admin, 0750).
func (l Layout) MasterRunDir() string { return filepath.Join(l.RunDir, "master") }

// Socket is the LUXI socket.
func (l Layout) Socket() string { return filepath.Join(l.MasterRunDir(), "luxi.sock") }

// NodeRunDir holds a node daemon's sockets (qemu monitors and consoles).
func (l Layout) NodeRunDir(name string) string {
	if name == "" {
		name = "node"
	}
	return filepath.Join(l.RunDir, name)
}
