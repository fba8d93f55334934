package apifront

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

func writePair(t *testing.T, ca *pki.CA, name, certPath, keyPath string) {
	t.Helper()
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: pki.RoleRAPI, DNSNames: []string{name}, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCertLoaderReloads(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "rapi.crt"), filepath.Join(dir, "rapi.key")
	l := &certLoader{cert: certPath, key: keyPath}
	if _, err := l.get(nil); err == nil {
		t.Fatal("no files: want an error")
	}
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, ca, "first", certPath, keyPath)
	c1, err := l.get(nil)
	if err != nil || c1.Leaf.Subject.CommonName != "first" {
		t.Fatalf("first load: %v %v", c1, err)
	}

	writePair(t, ca, "second", certPath, keyPath)
	// Modification times can be equal within the filesystem's resolution;
	// set them apart explicitly.
	later := time.Now().Add(time.Minute)
	for _, p := range []string{certPath, keyPath} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	c2, err := l.get(nil)
	if err != nil || c2.Leaf.Subject.CommonName != "second" {
		t.Fatalf("after renewal: %v %v", c2.Leaf.Subject, err)
	}

	// A half-written renewal keeps the last good pair in service.
	if err := os.WriteFile(keyPath, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	evenLater := later.Add(time.Minute)
	if err := os.Chtimes(keyPath, evenLater, evenLater); err != nil {
		t.Fatal(err)
	}
	c3, err := l.get(nil)
	if err != nil || c3 != c2 {
		t.Fatalf("broken renewal: got %v, %v; want the previous pair", c3, err)
	}
}
