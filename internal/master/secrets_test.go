package master

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store/boltstore"
)

// Two candidates with their own master directories over one store: what
// one master installs, the next one finds at its start.
func TestDomainSecretsFollowTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ca, err := pki.NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	a := domainSecrets{dir: t.TempDir(), st: st, ca: ca}
	b := domainSecrets{dir: t.TempDir(), st: st, ca: ca}
	initial := pki.NewDomainSecret()
	for _, d := range []domainSecrets{a, b} {
		if err := pki.WriteSecretFile(d.file(FileDomainSecret), initial); err != nil {
			t.Fatal(err)
		}
	}
	// The first master after an upgrade stores its file's secret.
	a.sync(ctx, log)
	kv, err := st.Get(ctx, KeyDomainSecret)
	if err != nil || kv == nil {
		t.Fatalf("nothing stored: %v", err)
	}
	if bytes.Contains(kv.Value, []byte(initial.Reveal())) {
		t.Fatal("the store holds the secret in clear")
	}
	renewed := pki.NewDomainSecret()
	if err := a.SetDomainSecret(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.DomainSecret(); got.Reveal() != renewed.Reveal() {
		t.Fatal("the renewing master does not use the renewed secret")
	}
	// The other candidate takes over with its old file.
	b.sync(ctx, log)
	if got, err := b.DomainSecret(); err != nil || got.Reveal() != renewed.Reveal() {
		t.Fatalf("the new master's secret is not the renewed one: %v", err)
	}
	// A candidate whose CA key differs cannot open it and keeps its file.
	other, _ := pki.NewCA("c1", time.Hour)
	c := domainSecrets{dir: t.TempDir(), st: st, ca: other}
	if err := pki.WriteSecretFile(c.file(FileDomainSecret), initial); err != nil {
		t.Fatal(err)
	}
	c.sync(ctx, log)
	if got, _ := c.DomainSecret(); got.Reveal() != initial.Reveal() {
		t.Fatal("a secret that did not open replaced the file")
	}
}
