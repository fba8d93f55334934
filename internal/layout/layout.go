// Package layout names where Corral keeps things on a machine: the default
// state and run directories and the files in them, the system users and
// group of the security model, and the software version. It imports
// nothing of Corral's, so that every binary, the node daemon that runs as
// root included, can name a path without linking the code that writes it.
package layout

import "path/filepath"

// Version of the software; a master accepts only nodes that run the same.
const Version = "0.1.0"

// Defaults for a production installation.
const (
	DefaultStateDir = "/var/lib/corral"
	DefaultRunDir   = "/run/corral"
)

// DefaultK8sToolsDir holds the pinned Kubernetes binaries of COE clusters
// (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok
// with its stage configs in stages/, etcd) that `make k8s-tools` builds.
// The directory names the Kubernetes version it was built for.
const DefaultK8sToolsDir = "/var/cache/corral/k8s-v1.37.2/bin"

// System users and group of the security model (docs/SECURITY.md).
const (
	// MasterUser runs corrald.
	MasterUser = "corral-master"
	// QemuUser runs qemu when the cluster has no uid pool.
	QemuUser = "corral-qemu"
	// RAPIUser runs corral-rapi. It belongs to corral-admin only so that
	// it can use the LUXI socket; it owns nothing of the master's and can
	// read none of the cluster's private keys or its domain secret.
	RAPIUser = "corral-rapi"
	// AdminGroup may use the LUXI socket.
	AdminGroup = "corral-admin"
)

// Files of the master's state directory (Layout.MasterDir).
const (
	MasterCAFile     = "ca.pem"
	MasterCAKeyFile  = "ca.key"
	MasterCertFile   = "master.pem"
	MasterKeyFile    = "master.key"
	DomainSecretFile = "cluster-domain-secret"
	// StagedDomainSecretFile is a secret `renew-crypto
	// --cluster-domain-secret` hands to its job; removed when installed.
	StagedDomainSecretFile = "cluster-domain-secret.staged"
	// PeersDir holds what paired clusters said of themselves.
	PeersDir = "peers"
	// PairingDir holds the open pairing invitations.
	PairingDir = "pairing"
)

// LUXISocketFile is the LUXI socket's name in the master's run directory.
const LUXISocketFile = "luxi.sock"

// Files of a node daemon's state directory (Layout.NodeDir).
const (
	NodeCertFile = "node.pem"
	NodeKeyFile  = "node.key"
	NodeCAFile   = "ca.pem"
)

// Files of the RAPI directory (Layout.RAPIDir).
const (
	RAPICertFile  = "rapi.crt"
	RAPIKeyFile   = "rapi.key"
	RAPIUsersFile = "users"
	// RAPICAFile is a copy of the cluster CA certificate, the one clients
	// verify corral-rapi with.
	RAPICAFile = "ca.pem"
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
func (l Layout) Socket() string { return filepath.Join(l.MasterRunDir(), LUXISocketFile) }

// NodeRunDir holds a node daemon's sockets (qemu monitors and consoles).
func (l Layout) NodeRunDir(name string) string {
	if name == "" {
		name = "node"
	}
	return filepath.Join(l.RunDir, name)
}

// RAPIDir holds corral-rapi's certificate, key and users file
// (corral-rapi, 0700).
func (l Layout) RAPIDir() string { return filepath.Join(l.StateDir, "rapi") }

// RAPICert is corral-rapi's certificate.
func (l Layout) RAPICert() string { return filepath.Join(l.RAPIDir(), RAPICertFile) }

// RAPIKey is corral-rapi's private key.
func (l Layout) RAPIKey() string { return filepath.Join(l.RAPIDir(), RAPIKeyFile) }

// RAPIUsers is corral-rapi's users file (Ganeti's format).
func (l Layout) RAPIUsers() string { return filepath.Join(l.RAPIDir(), RAPIUsersFile) }

// RAPICA is the CA certificate RAPI clients verify the server with.
func (l Layout) RAPICA() string { return filepath.Join(l.RAPIDir(), RAPICAFile) }
