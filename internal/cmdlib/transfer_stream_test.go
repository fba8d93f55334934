package cmdlib

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

// TestPeerStreamNote: the job log names Ganeti's stream exactly when the
// other cluster's transfer certificate is not one Corral makes.
func TestPeerStreamNote(t *testing.T) {
	corralPEM, _, err := pki.NewTransferCert("node1.example.com", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gnode.example.com"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ganetiPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if n := peerStreamNote(string(corralPEM)); n != "Corral's stream" {
		t.Errorf("Corral peer: %q", n)
	}
	if n := peerStreamNote(string(ganetiPEM)); !strings.HasPrefix(n, "Ganeti's stream") {
		t.Errorf("Ganeti peer: %q", n)
	}
}
