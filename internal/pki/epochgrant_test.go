package pki

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEpochGrant(t *testing.T) {
	ca, err := NewCA("alpha", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("beta", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bundle := []*x509.Certificate{other.Certificate(), ca.Certificate()}
	s, err := ca.SignEpochGrant(EpochGrant{Epoch: 42, Master: "node1-2", Token: 40, Issued: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, err := VerifyEpochGrant(bundle, s)
	if err != nil || g.Epoch != 42 || g.Master != "node1-2" || g.Token != 40 || g.Cluster != "alpha" {
		t.Fatalf("grant %+v, %v", g, err)
	}
	if _, err := VerifyEpochGrant([]*x509.Certificate{other.Certificate()}, s); !errors.Is(err, ErrBadEpochGrant) {
		t.Fatalf("grant verified by another CA: %v", err)
	}
	// Changing the epoch breaks the signature.
	p64, sig, _ := strings.Cut(s, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(p64)
	forged := strings.Replace(string(payload), `"epoch":42`, `"epoch":99999999`, 1)
	if _, err := VerifyEpochGrant(bundle, base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig); !errors.Is(err, ErrBadEpochGrant) {
		t.Fatalf("forged grant: %v", err)
	}
	for _, bad := range []string{"", "x", "x.y", ".", strings.Repeat("a", MaxEpochGrantLen+1)} {
		if _, err := VerifyEpochGrant(bundle, bad); !errors.Is(err, ErrBadEpochGrant) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := ca.SignEpochGrant(EpochGrant{Epoch: 0}); err == nil {
		t.Error("grant for epoch 0 signed")
	}
}

func FuzzVerifyEpochGrant(f *testing.F) {
	ca, err := NewCA("alpha", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	s, err := ca.SignEpochGrant(EpochGrant{Epoch: 7, Master: "m"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s)
	f.Add("e30.AAAA")
	f.Add("")
	cas := []*x509.Certificate{ca.Certificate()}
	signed, _, _ := strings.Cut(s, ".")
	f.Fuzz(func(t *testing.T, in string) {
		g, err := VerifyEpochGrant(cas, in)
		if err != nil {
			return
		}
		// Only the payload the CA signed can be accepted.
		if p, _, _ := strings.Cut(in, "."); p != signed || g.Epoch != 7 {
			t.Fatalf("accepted %q as %+v", in, g)
		}
	})
}

func TestRolePolicy(t *testing.T) {
	for _, r := range []Role{RoleMasterCandidate, RoleNode, RoleRAPI, RoleAdmin, RoleEtcdMember, RoleEtcdClient} {
		if MayCallNodeRPC(r) {
			t.Errorf("role %s may call node RPCs", r)
		}
	}
	if !MayCallNodeRPC(RoleMaster) {
		t.Error("the master may not call node RPCs")
	}
	for _, r := range []Role{RoleEtcdMember, RoleEtcdClient} {
		if !r.Valid() {
			t.Errorf("role %s not valid", r)
		}
	}
}
