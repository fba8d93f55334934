package nodeserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
)

// fastCert makes a self-signed P-256 transfer certificate: the tests need
// many, and RSA keys are slow to generate under the race detector.
func fastCert(cn string, validity time.Duration, now time.Time) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: cn, OrganizationalUnit: []string{pki.TransferStreamOU}},
		DNSNames:     []string{cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestCertCreateRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "crypto")
	c := newCertStore(dir, "node1.example.com", pki.NewTransferCert, discardLog())
	start := time.Now()
	// Asking for a month gets the 7-day cap.
	name, certPEM, err := c.create(30 * 24 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !transferKeyRE.MatchString(name) {
		t.Fatalf("key name %q", name)
	}
	if strings.Contains(string(certPEM), "PRIVATE KEY") {
		t.Fatal("the reply carries the private key")
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil || len(certs) != 1 {
		t.Fatalf("certificate: %v (%d)", err, len(certs))
	}
	if cn := certs[0].Subject.CommonName; cn != "node1.example.com" {
		t.Errorf("CN %q", cn)
	}
	if limit := start.Add(maxTransferValidity + time.Minute); certs[0].NotAfter.After(limit) {
		t.Errorf("NotAfter %s beyond the 7-day cap %s", certs[0].NotAfter, limit)
	}
	keyDir := filepath.Join(dir, name)
	if m := mode(t, keyDir); m != 0o700 {
		t.Errorf("key dir mode %o", m)
	}
	for _, f := range []string{transferKeyFile, transferCertFile} {
		if m := mode(t, filepath.Join(keyDir, f)); m != 0o400 {
			t.Errorf("%s mode %o", f, m)
		}
	}
	tc, err := c.load(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificate) != 1 || string(tc.Certificate[0]) != string(certs[0].Raw) {
		t.Fatal("loaded certificate differs from the created one")
	}
	if err := c.remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keyDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key dir still there: %v", err)
	}
	if err := c.remove(name); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := c.load(name); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("load of a removed key: %v", err)
	}
}

func TestCertBadNames(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "crypto")
	victim := filepath.Join(base, "victim")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	c := newCertStore(dir, "node1", fastCert, discardLog())
	for _, name := range []string{"", "..", "../victim", "/etc", "x509-1-ab/..", "x509-1-ab/../../victim",
		"x509-1-AB", "x509--ab", "x509-1-", "X509-1-ab", "x509-1-ab\n", "x509-1-ab\x00", "cert"} {
		if err := c.remove(name); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("remove %q: %v", name, err)
		}
		if _, err := c.load(name); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("load %q: %v", name, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("a bad name reached the file system: %v", err)
	}
}

func TestCertValidity(t *testing.T) {
	c := newCertStore(filepath.Join(t.TempDir(), "crypto"), "node1", fastCert, discardLog())
	if _, _, err := c.create(-time.Second); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("negative validity: %v", err)
	}
	now := time.Now().Truncate(time.Second) // certificates keep whole seconds
	c.now = func() time.Time { return now }
	name, certPEM, err := c.create(0)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCertificatesPEM(certPEM)
	if got := certs[0].NotAfter.Sub(now); got != defaultTransferValidity {
		t.Fatalf("default validity %s", got)
	}
	if err := c.remove(name); err != nil {
		t.Fatal(err)
	}
}

// An expired key goes away when the next one is made; a live one and
// foreign entries stay.
func TestCertSweep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "crypto")
	c := newCertStore(dir, "node1", fastCert, discardLog())
	t0 := time.Now()
	c.now = func() time.Time { return t0 }
	short, _, err := c.create(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	long, _, err := c.create(5 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A key directory whose creation died before the certificate was
	// written, long ago, and one of now.
	oldBroken := filepath.Join(dir, "x509-1000-abcdef12")
	newBroken := filepath.Join(dir, "x509-"+strconv.FormatInt(t0.Unix(), 10)+"-abcdef12")
	foreign := filepath.Join(dir, "something-else")
	for _, d := range []string{oldBroken, newBroken, foreign} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.now = func() time.Time { return t0.Add(2 * time.Hour) }
	fresh, _, err := c.create(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{filepath.Join(dir, short), false}, {oldBroken, false},
		{filepath.Join(dir, long), true}, {filepath.Join(dir, fresh), true}, {newBroken, true}, {foreign, true},
	} {
		_, err := os.Stat(tc.path)
		if got := err == nil; got != tc.want {
			t.Errorf("%s present=%v, want %v", filepath.Base(tc.path), got, tc.want)
		}
	}
}

// FuzzCheckKeyName: an accepted key name is one plain path component.
func FuzzCheckKeyName(f *testing.F) {
	for _, s := range []string{"x509-1700000000-0a1b2c3d", "../x509-1-a", "x509-1-a/b", "", "x509-1-a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkKeyName(name) != nil {
			return
		}
		if filepath.Base(name) != name || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") {
			t.Fatalf("accepted %q", name)
		}
	})
}
