package pki

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSwitchKeyPair(t *testing.T) {
	ca, err := NewCA("alpha", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair := func() (cert, key []byte) {
		keyPEM, k, err := NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		c, err := ca.Issue(IssueRequest{CommonName: "n1", Role: RoleNode, PublicKey: k.Public()})
		if err != nil {
			t.Fatal(err)
		}
		return c, keyPEM
	}
	dir := t.TempDir()
	cp, kp := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	oldC, oldK := pair()
	newC, newK := pair()
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reset := func() {
		if err := WriteKeyPair(cp, kp, oldC, oldK); err != nil {
			t.Fatal(err)
		}
	}
	reset()

	if err := SwitchKeyPair(cp, kp, newC, oldK); err == nil {
		t.Fatal("a mismatched pair was written")
	}
	if !bytes.Equal(read(cp), oldC) || !bytes.Equal(read(kp), oldK) {
		t.Fatal("a refused switch changed the files")
	}
	if err := SwitchKeyPair(cp, kp, newC, newK); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(cp), newC) || !bytes.Equal(read(kp), newK) {
		t.Fatal("the new pair is not in place")
	}
	if _, err := os.Stat(cp + switchSuffix); err == nil {
		t.Fatal("pending certificate left behind")
	}

	tests := []struct {
		name          string
		key           []byte // node.key when the process stopped
		wantCert      []byte
		wantCompleted bool
	}{
		{"stopped before the key", oldK, oldC, false},
		{"stopped between key and certificate", newK, newC, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reset()
			if err := os.WriteFile(cp+switchSuffix, newC, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(kp, tc.key, 0o600); err != nil {
				t.Fatal(err)
			}
			done, err := RecoverKeyPairSwitch(cp, kp)
			if err != nil || done != tc.wantCompleted {
				t.Fatalf("completed %v, %v; want %v", done, err, tc.wantCompleted)
			}
			if !bytes.Equal(read(cp), tc.wantCert) || !bytes.Equal(read(kp), tc.key) {
				t.Fatal("wrong pair after recovery")
			}
			if _, err := os.Stat(cp + switchSuffix); err == nil {
				t.Fatal("pending certificate left behind")
			}
			if done, err := RecoverKeyPairSwitch(cp, kp); done || err != nil {
				t.Fatalf("second recovery: %v %v", done, err)
			}
		})
	}
}
