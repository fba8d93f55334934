package nodeserver

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// Files of a certificate renewal in progress, beside node.pem and node.key.
const (
	// FileStagedKey is the new key made for a renewal: it becomes node.key
	// once the master has signed a certificate for it.
	FileStagedKey = "node.key.new"
	// fileSwitchCert is where pki.SwitchKeyPair keeps the new certificate
	// while node.key and node.pem are replaced one after the other.
	fileSwitchCert = FileCert + ".new"
)

// nodeServingRoles are the roles a node daemon's certificate may carry.
var nodeServingRoles = pki.NodeDaemonRoles()

// nodeCert renews the daemon's serving certificate without a restart.
type nodeCert struct {
	s  *Server
	mu sync.Mutex // one renewal step at a time
}

func (s *Server) certRoutes() {
	c := &nodeCert{s: s}
	handle(s, nodeapi.NodeCertCSR, c.csr)
	handle(s, nodeapi.NodeCertInstall, c.install)
}

func (c *nodeCert) path(name string) string { return filepath.Join(c.s.opts.StateDir, name) }

// csr stages a new key (or reuses the staged one, so a repeated request
// asks for the same key) and returns a request for it.
func (c *nodeCert) csr(ctx context.Context, _ struct{}) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	current, err := os.ReadFile(c.path(FileCert))
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "reading the node certificate: %v", err)
	}
	var keyPEM []byte
	key, err := readKey(c.path(FileStagedKey))
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		if keyPEM, key, err = pki.NewKeyPair(); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "making a new node key: %v", err)
		}
		if err := atomicfile.WriteFile(c.path(FileStagedKey), keyPEM, 0o600); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "staging the new node key: %v", err)
		}
	default:
		return nil, ecode.Errorf(ecode.Environ, "staged node key: %v", err)
	}
	csr, err := pki.NewCSR(key, c.s.name)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "certificate request: %v", err)
	}
	c.s.log.Info("new node key staged for a certificate renewal")
	return nodeapi.NodeCertCSRReply{CSR: string(csr), Current: string(current)}, nil
}

// install checks the signed certificate before anything changes: it must
// be for the staged key, for this node with a node daemon's role, and
// verify against the CA bundle the node trusts (which is the master's CA,
// so the master keeps reaching the node). Then the files are replaced and
// new connections get the certificate; open ones keep theirs.
func (c *nodeCert) install(ctx context.Context, a nodeapi.NodeCertInstallArgs) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM := []byte(a.Cert)
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return nil, ecode.Errorf(ecode.Inval, "the new node certificate does not parse: %v", err)
	}
	leaf := certs[0]
	serial := leaf.SerialNumber.String()
	if cur, err := os.ReadFile(c.path(FileCert)); err == nil && bytes.Equal(bytes.TrimSpace(cur), bytes.TrimSpace(certPEM)) {
		return nodeapi.NodeCertInstallReply{Serial: serial}, nil
	}
	keyPEM, err := os.ReadFile(c.path(FileStagedKey))
	if err != nil {
		return nil, ecode.Errorf(ecode.State, "no staged node key to install a certificate for: %v", err)
	}
	caPEM, err := os.ReadFile(c.path(FileCA))
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "reading the CA bundle: %v", err)
	}
	if err := checkNodeCert(leaf, certPEM, keyPEM, caPEM, c.s.name); err != nil {
		return nil, err
	}
	if err := pki.SwitchKeyPair(c.path(FileCert), c.path(FileKey), certPEM, keyPEM); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "replacing node.pem and node.key: %v", err)
	}
	if err := os.Remove(c.path(FileStagedKey)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.s.log.Warn("removing the staged key", "err", err)
	}
	if err := c.s.rpc.SetCredentials(certPEM, keyPEM, caPEM); err != nil {
		// The files are right and checked; a restart would serve them.
		return nil, ecode.Errorf(ecode.Environ, "switching to the new certificate: %v", err)
	}
	c.s.certEnd.Store(leaf.NotAfter.Unix())
	c.s.log.Info("node certificate renewed", "serial", serial, "not_after", leaf.NotAfter)
	return nodeapi.NodeCertInstallReply{Serial: serial, Installed: true}, nil
}

// checkNodeCert is what install requires of a new certificate.
func checkNodeCert(leaf *x509.Certificate, certPEM, keyPEM, caPEM []byte, name string) error {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return ecode.Errorf(ecode.Inval, "the new certificate is not for the staged key: %v", err)
	}
	if leaf.Subject.CommonName != name {
		return ecode.Errorf(ecode.Inval, "the new certificate is for %q, not this node %q", leaf.Subject.CommonName, name)
	}
	if role, _ := pki.RoleOf(leaf); !slices.Contains(nodeServingRoles, role) {
		return ecode.Errorf(ecode.Inval, "the new certificate's role %q is not a node daemon's", role)
	}
	pool, _, err := pki.CAPool(caPEM)
	if err != nil {
		return ecode.Errorf(ecode.Environ, "CA bundle: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return ecode.Errorf(ecode.Inval, "the new certificate does not verify against the CA this node trusts: %v", err)
	}
	return nil
}

// recoverCertSwitch finishes or forgets a switch the daemon was stopped
// in (see pki.SwitchKeyPair); a completed one drops the staged key too.
func recoverCertSwitch(stateDir string) error {
	done, err := pki.RecoverKeyPairSwitch(filepath.Join(stateDir, FileCert), filepath.Join(stateDir, FileKey))
	if err != nil {
		return err
	}
	if done {
		_ = os.Remove(filepath.Join(stateDir, FileStagedKey))
	}
	return nil
}

// readKey reads a PEM private key; a missing file is fs.ErrNotExist.
func readKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return pki.ParsePrivateKeyPEM(b)
}
