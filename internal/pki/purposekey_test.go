package pki

import (
	"path/filepath"
	"testing"
	"time"
)

func TestPurposeKey(t *testing.T) {
	ca, err := NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.PurposeKey("coe private keys v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Reveal()) != 32 {
		t.Fatalf("key of %d bytes", len(a.Reveal()))
	}
	// Another candidate loading the same CA from its files derives the
	// same key.
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := ca.Save(cert, key); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := loaded.PurposeKey("coe private keys v1"); b != a {
		t.Fatal("the same CA derived another key")
	}
	if b, _ := ca.PurposeKey("other purpose"); b == a {
		t.Fatal("two purposes share a key")
	}
	other, _ := NewCA("c2", time.Hour)
	if b, _ := other.PurposeKey("coe private keys v1"); b == a {
		t.Fatal("two CAs derived the same key")
	}
	if _, err := ca.PurposeKey(""); err == nil {
		t.Fatal("an empty purpose was accepted")
	}
}
