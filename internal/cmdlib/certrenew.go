package cmdlib

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// ClusterCerts is the master's part in renewing certificates: it holds the
// cluster CA and corrald's own (client) certificate.
type ClusterCerts interface {
	// SignNodeCert signs a node's certificate request with the cluster
	// CA. Only the key comes from the request; name, role and addresses
	// are the caller's.
	SignNodeCert(csrPEM []byte, role pki.Role, name string, ips []net.IP) ([]byte, error)
	// RenewMasterCert gives corrald a new key and certificate from the
	// cluster CA, records them in its state directory and presents them on
	// node connections opened from now on. It returns the new serial.
	RenewMasterCert(ctx context.Context) (serial string, err error)
}

// nodeCertPlan renews the node daemons' certificates (renew-crypto
// --new-node-certificates). The master never loses access to a node: the
// new certificates come from the CA the master trusts, each node switches
// only after checking its certificate against its key and that CA, and it
// keeps its open connections.
type nodeCertPlan struct {
	// Signed are the new certificates by node uuid, signed in the first
	// step so that a resumed job installs the very same ones.
	Signed map[string]string `json:"signed,omitempty"`
}

// nodeServingRoles are the roles a node daemon's certificate may carry.
var nodeServingRoles = pki.NodeDaemonRoles()

func (pl *nodeCertPlan) steps() []Step {
	return []Step{{"node-cert-sign", pl.sign}, {"node-cert-install", pl.install}}
}

// sign has every online node stage a new key and request a certificate
// for it, and signs each with the node's current name, role and addresses.
func (pl *nodeCertPlan) sign(ctx context.Context, s *StepCtx) error {
	master := s.Cfg().Cluster().MasterNode
	pl.Signed = map[string]string{}
	for _, n := range sshNodesSorted(s.p) {
		if n.Offline {
			s.Logf(ctx, "Node %s is offline: its certificate is not renewed", n.Name)
			continue
		}
		var r nodeapi.NodeCertCSRReply
		if err := s.RPC(ctx, n, nodeapi.NodeCertCSR, struct{}{}, &r); err != nil {
			if n.UUID == master {
				return ecode.Errorf(ecode.Environ, "Making a new key on the master %s: %v", n.Name, err)
			}
			s.Logf(ctx, "Warning: node %s made no new key, its certificate is not renewed: %v", n.Name, err)
			continue
		}
		role, ips, err := currentIdentity(r.Current, n.Name)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "Node %s: %v", n.Name, err)
		}
		cert, err := s.p.Certs.SignNodeCert([]byte(r.CSR), role, n.Name, ips)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "Signing the new certificate of node %s: %v", n.Name, err)
		}
		pl.Signed[n.UUID] = string(cert)
	}
	s.Logf(ctx, "Signed new certificates for %d node(s) with the cluster CA", len(pl.Signed))
	return nil
}

// currentIdentity is the role and addresses of the certificate a node
// serves now, which its renewed certificate keeps.
func currentIdentity(currentPEM, name string) (pki.Role, []net.IP, error) {
	certs, err := pki.ParseCertificatesPEM([]byte(currentPEM))
	if err != nil || len(certs) == 0 {
		return "", nil, fmt.Errorf("its current certificate does not parse: %v", err)
	}
	cur := certs[0]
	if cur.Subject.CommonName != name {
		return "", nil, fmt.Errorf("its current certificate is for %q", cur.Subject.CommonName)
	}
	role, ok := pki.RoleOf(cur)
	if !ok {
		role = pki.RoleNode
	}
	if !slices.Contains(nodeServingRoles, role) {
		return "", nil, fmt.Errorf("its current certificate's role %q is not a node daemon's", role)
	}
	return role, cur.IPAddresses, nil
}

// install sends each node its certificate. A node that fails keeps its old
// certificate, which stays valid: the others go on and the job reports it.
func (pl *nodeCertPlan) install(ctx context.Context, s *StepCtx) error {
	var failed []string
	done := 0
	for _, n := range sshNodesSorted(s.p) {
		cert, ok := pl.Signed[n.UUID]
		if !ok {
			continue
		}
		var r nodeapi.NodeCertInstallReply
		if err := s.RPC(ctx, n, nodeapi.NodeCertInstall, nodeapi.NodeCertInstallArgs{Cert: cert}, &r); err != nil {
			s.Logf(ctx, "Warning: node %s keeps its old certificate: %v", n.Name, err)
			failed = append(failed, n.Name)
			continue
		}
		done++
		s.Logf(ctx, "Node %s serves its new certificate (serial %s)", n.Name, r.Serial)
	}
	if len(failed) > 0 {
		return ecode.Errorf(ecode.Environ, "Node(s) %s keep their old certificates (still valid); %d renewed", strings.Join(failed, ", "), done)
	}
	return nil
}

// clusterCertStep gives corrald a new certificate, then checks that every
// online node accepts it on a new connection.
func clusterCertStep() Step {
	return Step{"cluster-cert", func(ctx context.Context, s *StepCtx) error {
		serial, err := s.p.Certs.RenewMasterCert(ctx)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "Renewing the cluster certificate: %v", err)
		}
		s.Logf(ctx, "corrald presents its new certificate (serial %s) to the nodes from now on", serial)
		var failed []string
		for _, n := range sshNodesSorted(s.p) {
			if n.Offline {
				continue
			}
			var v nodeapi.VersionReply
			if err := s.p.RPC.Call(ctx, n, nodeapi.Version, "", nil, &v); err != nil {
				s.Logf(ctx, "Warning: node %s did not answer with the new certificate: %v", n.Name, err)
				failed = append(failed, n.Name)
			}
		}
		if len(failed) > 0 {
			return ecode.Errorf(ecode.Environ, "Node(s) %s did not answer after the cluster certificate was renewed", strings.Join(failed, ", "))
		}
		return nil
	}}
}
