package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Identities of the control plane's clients, as Kubernetes' built-in RBAC
// bindings know them.
const (
	AdminUser          = "admin"
	MastersGroup       = "system:masters"
	ControllerManager  = "system:kube-controller-manager"
	Scheduler          = "system:kube-scheduler"
	APIServerKubelet   = "kube-apiserver-kubelet-client"
	APIServerEtcd      = "kube-apiserver-etcd-client"
	KwokController     = "kwok-controller"
	NodeUserPrefix     = "system:node:"
	NodesGroup         = "system:nodes"
	APIServerName      = "kube-apiserver"
	EtcdServerName     = "etcd-server"
	EtcdPeerName       = "etcd-peer"
	DefaultServiceCIDR = "10.96.0.0/16"
)

// apiServerDNSNames are the in-cluster names of the API, which pods
// resolve through the cluster DNS.
var apiServerDNSNames = []string{
	"kubernetes",
	"kubernetes.default",
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// BundleSpec says what a cluster's certificates are for.
type BundleSpec struct {
	ClusterName string
	KeyType     KeyType // of a new CA; ECDSAP384 when empty
	// APIAddresses are the addresses clients reach the API server at.
	APIAddresses []net.IP
	// APIFQDN is the API's DNS name, if it has one.
	APIFQDN string
	// ServiceCIDR is the cluster's service network (DefaultServiceCIDR
	// when invalid); its first address is the API's in-cluster address.
	ServiceCIDR netip.Prefix
	// EtcdAddresses are where etcd listens (loopback is always added).
	EtcdAddresses []net.IP
	// Nodes get kubelet client certificates (system:node:<name>).
	Nodes []string
}

// ServiceAccountKey signs and verifies service account tokens.
type ServiceAccountKey struct {
	PublicPEM  []byte
	PrivatePEM secret.Secret
}

// Bundle is every certificate a cluster's control plane runs with.
type Bundle struct {
	CA *CA
	// APIServer is the API server's serving certificate.
	APIServer KeyPair
	// APIServerKubeletClient is how the API server reaches kubelets.
	APIServerKubeletClient KeyPair
	// APIServerEtcdClient is how the API server reaches etcd.
	APIServerEtcdClient KeyPair
	// EtcdServer serves etcd's clients; EtcdPeer talks to other members.
	EtcdServer KeyPair
	EtcdPeer   KeyPair
	// Admin is the cluster administrator (CN admin, O system:masters).
	Admin             KeyPair
	ControllerManager KeyPair
	Scheduler         KeyPair
	// Kwok manages the simulated nodes: their status, leases and pods.
	// It needs more than any one built-in role grants, so it is in
	// system:masters.
	Kwok           KeyPair
	ServiceAccount ServiceAccountKey
	Nodes          map[string]KeyPair
}

// NewBundle makes a new CA for the cluster and issues the bundle with it.
func NewBundle(spec BundleSpec) (*Bundle, error) {
	ca, err := NewCA(spec.ClusterName, spec.KeyType)
	if err != nil {
		return nil, err
	}
	return IssueBundle(ca, spec)
}

// IssueBundle issues every certificate of the bundle with ca, and a new
// service account key: what a cluster gets at creation and when its CA is
// rotated.
func IssueBundle(ca *CA, spec BundleSpec) (*Bundle, error) {
	dns, ips, err := APIServerSANs(spec.APIAddresses, spec.APIFQDN, spec.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	etcdIPs := appendIP([]net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}, spec.EtcdAddresses...)
	b := &Bundle{CA: ca, Nodes: map[string]KeyPair{}}
	for _, it := range []struct {
		dst *KeyPair
		req Request
	}{
		{&b.APIServer, Request{CommonName: APIServerName, DNSNames: dns, IPs: ips, Usage: ServerAuth}},
		{&b.APIServerKubeletClient, Request{CommonName: APIServerKubelet, Organizations: []string{MastersGroup}, Usage: ClientAuth}},
		{&b.APIServerEtcdClient, Request{CommonName: APIServerEtcd, Usage: ClientAuth}},
		{&b.EtcdServer, Request{CommonName: EtcdServerName, DNSNames: []string{"localhost"}, IPs: etcdIPs, Usage: ServerAuth | ClientAuth}},
		{&b.EtcdPeer, Request{CommonName: EtcdPeerName, DNSNames: []string{"localhost"}, IPs: etcdIPs, Usage: ServerAuth | ClientAuth}},
		{&b.Admin, Request{CommonName: AdminUser, Organizations: []string{MastersGroup}, Usage: ClientAuth}},
		{&b.ControllerManager, Request{CommonName: ControllerManager, Usage: ClientAuth}},
		{&b.Scheduler, Request{CommonName: Scheduler, Usage: ClientAuth}},
		{&b.Kwok, Request{CommonName: KwokController, Organizations: []string{MastersGroup}, Usage: ClientAuth}},
	} {
		if *it.dst, err = ca.Issue(it.req); err != nil {
			return nil, err
		}
	}
	for _, n := range spec.Nodes {
		if b.Nodes[n], err = ca.IssueNode(n); err != nil {
			return nil, err
		}
	}
	if b.ServiceAccount, err = NewServiceAccountKey(); err != nil {
		return nil, err
	}
	return b, nil
}

// IssueNode makes a kubelet's client certificate: the Node authorizer
// lets system:node:<name> in system:nodes act for that node only.
func (ca *CA) IssueNode(name string) (KeyPair, error) {
	if name == "" {
		return KeyPair{}, ecode.Errorf(ecode.Inval, "certs: node name is empty")
	}
	return ca.Issue(Request{CommonName: NodeUserPrefix + name, Organizations: []string{NodesGroup}, Usage: ClientAuth})
}

// IssueKubeletServing makes a kubelet's serving certificate: the API
// server reaches the kubelet at one of ips for logs and exec.
func (ca *CA) IssueKubeletServing(name string, ips []net.IP) (KeyPair, error) {
	if name == "" {
		return KeyPair{}, ecode.Errorf(ecode.Inval, "certs: node name is empty")
	}
	return ca.Issue(Request{CommonName: NodeUserPrefix + name, Organizations: []string{NodesGroup},
		DNSNames: []string{name}, IPs: appendIP(nil, ips...), Usage: ServerAuth})
}

// IssueEtcdClient makes a client certificate for etcd, e.g. for the API
// server of another cluster that keeps its objects in this cluster's etcd
// under a prefix of its own.
func (ca *CA) IssueEtcdClient(name string) (KeyPair, error) {
	return ca.Issue(Request{CommonName: name, Usage: ClientAuth})
}

// APIServerSANs are the API server certificate's names: the addresses and
// FQDN clients use, the first address of the service network, 127.0.0.1
// and the in-cluster names kubernetes[.default[.svc[.cluster.local]]].
func APIServerSANs(addrs []net.IP, fqdn string, serviceCIDR netip.Prefix) (dns []string, ips []net.IP, err error) {
	if !serviceCIDR.IsValid() {
		serviceCIDR = netip.MustParsePrefix(DefaultServiceCIDR)
	}
	svc, err := FirstServiceIP(serviceCIDR)
	if err != nil {
		return nil, nil, err
	}
	ips = appendIP(nil, addrs...)
	ips = appendIP(ips, net.IP(svc.AsSlice()), net.IPv4(127, 0, 0, 1).To4())
	dns = slices.Clone(apiServerDNSNames)
	if fqdn != "" && !slices.Contains(dns, fqdn) {
		dns = append([]string{fqdn}, dns...)
	}
	return dns, ips, nil
}

// FirstServiceIP is the service network's first usable address, which
// Kubernetes gives the "kubernetes" service (10.96.0.1 in 10.96.0.0/16).
func FirstServiceIP(cidr netip.Prefix) (netip.Addr, error) {
	a := cidr.Masked().Addr().Next()
	if !a.IsValid() || !cidr.Contains(a) {
		return netip.Addr{}, ecode.Errorf(ecode.Inval, "certs: service network %s has no address to give the API", cidr)
	}
	return a, nil
}

func appendIP(dst []net.IP, ips ...net.IP) []net.IP {
	for _, ip := range ips {
		if ip == nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		if !slices.ContainsFunc(dst, ip.Equal) {
			dst = append(dst, ip)
		}
	}
	return dst
}

// NewServiceAccountKey makes the key pair the API server signs service
// account tokens with and the controller manager hands out tokens under.
func NewServiceAccountKey() (ServiceAccountKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServiceAccountKey{}, fmt.Errorf("certs: generate the service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return ServiceAccountKey{}, fmt.Errorf("certs: encode the service account key: %w", err)
	}
	priv, err := encodeKey(k)
	if err != nil {
		return ServiceAccountKey{}, err
	}
	return ServiceAccountKey{
		PublicPEM:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		PrivatePEM: priv,
	}, nil
}
