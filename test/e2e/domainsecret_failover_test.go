package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/storecfg"
)

// TestDomainSecretFollowsFailover renews the cluster domain secret on the
// master of an etcd cluster with two candidates, then hands the master
// role to the standby. The dev cluster's candidates share one master
// directory, so the standby's own copy of the secret file is simulated by
// putting the pre-renewal secret back in it before the handover: the new
// master must sign moves with the renewed secret all the same, which it
// can only have from the store. etcd's files must not hold it in clear.
func TestDomainSecretFollowsFailover(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, Masters: 2, NoForward: true, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	first := c.leader(30 * time.Second)
	var second devcluster.Candidate
	for _, cand := range c.st.Candidates() {
		if cand.Proc != first.Proc {
			second = cand
		}
	}
	c.wantStandby(second, first.Name)
	file := c.domainSecretPath()
	readSecret := func() secret.Secret {
		t.Helper()
		s, err := pki.ReadSecretFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := readSecret()
	c.mustSucceed(createOp("ds1", "node1", 8))

	if out, err := c.corralAt(first.Socket, "cluster", "renew-crypto", "--new-cluster-domain-secret", "--force"); err != nil {
		t.Fatalf("renew-crypto: %v\n%s", err, out)
	}
	renewed := readSecret()
	if renewed.Reveal() == before.Reveal() {
		t.Fatal("renew-crypto left the domain secret as it was")
	}
	etcdDir := bootstrap.Layout{StateDir: c.dir}.EtcdDir()
	for _, s := range []secret.Secret{before, renewed} {
		if f := fileHolding(t, etcdDir, s.Reveal()); f != "" {
			t.Errorf("etcd's file %s holds a domain secret in clear", f)
		}
	}

	// The standby's copy: the secret it had before the renewal.
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteSecretFile(file, before); err != nil {
		t.Fatal(err)
	}
	acct, err := bootstrap.Lookup(bootstrap.MasterUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, acct.UID, acct.GID); err != nil {
		t.Fatal(err)
	}
	if out, err := c.corralAt(first.Socket, "cluster", "master-failover", "--to", second.Name); err != nil {
		t.Fatalf("master-failover: %v\n%s", err, out)
	}
	if got := c.leader(30 * time.Second); got.Proc != second.Proc {
		t.Fatalf("after master-failover --to %s, %s leads", second.Name, got.Proc)
	}
	c.useMaster(second)

	if got := readSecret(); got.Reveal() != renewed.Reveal() {
		t.Errorf("the new master's domain secret file holds the %s secret, want the renewed one",
			map[bool]string{true: "pre-renewal", false: "unknown"}[got.Reveal() == before.Reveal()])
	}
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "ds1", "mode": "remote"})
	m, _ := res[0].(map[string]any)
	if err := pki.CheckHandshake(renewed, m["handshake"]); err != nil {
		t.Errorf("the new master's handshake does not verify with the renewed secret: %v", err)
	}
	ca, _ := m["x509_ca"].(string)
	if _, err := pki.LoadSignedX509(renewed, ca, time.Now()); err != nil {
		t.Errorf("the new master's signed certificate does not verify with the renewed secret: %v", err)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_BACKUP_CLEANUP", "instance_name": "ds1", "x509_key_name": m["x509_key_name"]})
	if b, _ := os.ReadFile(c.proc(second.Proc).Log); bytes.Contains(b, []byte(renewed.Reveal())) {
		t.Error("the new master logged the domain secret")
	}
}

// fileHolding returns a file under dir whose bytes contain s, or "".
func fileHolding(t *testing.T, dir, s string) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), s) {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return found
}
