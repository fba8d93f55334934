// Package controlplane runs the Kubernetes control plane of one COE
// cluster as processes on a node: etcd (its own, or a shared one under a
// prefix), kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// for simulated nodes. New turns a Spec into the processes' command lines;
// WriteFiles lays out the cluster's directory (certificates, kubeconfigs,
// kwok's configuration) owned by the cluster's own user; the Supervisor
// starts the processes as that user, restarts them when they die, and
// adopts them when the node daemon that owns it restarts, so that a node
// daemon restart never takes a cluster's control plane down.
package controlplane

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// Defaults of a Spec.
var (
	DefaultBindAddress = netip.MustParseAddr("127.0.0.1")
	DefaultServiceCIDR = netip.MustParsePrefix(certs.DefaultServiceCIDR)
	DefaultPodCIDR     = netip.MustParsePrefix("10.244.0.0/16")
)

// Spec is one cluster's control plane on this node.
type Spec struct {
	ClusterUUID string
	ClusterName string
	// Dir is the cluster's directory; WriteFiles makes it, owned by UID.
	// Every directory above it must let UID through.
	Dir string
	// UID and GID run every process; never root.
	UID, GID int
	// BindAddress is where the API server and etcd listen
	// (DefaultBindAddress when invalid). The API server certificate must
	// name it.
	BindAddress   netip.Addr
	APIServerPort int
	// EtcdClientPort and EtcdPeerPort are for the cluster's own etcd;
	// unused with SharedEtcd.
	EtcdClientPort, EtcdPeerPort int
	// KwokPort is where kwok serves the kubelet API of its nodes (logs,
	// exec); 0 serves nothing.
	KwokPort    int
	ServiceCIDR netip.Prefix // DefaultServiceCIDR when invalid
	PodCIDR     netip.Prefix // DefaultPodCIDR when invalid
	// NodeMonitorGracePeriod is how long a node may miss heartbeats
	// before it is NotReady (the controller manager's default when 0).
	NodeMonitorGracePeriod time.Duration
	// Certs is the cluster's certificate bundle; WriteFiles needs it, a
	// Supervisor adopting running processes does not.
	Certs *certs.Bundle
	// SharedEtcd, when set, keeps the cluster's objects in an etcd the
	// cluster does not run, under a prefix of its own.
	SharedEtcd *SharedEtcd
	// TLSBootstrap has the control plane let kubelets join with a
	// bootstrap token, as kubeadm sets it up: the API server accepts
	// bootstrap tokens and the controller manager runs the bootstrap
	// signer and token cleaner and signs the kubelets' certificate
	// requests with the cluster's CA, whose key (ClusterSigningKey) it
	// then needs.
	TLSBootstrap bool
	// ClusterSigningKey is the CA's private key, written for the
	// controller manager when TLSBootstrap is set; WriteFiles needs it
	// then, a Supervisor adopting running processes does not.
	ClusterSigningKey secret.Secret
	// EtcdMembers, when the cluster runs several masters, are all the
	// members of its etcd (this node's among them, named EtcdMember):
	// etcd's initial cluster and the API server's --etcd-servers. Empty:
	// one member, this node's.
	EtcdMembers []EtcdMember
	EtcdMember  string
	// LeaderElect has the controller manager and the scheduler elect a
	// leader among the masters' replicas.
	LeaderElect bool
	// NoKwok leaves kwok out: of several masters, one runs it.
	NoKwok bool
	Tools  k8sbin.Tools
}

// EtcdMember is one member of a cluster's etcd.
type EtcdMember struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peer_url"`
	ClientURL string `json:"client_url"`
}

// EtcdInitialCluster is etcd's --initial-cluster of the members:
// name=peer URL, comma separated, in the given order.
func EtcdInitialCluster(members []EtcdMember) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	return strings.Join(parts, ",")
}

var memberRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkEtcdMembers refuses members without a plain name or an https URL,
// and a list that does not name this node's member.
func (s Spec) checkEtcdMembers() error {
	if len(s.EtcdMembers) == 0 {
		return nil
	}
	if s.SharedEtcd != nil {
		return ecode.Errorf(ecode.Inval, "controlplane: cluster %s has etcd members and a shared etcd", s.ClusterUUID)
	}
	seen := map[string]bool{}
	self := false
	for _, m := range s.EtcdMembers {
		if !memberRE.MatchString(m.Name) || seen[m.Name] {
			return ecode.Errorf(ecode.Inval, "controlplane: etcd member name %q of %s is not a plain, unique name", m.Name, s.ClusterUUID)
		}
		seen[m.Name] = true
		for _, raw := range []string{m.PeerURL, m.ClientURL} {
			if u, err := url.Parse(raw); err != nil || u.Scheme != "https" || u.Host == "" {
				return ecode.Errorf(ecode.Inval, "controlplane: etcd member %s of %s: %q is not an https URL", m.Name, s.ClusterUUID, raw)
			}
		}
		if m.Name == s.EtcdMember {
			self = true
			if m.PeerURL != "https://"+s.hostPort(s.EtcdPeerPort) || m.ClientURL != "https://"+s.hostPort(s.EtcdClientPort) {
				return ecode.Errorf(ecode.Inval, "controlplane: etcd member %s of %s is not at this node's ports", m.Name, s.ClusterUUID)
			}
		}
	}
	if !self {
		return ecode.Errorf(ecode.Inval, "controlplane: the etcd members of %s do not name this node's member %q", s.ClusterUUID, s.EtcdMember)
	}
	return nil
}

// SharedEtcd is an etcd shared by several clusters' API servers.
type SharedEtcd struct {
	Endpoints []string // https URLs
	CAPEM     []byte
	// Client is the API server's client certificate, signed by the CA of
	// the shared etcd (certs.CA.IssueEtcdClient).
	Client certs.KeyPair
	// Prefix is --etcd-prefix: e.g. /clusters/<uuid>/registry.
	Prefix string
}

var uuidRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// withDefaults validates the spec and fills in its defaults.
func (s Spec) withDefaults() (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, ecode.Errorf(ecode.Inval, "controlplane: "+format, args...)
	}
	if !uuidRE.MatchString(s.ClusterUUID) {
		return bad("cluster uuid %q is not a plain name", s.ClusterUUID)
	}
	if s.ClusterName == "" {
		s.ClusterName = s.ClusterUUID
	}
	if s.Dir == "" || !filepath.IsAbs(s.Dir) {
		return bad("cluster directory %q is not an absolute path", s.Dir)
	}
	s.Dir = filepath.Clean(s.Dir)
	if s.UID <= 0 || s.GID <= 0 {
		return bad("control plane of %s would run as uid %d gid %d: it must run as a user of its own, never root", s.ClusterUUID, s.UID, s.GID)
	}
	if !s.BindAddress.IsValid() {
		s.BindAddress = DefaultBindAddress
	}
	if !s.ServiceCIDR.IsValid() {
		s.ServiceCIDR = DefaultServiceCIDR
	}
	if !s.PodCIDR.IsValid() {
		s.PodCIDR = DefaultPodCIDR
	}
	ports := map[string]int{"API server": s.APIServerPort}
	if s.SharedEtcd == nil {
		ports["etcd client"], ports["etcd peer"] = s.EtcdClientPort, s.EtcdPeerPort
	} else {
		if len(s.SharedEtcd.Endpoints) == 0 || s.SharedEtcd.Prefix == "" || s.SharedEtcd.Prefix[0] != '/' {
			return bad("shared etcd of %s needs endpoints and an absolute prefix", s.ClusterUUID)
		}
		for _, e := range s.SharedEtcd.Endpoints {
			if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" {
				return bad("shared etcd endpoint %q of %s is not an https URL", e, s.ClusterUUID)
			}
		}
	}
	if s.KwokPort != 0 {
		ports["kwok"] = s.KwokPort
	}
	seen := map[int]string{}
	for what, p := range ports {
		if p <= 0 || p > 65535 {
			return bad("%s port %d of %s is out of range", what, p, s.ClusterUUID)
		}
		if other, dup := seen[p]; dup {
			return bad("%s and %s ports of %s are both %d", what, other, s.ClusterUUID, p)
		}
		seen[p] = what
	}
	if s.EtcdMember == "" {
		s.EtcdMember = Etcd
	}
	if err := s.checkEtcdMembers(); err != nil {
		return Spec{}, err
	}
	if s.Tools.Dir() == "" {
		return bad("no Kubernetes tools for %s (k8sbin.Locate)", s.ClusterUUID)
	}
	if s.Certs != nil {
		if err := checkAPIServerCert(s.Certs.APIServer.CertPEM, s.BindAddress); err != nil {
			return Spec{}, err
		}
	}
	return s, nil
}

func checkAPIServerCert(certPEM []byte, addr netip.Addr) error {
	cs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return fmt.Errorf("controlplane: API server certificate: %w", err)
	}
	if err := cs[0].VerifyHostname(addr.String()); err != nil {
		return ecode.Errorf(ecode.Inval, "controlplane: the API server certificate does not name the bind address %s: %w", addr, err)
	}
	if cs[0].ExtKeyUsage == nil || cs[0].ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		return ecode.Errorf(ecode.Inval, "controlplane: the API server certificate is not a server certificate")
	}
	return nil
}

func (s Spec) hostPort(port int) string {
	return net.JoinHostPort(s.BindAddress.String(), strconv.Itoa(port))
}

// Server is the API server's URL.
func (s Spec) Server() string { return "https://" + s.hostPort(s.APIServerPort) }
