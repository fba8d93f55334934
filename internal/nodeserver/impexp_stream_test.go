package nodeserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/corral/corral/internal/impexp"
	"github.com/corral/corral/internal/nodeapi"
)

// TestTransferStreamFollowsThePeer: the node speaks Corral's stream to a
// peer with a Corral transfer certificate and Ganeti's to any other (a
// Ganeti node's certificate names only its host).
func TestTransferStreamFollowsThePeer(t *testing.T) {
	a, b := testNode(t, "node1.example.com"), testNode(t, "node2.example.com")
	optA, _ := pairOptions(t, a, b, "none")
	cfg, err := a.transferConfig(optA)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stream != impexp.StreamCorral {
		t.Errorf("with a Corral peer: %s", cfg.Stream)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().Unix()), Subject: pkix.Name{CommonName: "gnode.example.com"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ganeti := nodeapi.ImpExpOptions{KeyName: optA.KeyName, Magic: optA.Magic, Compress: "gzip",
		PeerCertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	cfg, err = a.transferConfig(ganeti)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stream != impexp.StreamGaneti {
		t.Errorf("with a Ganeti peer: %s", cfg.Stream)
	}
}
