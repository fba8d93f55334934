// Package forwardtls is the mutual TLS of a master's LUXI forward address:
// the configurations built from a master state directory, which every
// master candidate holds, and dialing that address. corrald serves and
// relays over it (internal/master); tools that must tell which candidate
// is the master dial it without linking the master.
package forwardtls

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pki"
)

// DialTimeout bounds connecting to the master, handshake included.
const DialTimeout = 5 * time.Second

// Configs builds the master's server and the standby's client
// configurations from the CA bundle and the master certificate in the
// master state directory:
//   - the master accepts only clients whose certificate the cluster CA
//     issued with the master role (etcd members' and node daemons'
//     certificates, from the same CA, are refused);
//   - a standby accepts only a server certificate the cluster CA issued
//     with the master role, for the name in its own master certificate.
func Configs(stateDir string) (server, client *tls.Config, err error) {
	caPEM, err := os.ReadFile(filepath.Join(stateDir, layout.MasterCAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("forwarding: %w", err)
	}
	certPath := filepath.Join(stateDir, layout.MasterCertFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, fmt.Errorf("forwarding: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(stateDir, layout.MasterKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("forwarding: %w", err)
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return nil, nil, fmt.Errorf("forwarding: master certificate %s: %v", certPath, err)
	}
	name := certs[0].Subject.CommonName
	if role, ok := pki.RoleOf(certs[0]); !ok || role != pki.RoleMaster {
		return nil, nil, fmt.Errorf("forwarding: %s is not a master certificate (role %q)", certPath, role)
	}
	// Only the master role may call in: every candidate holds the master
	// certificate, and an etcd member must not be able to submit jobs.
	if server, err = pki.ServerTLSConfig(certPEM, keyPEM, caPEM, pki.RoleMaster); err != nil {
		return nil, nil, fmt.Errorf("forwarding: %w", err)
	}
	if client, err = pki.ClientTLSConfig(certPEM, keyPEM, caPEM, name, pki.RoleMaster); err != nil {
		return nil, nil, fmt.Errorf("forwarding: %w", err)
	}
	return server, client, nil
}

// Dial connects to a master's forward address with the client
// configuration cfg, within DialTimeout.
func Dial(ctx context.Context, cfg *tls.Config, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the master at %s: %w", addr, err)
	}
	return nc, nil
}

// DialClient connects to the forward address of a master with the
// certificates of the master state directory stateDir, as a standby does,
// and returns a LUXI client on that connection. Only the elected master
// listens there, so tools use it to tell which candidate is master.
func DialClient(ctx context.Context, stateDir, addr string) (*luxi.Client, error) {
	_, cfg, err := Configs(stateDir)
	if err != nil {
		return nil, err
	}
	nc, err := Dial(ctx, cfg, addr)
	if err != nil {
		return nil, err
	}
	return luxi.NewClient(nc), nil
}
