package cmdlib

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// memSecrets is a domain secret held in memory.
type memSecrets struct {
	mu          sync.Mutex
	cds, staged secret.Secret
}

func (m *memSecrets) DomainSecret() (secret.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cds, nil
}

func (m *memSecrets) StagedDomainSecret() (secret.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.staged == "" {
		return "", errNothingStaged
	}
	return m.staged, nil
}

var errNothingStaged = ecode.Errorf(ecode.Environ, "nothing staged")

func (m *memSecrets) SetDomainSecret(_ context.Context, s secret.Secret) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cds, m.staged = s, ""
	return nil
}

// TestRemoteImportRefusals: the destination refuses, before it creates
// anything, a move whose handshake or source certificate does not hold.
func TestRemoteImportRefusals(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	cds := pki.NewDomainSecret()
	e.proc.Secrets = &memSecrets{cds: cds}
	other := pki.NewDomainSecret()
	now := time.Now()
	certPEM, _, err := pki.NewTransferCert("src", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	signed, _ := pki.SignX509(cds, certPEM)
	wrongSigned, _ := pki.SignX509(other, certPEM)
	expiredPEM, _, _ := pki.NewTransferCert("src", time.Hour, now.Add(-3*time.Hour))
	expired, _ := pki.SignX509(cds, expiredPEM)
	tampered := strings.Replace(signed, "\n\n-----BEGIN CERTIFICATE-----\nMII", "\n\n-----BEGIN CERTIFICATE-----\nMIJ", 1)
	remote := func(name string, hs []any, ca string) map[string]any {
		return create(name, map[string]any{"mode": "remote-import", "source_instance_name": "old",
			"source_handshake": hs, "source_x509_ca": ca, "os_type": nil})
	}
	cases := []struct {
		op  map[string]any
		msg string
	}{
		{remote("r1", pki.ComputeHandshake(other), signed), "domain secret"},
		{remote("r2", pki.ComputeHandshake(cds), wrongSigned), "signature"},
		{remote("r3", pki.ComputeHandshake(cds), tampered), "certificate"},
		{remote("r4", pki.ComputeHandshake(cds), expired), "expired"},
		{remote("r5", pki.ComputeHandshake(cds), ""), "source_x509_ca"},
		{remote("r6", []any{1, "x", "y"}, signed), "handshake"},
		{create("r7", map[string]any{"mode": "remote-import", "source_instance_name": "old", "compress": "lz4",
			"source_handshake": pki.ComputeHandshake(cds), "source_x509_ca": signed}), "Unknown compression"},
	}
	serial := e.cfg.Serial()
	for _, c := range cases {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), string(ecode.Inval)) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: got %s %s, want error wrong_input containing %q", c.op["instance_name"], st, b, c.msg)
		}
	}
	if len(e.cfg.Instances()) != 0 || e.cfg.Serial() != serial {
		t.Fatal("a refused import changed the configuration")
	}
	for _, call := range e.node.calls {
		if strings.Contains(call, "blockdev_create") || strings.Contains(call, "import_start") {
			t.Fatalf("a refused import reached a node: %s", call)
		}
	}
}

// TestPrepareAndRemoteExportChecks: the prepare result verifies with the
// domain secret, and a remote export refuses destinations that do not.
func TestPrepareAndRemoteExportChecks(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	cds := pki.NewDomainSecret()
	e.proc.Secrets = &memSecrets{cds: cds}
	if st, res := e.run(t, create("web1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "web1", "mode": "remote"})
	if st != "success" {
		t.Fatalf("prepare: %s %v", st, res)
	}
	var out map[string]any
	if err := json.Unmarshal(asJSON(res[0]), &out); err != nil {
		t.Fatalf("prepare result %s: %v", asJSON(res[0]), err)
	}
	if err := pki.CheckHandshake(cds, out["handshake"]); err != nil {
		t.Errorf("handshake: %v", err)
	}
	key, err := pki.CheckKeyName(cds, out["x509_key_name"])
	if err != nil || key != "x509-1-abc" {
		t.Errorf("key name %q: %v", key, err)
	}
	ca, _ := out["x509_ca"].(string)
	if _, err := pki.LoadSignedX509(cds, ca, time.Now()); err != nil {
		t.Errorf("x509_ca: %v", err)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "web1", "mode": "local"}); st != "success" || string(asJSON(res[0])) != "null" {
		t.Errorf("local prepare: %s %v", st, res)
	}

	export := func(disks []any, keyName any) map[string]any {
		return map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1", "mode": "remote",
			"target_node": disks, "x509_key_name": keyName, "destination_x509_ca": ca}
	}
	other := pki.NewDomainSecret()
	good := pki.SignDiskInfo(cds, 0, "127.0.0.9", 4000, "abcdef0123", pki.NewSalt())
	for _, c := range []struct {
		name string
		op   map[string]any
		msg  string
	}{
		{"disk info of another secret", export([]any{pki.SignDiskInfo(other, 0, "127.0.0.9", 4000, "abcdef0123", "aa11")}, out["x509_key_name"]), "Destination of disk 0"},
		{"disk info for another index", export([]any{pki.SignDiskInfo(cds, 1, "127.0.0.9", 4000, "abcdef0123", "aa11")}, out["x509_key_name"]), "Destination of disk 0"},
		{"too many disks", export([]any{good, good}, out["x509_key_name"]), "one destination per disk"},
		{"key name of another secret", export([]any{good}, pki.SignKeyName(other, "x509-1-abc")), "x509_key_name"},
	} {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: got %s %s, want an error containing %q", c.name, st, b, c.msg)
		}
	}
	for _, call := range e.node.calls {
		if strings.Contains(call, "export_start") {
			t.Fatalf("a refused export reached a node: %s", call)
		}
	}
}

// TestRenewDomainSecret replaces the secret by a job, new or staged.
func TestRenewDomainSecret(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	old := pki.NewDomainSecret()
	m := &memSecrets{cds: old}
	e.proc.Secrets = m
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "staged_cluster_domain_secret": true}); st != "error" {
		t.Fatalf("nothing staged: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "new_cluster_domain_secret": true}); st != "success" {
		t.Fatalf("new: %s %v", st, res)
	}
	if m.cds == old || len(m.cds.Reveal()) != 40 {
		t.Fatal("the secret was not renewed")
	}
	m.staged = "0123456789abcdef0123456789abcdef01234567"
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "staged_cluster_domain_secret": true}); st != "success" {
		t.Fatalf("staged: %s %v", st, res)
	}
	if m.cds.Reveal() != "0123456789abcdef0123456789abcdef01234567" || m.staged != "" {
		t.Fatal("the staged secret was not installed")
	}
	q, _ := e.q.Query(t.Context(), nil, []string{"oplog", "opresult", "ops"})
	b, _ := json.Marshal(q)
	if strings.Contains(string(b), "0123456789abcdef0123456789abcdef01234567") || strings.Contains(string(b), m.cds.Reveal()) {
		t.Fatal("a domain secret appears in a job")
	}
}

// asJSON returns an op result as JSON text.
func asJSON(v any) []byte {
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}
