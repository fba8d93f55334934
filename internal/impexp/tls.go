package impexp

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// errPeerCert marks a handshake that failed because the other end
// presented a certificate other than the pinned one. Such a failure is
// final: retrying cannot make the certificate right.
var errPeerCert = errors.New("peer certificate is not the expected one")

// verifyPeer accepts exactly the pinned certificate, inside its validity
// window. Only the leaf matters: the handshake proves possession of its key
// and nothing else in a chain is trusted.
func verifyPeer(pinned *x509.Certificate, rawCerts [][]byte, now time.Time) error {
	if len(rawCerts) == 0 {
		return fmt.Errorf("%w: none presented", errPeerCert)
	}
	if !bytes.Equal(rawCerts[0], pinned.Raw) {
		return errPeerCert
	}
	if err := checkValidity(pinned, now); err != nil {
		return fmt.Errorf("%w: %w", errPeerCert, err)
	}
	return nil
}

// serverTLS is the import side's configuration: any client certificate is
// requested, and VerifyPeerCertificate then admits only the pinned one.
// Session tickets are off, so every connection runs a full handshake and
// the callback.
func serverTLS(cfg Config) *tls.Config {
	pinned := cfg.Peer
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{cfg.Cert},
		ClientAuth:             tls.RequireAnyClientCert,
		SessionTicketsDisabled: true,
		// Bulk transfer: full-size records from the first byte.
		DynamicRecordSizingDisabled: true,
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			return verifyPeer(pinned, rawCerts, time.Now())
		},
	}
}

// clientTLS is the export side's configuration. Go's client always runs
// standard verification unless told to skip it, so the pinned certificate
// is made the one root and its own first SAN the name to check: the only
// chain that verifies is the pinned certificate itself. VerifyConnection
// then compares the DER bytes, which also refuses anything the pinned
// certificate might have signed. No path trusts a CA or the network
// address. The clock Go verifies against is moved forward by up to
// clockSkew while the peer's certificate is younger than that, matching the
// import side's allowance.
func clientTLS(cfg Config) (*tls.Config, error) {
	pinned := cfg.Peer
	name, err := peerName(pinned)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(pinned)
	return &tls.Config{
		MinVersion:                  tls.VersionTLS13,
		Certificates:                []tls.Certificate{cfg.Cert},
		RootCAs:                     roots,
		ServerName:                  name,
		DynamicRecordSizingDisabled: true,
		Time: func() time.Time {
			now := time.Now()
			if now.Before(pinned.NotBefore) && pinned.NotBefore.Sub(now) <= clockSkew {
				return pinned.NotBefore
			}
			return now
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, 0, len(cs.PeerCertificates))
			for _, c := range cs.PeerCertificates {
				raw = append(raw, c.Raw)
			}
			return verifyPeer(pinned, raw, time.Now())
		},
	}, nil
}

// peerName is the name standard verification checks the pinned
// certificate against: one of its own SANs, so the check holds by
// construction (transfer certificates carry their CN as a DNS SAN).
func peerName(c *x509.Certificate) (string, error) {
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0], nil
	}
	if len(c.IPAddresses) > 0 {
		return c.IPAddresses[0].String(), nil
	}
	return "", ecode.Errorf(ecode.Inval, "peer certificate %q has no DNS or IP subject alternative name", c.Subject.CommonName)
}

// isCertFailure tells a certificate rejection from a network failure.
func isCertFailure(err error) bool {
	var ve *tls.CertificateVerificationError
	return errors.Is(err, errPeerCert) || errors.As(err, &ve)
}
