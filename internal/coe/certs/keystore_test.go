package certs

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const testSealKey = secret.Secret("0123456789abcdef0123456789abcdef")

func TestLocalKeyStoreHoldsOnlyCiphertext(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	ks, err := NewLocal(st, "/coe/keys/", testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := mustCA(t)
	if err := ks.PutKey(ctx, "uuid-1", "ca", ca.KeyPEM()); err != nil {
		t.Fatal(err)
	}
	got, err := ks.Key(ctx, "uuid-1", "ca")
	if err != nil {
		t.Fatal(err)
	}
	if got != ca.KeyPEM() {
		t.Error("the key read back differs from the one stored")
	}
	if _, err := LoadCA(ca.CertPEM(), got); err != nil {
		t.Errorf("LoadCA with the stored key: %v", err)
	}

	kvs, _, err := st.Range(ctx, "/", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].Key != "/coe/keys/uuid-1/ca" {
		t.Fatalf("store holds %d keys (%v)", len(kvs), kvs)
	}
	plain := []byte(ca.KeyPEM().Reveal())
	body := plain[len("-----BEGIN PRIVATE KEY-----\n") : len("-----BEGIN PRIVATE KEY-----\n")+40]
	if bytes.Contains(kvs[0].Value, []byte("PRIVATE KEY")) || bytes.Contains(kvs[0].Value, body) {
		t.Error("the store holds the private key in clear")
	}
}

func TestLocalKeyStoreRefusesWrongKeyAndSwappedSlots(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	ks, err := NewLocal(st, "/k/", testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.PutKey(ctx, "c1", "ca", "-----BEGIN PRIVATE KEY-----\nc1\n"); err != nil {
		t.Fatal(err)
	}
	if err := ks.PutKey(ctx, "c2", "ca", "-----BEGIN PRIVATE KEY-----\nc2\n"); err != nil {
		t.Fatal(err)
	}
	other, err := NewLocal(st, "/k/", "another key of sixteen+ bytes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Key(ctx, "c1", "ca"); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Errorf("opened with another sealing key: %v", err)
	}
	// Copy c2's box over c1's: it must not open as c1's key.
	kv, err := st.Get(ctx, "/k/c2/ca")
	if err != nil || kv == nil {
		t.Fatal(err)
	}
	if _, err := st.Txn(ctx, nil, []store.Op{store.Put("/k/c1/ca", kv.Value)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Key(ctx, "c1", "ca"); err == nil {
		t.Error("cluster c2's key opened as cluster c1's")
	}

	if err := ks.DeleteKeys(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Key(ctx, "c2", "ca"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("key of a deleted cluster: %v, want %s", err, ecode.NoEnt)
	}
	if _, err := ks.Key(ctx, "c1/../c2", "ca"); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("slot with a slash: %v, want %s", err, ecode.Inval)
	}
	if _, err := NewLocal(st, "/k/", "short"); err == nil {
		t.Error("NewLocal took a five-byte sealing key")
	}
}
