package rapiclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// ganetiStyleServer serves /version over TLS with a certificate like
// Ganeti's rapi.pem: self-signed, CN ganeti.example.com, no SAN, no
// extension. It returns the server and the certificate's PEM.
func ganetiStyleServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().Unix()), Subject: pkix.Name{CommonName: "ganeti.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "2")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestGanetiRAPICertificateIsPinned: a server certificate that is itself
// in the CA file is accepted whatever names it carries (Ganeti's RAPI
// certificate names ganeti.example.com); another self-signed certificate
// without the host's name is still refused.
func TestGanetiRAPICertificateIsPinned(t *testing.T) {
	srv, certPEM := ganetiStyleServer(t)
	for _, tc := range []struct {
		name string
		ca   []byte
		ok   bool
	}{
		{"its own certificate", certPEM, true},
		{"another certificate", selfSignedPEM(t), false},
		{"another server's certificate", func() []byte { _, p := ganetiStyleServer(t); return p }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{URL: srv.URL, User: "u", Password: "p", CAPEM: tc.ca})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Do(context.Background(), "GET", "/version", nil, nil, nil)
			if tc.ok && err != nil {
				t.Fatalf("GET /version: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("a server with another certificate was accepted")
			}
		})
	}
}
