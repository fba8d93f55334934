package pki

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
)

// ServerTLSConfig is the configuration of a Corral TLS listener. When
// clientRoles is not empty, clients must present a certificate issued by a
// CA in caPEM (a bundle) whose role is one of clientRoles; otherwise no
// client certificate is requested.
//
// The CA that issued the server certificate is appended to the chain the
// server sends, so a joining node that knows only the CA's pin can find and
// check it (see PinnedClientTLSConfig).
func ServerTLSConfig(certPEM, keyPEM, caPEM []byte, clientRoles ...Role) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: server key pair: %w", err)
	}
	pool, cas, err := CAPool(caPEM)
	if err != nil {
		return nil, err
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("pki: server certificate: %w", err)
		}
	}
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) != nil {
			continue
		}
		present := slices.ContainsFunc(cert.Certificate, func(der []byte) bool { return string(der) == string(ca.Raw) })
		if !present {
			cert.Certificate = append(cert.Certificate, ca.Raw)
		}
		break
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.NoClientCert,
	}
	if len(clientRoles) > 0 {
		roles := slices.Clone(clientRoles)
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = pool
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return checkPeerRole(cs, roles, "client")
		}
	}
	return cfg, nil
}

// ClientTLSConfig is the configuration of a connection to a Corral server:
// the server's chain must end in a CA of caPEM (a bundle, so certificates
// from the old and the new CA both verify during rotation), name serverName
// in its CommonName and SANs, and carry one of serverRoles (any role when
// empty). certPEM and keyPEM are the client's own certificate; nil means
// none is presented.
func ClientTLSConfig(certPEM, keyPEM, caPEM []byte, serverName string, serverRoles ...Role) (*tls.Config, error) {
	if serverName == "" {
		return nil, errors.New("pki: server name to verify is empty")
	}
	pool, _, err := CAPool(caPEM)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		// Standard verification checks the chain against RootCAs and
		// serverName against the SANs; VerifyConnection adds the role and
		// the CommonName, which Go no longer looks at.
		ServerName: serverName,
	}
	if certPEM != nil || keyPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("pki: client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	roles := slices.Clone(serverRoles)
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("pki: server sent no certificate")
		}
		// Belt and braces: standard verification has matched the SANs
		// already, and Corral's CA always repeats the name as a SAN.
		if leaf := cs.PeerCertificates[0]; leaf.Subject.CommonName != serverName && leaf.VerifyHostname(serverName) != nil {
			return fmt.Errorf("pki: server certificate is for %q, not %q", leaf.Subject.CommonName, serverName)
		}
		if len(roles) == 0 {
			return nil
		}
		return checkPeerRole(cs, roles, "server")
	}
	return cfg, nil
}

// PinnedClientTLSConfig is for a node that joins a cluster knowing only the
// SHA-256 of the cluster CA (from its join token). The server's chain must
// include a CA certificate with that fingerprint, the server certificate
// must verify against that CA alone and carry one of serverRoles (master or
// master-candidate when empty). onCA, when not nil, receives the pinned CA
// certificate as PEM once a handshake has passed these checks.
//
// Go's verifier needs its roots before the handshake, and the pinned root is
// only known during it, so standard verification is switched off and the
// complete verification is done in VerifyConnection instead, which runs on
// every handshake, resumed ones included.
func PinnedClientTLSConfig(caSHA256 string, onCA func(caPEM []byte), serverRoles ...Role) *tls.Config {
	roles := slices.Clone(serverRoles)
	if len(roles) == 0 {
		roles = JoinServerRoles()
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by verifyPinned below, never skipped
		VerifyConnection: func(cs tls.ConnectionState) error {
			ca, err := verifyPinned(cs, caSHA256, roles)
			if err != nil {
				return err
			}
			if onCA != nil {
				onCA(encodeCert(ca.Raw))
			}
			return nil
		},
	}
}

func verifyPinned(cs tls.ConnectionState, pin string, roles []Role) (*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, errors.New("pki: server sent no certificate")
	}
	var ca *x509.Certificate
	for _, c := range cs.PeerCertificates {
		if subtle.ConstantTimeCompare([]byte(fingerprint(c.Raw)), []byte(pin)) == 1 {
			ca = c
			break
		}
	}
	if ca == nil {
		return nil, errors.New("pki: server chain has no CA matching the pinned SHA-256")
	}
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return nil, errors.New("pki: the pinned certificate is not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("pki: server certificate does not verify against the pinned CA: %w", err)
	}
	cs.VerifiedChains = chains
	if err := checkPeerRole(cs, roles, "server"); err != nil {
		return nil, err
	}
	return ca, nil
}

// checkPeerRole runs after chain verification and requires the verified leaf
// to carry one of roles.
func checkPeerRole(cs tls.ConnectionState, roles []Role, peer string) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return fmt.Errorf("pki: %s certificate was not verified", peer)
	}
	role, ok := RoleOf(cs.VerifiedChains[0][0])
	if !ok {
		return fmt.Errorf("pki: %s certificate carries no role", peer)
	}
	if !slices.Contains(roles, role) {
		return fmt.Errorf("pki: %s role %q is not allowed here", peer, role)
	}
	return nil
}
