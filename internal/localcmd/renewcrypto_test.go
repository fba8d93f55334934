package localcmd

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/pki"
)

func newRenewCluster(t *testing.T) (Dirs, bootstrap.Layout, *bytes.Buffer) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := bootstrap.Layout{StateDir: dir, RunDir: filepath.Join(dir, "run")}
	if err := bootstrap.Init(context.Background(), bootstrap.InitOptions{Name: "c1", Layout: l, MasterName: "m1",
		EnabledHypervisors: []string{"fake"}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	d := Dirs{StateDir: func() string { return l.StateDir }, RunDir: func() string { return l.RunDir },
		Socket: func() string { return l.Socket() }, Stdout: &out, Stderr: &out}
	return d, l, &out
}

func runRenew(d Dirs, stdin string, args ...string) error {
	cmd := renewCryptoCmd(d)
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(d.Stdout)
	cmd.SetErr(d.Stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func TestRenewCryptoCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("renew-crypto runs as root")
	}
	d, l, out := newRenewCluster(t)
	read := func() []byte {
		b, err := os.ReadFile(l.RAPICert())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, err := pki.LoadCA(filepath.Join(l.MasterDir(), layout.MasterCAFile), filepath.Join(l.MasterDir(), master.FileCAKey))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "rapi.example", Role: pki.RoleRAPI, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	bundle := filepath.Join(l.StateDir, "bundle.pem")
	if err := os.WriteFile(bundle, append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...), 0o600); err != nil {
		t.Fatal(err)
	}
	certOnly := filepath.Join(l.StateDir, "cert.pem")
	if err := os.WriteFile(certOnly, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		stdin   string
		args    []string
		wantErr string // "" for success
		changed bool
		output  string
	}{
		{"nothing asked", "", nil, "nothing to renew", false, ""},
		{"both asked", "", []string{"--new-rapi-certificate", "--rapi-certificate", bundle}, "only one of", false, ""},
		{"both secrets asked", "", []string{"--new-cluster-domain-secret", "--cluster-domain-secret", "/x"}, "only one of", false, ""},
		{"later option", "", []string{"--new-rapi-certificate", "--new-confd-hmac-key"}, "not available yet", false, ""},
		{"ssh key type alone", "", []string{"--ssh-key-type", "ed25519"}, "go with --new-ssh-keys", false, ""},
		{"ssh declined", "n\n", []string{"--new-ssh-keys"}, "aborted", false, "Continue?"},
		{"certificates declined", "n\n", []string{"--new-node-certificates", "--new-cluster-certificate"}, "aborted", false, "TLS certificates"},
		{"later file option", "", []string{"--spice-certificate", "/x"}, "not available yet", false, ""},
		{"secret declined", "n\n", []string{"--new-cluster-domain-secret"}, "aborted", false, "Continue?"},
		{"missing secret file", "", []string{"--cluster-domain-secret", filepath.Join(l.StateDir, "nope"), "--force"}, "read secret file", false, ""},
		{"declined", "n\n", []string{"--new-rapi-certificate"}, "aborted", false, "Continue?"},
		{"no answer", "", []string{"--new-rapi-certificate"}, "aborted", false, "Continue?"},
		{"confirmed", "y\n", []string{"--new-rapi-certificate"}, "", true, "certificate replaced: serial"},
		{"forced", "", []string{"--new-rapi-certificate", "--force"}, "", true, "certificate replaced"},
		{"bad file", "", []string{"--rapi-certificate", certOnly, "--force"}, "0 private keys", false, ""},
		{"missing file", "", []string{"--rapi-certificate", filepath.Join(l.StateDir, "nope"), "--force"}, "reading the certificate", false, ""},
		{"own certificate", "", []string{"--rapi-certificate", bundle, "--force"}, "", true, "CN=rapi.example"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out.Reset()
			before := read()
			err := runRenew(d, tc.stdin, tc.args...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if changed := !bytes.Equal(before, read()); changed != tc.changed {
				t.Errorf("certificate changed: %v, want %v", changed, tc.changed)
			}
			if !strings.Contains(out.String(), tc.output) {
				t.Errorf("output %q, want %q", out, tc.output)
			}
		})
	}
}
