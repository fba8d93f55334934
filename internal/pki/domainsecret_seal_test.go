package pki

import (
	"bytes"
	"testing"
	"time"
)

func TestSealDomainSecret(t *testing.T) {
	ca, err := NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s := NewDomainSecret()
	sealed, err := ca.SealDomainSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(s.Reveal())) {
		t.Fatal("the sealed secret holds the secret in clear")
	}
	again, _ := ca.SealDomainSecret(s)
	if bytes.Equal(sealed, again) {
		t.Error("two seals of one secret are equal: the nonce is not fresh")
	}
	got, err := ca.OpenDomainSecret(sealed)
	if err != nil || got.Reveal() != s.Reveal() {
		t.Fatalf("open: %v", err)
	}
	// A CA loaded from its files (as each candidate does) opens it too.
	dir := t.TempDir()
	if err := ca.Save(dir+"/ca.pem", dir+"/ca.key"); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(dir+"/ca.pem", dir+"/ca.key")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loaded.OpenDomainSecret(sealed); err != nil || got.Reveal() != s.Reveal() {
		t.Fatalf("open with the loaded CA: %v", err)
	}
	other, _ := NewCA("c2", time.Hour)
	if _, err := other.OpenDomainSecret(sealed); err == nil {
		t.Fatal("another cluster's CA opened the secret")
	}
	sealed[len(sealed)-5] ^= 1
	if _, err := ca.OpenDomainSecret(sealed); err == nil {
		t.Fatal("a changed seal opened")
	}
}
