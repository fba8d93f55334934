package bootstrap

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pki"
)

// rapiMinRSABits is the smallest RSA key corral-rapi will serve with.
const rapiMinRSABits = 2048

// RAPICertInfo describes a certificate just installed for corral-rapi.
type RAPICertInfo struct {
	Serial   string // hex
	Subject  string
	NotAfter time.Time
	// ClusterCA tells whether the certificate chains to the cluster CA,
	// which is what clients given the RAPI directory's ca.pem verify with.
	ClusterCA bool
}

// RenewRAPICert issues corral-rapi a new key pair from the cluster CA and
// installs it. The certificate keeps the names and addresses of the one it
// replaces (or, when that one is unreadable, of the master's certificate,
// from which init derived them). It needs the CA key: root on the master.
func RenewRAPICert(l Layout) (*RAPICertInfo, error) {
	md := l.MasterDir()
	ca, err := pki.LoadCA(filepath.Join(md, layout.MasterCAFile), filepath.Join(md, layout.MasterCAKeyFile))
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "cannot load the cluster CA from %s (run as root on the master node): %v", md, err)
	}
	name, dns, ips, err := rapiIdentity(l)
	if err != nil {
		return nil, err
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return nil, err
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: pki.RoleRAPI, DNSNames: dns, IPs: ips,
		PublicKey: key.Public(), ValidFor: 5 * 365 * 24 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("issuing the RAPI certificate: %w", err)
	}
	return installRAPIPair(l, certPEM, keyPEM, time.Now())
}

// InstallRAPICert installs a certificate and key an operator brought, given
// as one PEM bundle (the certificate first, then any chain, and the key),
// after ParseRAPIBundle's checks.
func InstallRAPICert(l Layout, bundle []byte, now time.Time) (*RAPICertInfo, error) {
	certPEM, keyPEM, err := ParseRAPIBundle(bundle, now)
	if err != nil {
		return nil, err
	}
	return installRAPIPair(l, certPEM, keyPEM, now)
}

// ParseRAPIBundle splits a PEM bundle into its certificates and its private
// key and checks that they can serve RAPI: exactly one private key, which
// belongs to the first certificate; that certificate valid at now and
// usable by a TLS server; its key RSA of at least 2048 bits or ECDSA.
// Errors are ecode Inval errors naming what is wrong.
func ParseRAPIBundle(bundle []byte, now time.Time) (certPEM, keyPEM []byte, err error) {
	var certs, keys [][]byte
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b))
		case b.Type == "PRIVATE KEY" || b.Type == "RSA PRIVATE KEY" || b.Type == "EC PRIVATE KEY":
			keys = append(keys, pem.EncodeToMemory(b))
		case bytes.Contains([]byte(b.Type), []byte("PRIVATE KEY")):
			return nil, nil, ecode.Errorf(ecode.Inval, "unsupported private key block %q (encrypted keys are not supported)", b.Type)
		}
	}
	if len(certs) == 0 {
		return nil, nil, ecode.Errorf(ecode.Inval, "no certificate in the PEM data")
	}
	if len(keys) != 1 {
		return nil, nil, ecode.Errorf(ecode.Inval, "the PEM data holds %d private keys, want exactly one", len(keys))
	}
	certPEM, keyPEM = bytes.Join(certs, nil), keys[0]
	leafBlock, _ := pem.Decode(certs[0])
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return nil, nil, ecode.Errorf(ecode.Inval, "invalid certificate: %v", err)
	}
	if err := checkRAPIKey(leaf.PublicKey); err != nil {
		return nil, nil, err
	}
	// The key must belong to the first certificate: that is the one a TLS
	// server presents.
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, ecode.Errorf(ecode.Inval, "the private key does not match the certificate: %v", err)
	}
	if now.Before(leaf.NotBefore) {
		return nil, nil, ecode.Errorf(ecode.Inval, "the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Before(leaf.NotAfter) {
		return nil, nil, ecode.Errorf(ecode.Inval, "the certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) &&
		!slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return nil, nil, ecode.Errorf(ecode.Inval, "the certificate is not for TLS servers (no serverAuth extended key usage)")
	}
	return certPEM, keyPEM, nil
}

func checkRAPIKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < rapiMinRSABits {
			return ecode.Errorf(ecode.Inval, "the certificate's RSA key has %d bits, at least %d are needed", n, rapiMinRSABits)
		}
		return nil
	case *ecdsa.PublicKey:
		return nil
	default:
		return ecode.Errorf(ecode.Inval, "the certificate's key is %T; RSA (at least %d bits) or ECDSA is needed", pub, rapiMinRSABits)
	}
}

// rapiIdentity returns the common name, DNS names and addresses a renewed
// RAPI certificate carries.
func rapiIdentity(l Layout) (string, []string, []net.IP, error) {
	var errs []error
	for _, p := range []string{l.RAPICert(), filepath.Join(l.MasterDir(), layout.MasterCertFile)} {
		data, err := os.ReadFile(p)
		if err == nil {
			var certs []*x509.Certificate
			if certs, err = pki.ParseCertificatesPEM(data); err == nil {
				c := certs[0]
				return c.Subject.CommonName, c.DNSNames, c.IPAddresses, nil
			}
		}
		errs = append(errs, err)
	}
	return "", nil, nil, ecode.Errorf(ecode.Environ, "no certificate to take corral-rapi's names from: %v", errors.Join(errs...))
}

// installRAPIPair replaces corral-rapi's key and certificate. Each file is
// replaced atomically with the owner of the RAPI directory (set up by init
// for corral-rapi) and init's modes, key first: corral-rapi reloads the pair
// when the files change and keeps serving the old pair while the two do not
// match, so it never serves a half-installed one and needs no restart.
func installRAPIPair(l Layout, certPEM, keyPEM []byte, now time.Time) (*RAPICertInfo, error) {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "certificate and key do not form a pair: %v", err)
	}
	st, err := os.Stat(l.RAPIDir())
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "corral-rapi's directory: %v (run on the master node of an initialised cluster)", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("cannot read the owner of %s", l.RAPIDir())
	}
	uid, gid := int(sys.Uid), int(sys.Gid)
	write := func(path string, data []byte, mode os.FileMode) error {
		return atomicfile.WriteFrom(path, mode, func(w io.Writer) error {
			// The file must belong to corral-rapi before it is renamed into
			// place, or corral-rapi could find it unreadable.
			f, ok := w.(*os.File)
			if !ok {
				return fmt.Errorf("cannot set the owner of %s", path)
			}
			if err := f.Chown(uid, gid); err != nil {
				return err
			}
			_, err := f.Write(data)
			return err
		})
	}
	if err := write(l.RAPIKey(), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing corral-rapi's key: %w", err)
	}
	if err := write(l.RAPICert(), certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing corral-rapi's certificate: %w", err)
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return nil, err
	}
	leaf := certs[0]
	info := &RAPICertInfo{Serial: leaf.SerialNumber.Text(16), Subject: leaf.Subject.String(), NotAfter: leaf.NotAfter}
	if caPEM, err := os.ReadFile(l.RAPICA()); err == nil {
		if pool, _, err := pki.CAPool(caPEM); err == nil {
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			info.ClusterCA = err == nil
		}
	}
	return info, nil
}
