package master

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rpc"
)

// masterCerts is the master's side of certificate renewal (cmdlib's
// ClusterCerts): it signs node certificates with the cluster CA and renews
// corrald's own certificate, the one it presents to node daemons.
type masterCerts struct {
	ca                *pki.CA
	client            *rpc.Client
	certPath, keyPath string

	mu sync.Mutex // one renewal of master.pem at a time
}

func (m *masterCerts) SignNodeCert(csrPEM []byte, role pki.Role, name string, ips []net.IP) ([]byte, error) {
	validity := pki.DefaultCertValidity
	if role == pki.RoleMigration {
		validity = pki.MigrationCertValidity
	}
	return m.ca.SignCSR(csrPEM, role, name, ips, validity)
}

// RenewMasterCert issues a new key and certificate for the name and
// addresses of the current master.pem, replaces master.pem and master.key
// (recoverably, see pki.SwitchKeyPair) and has the node RPC client present
// it on new connections. Calls in flight finish on their connections.
//
// The join listener and master forwarding read master.pem when they start:
// they keep serving the previous certificate, still valid under the same
// CA, until corrald restarts.
func (m *masterCerts) RenewMasterCert(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, err := readCert(m.certPath)
	if err != nil {
		return "", err
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return "", err
	}
	role, ok := pki.RoleOf(cur)
	if !ok {
		role = pki.RoleMaster
	}
	certPEM, err := m.ca.Issue(pki.IssueRequest{CommonName: cur.Subject.CommonName, Role: role,
		DNSNames: cur.DNSNames, IPs: cur.IPAddresses, PublicKey: key.Public()})
	if err != nil {
		return "", err
	}
	if err := pki.SwitchKeyPair(m.certPath, m.keyPath, certPEM, keyPEM); err != nil {
		return "", err
	}
	if err := m.client.SetCertificate(certPEM, keyPEM); err != nil {
		return "", err
	}
	leaf, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return "", err
	}
	return leaf[0].SerialNumber.String(), nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := pki.ParseCertificatesPEM(b)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("certificate %s: %v", path, err)
	}
	return certs[0], nil
}
