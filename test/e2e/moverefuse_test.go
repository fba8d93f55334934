package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/impexp"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// TestMoveRefusals: every refusal of a move leaves nothing behind: no
// half-created instance or disk on the destination, the source instance
// as it was, no transfer key on either side.
func TestMoveRefusals(t *testing.T) {
	osDir := osDirWithMover(t)
	a := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, osDir: osDir})
	// The destination's watcher removes imports that wait for data
	// longer than 8 s (far longer than any step of this test needs).
	b := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, osDir: osDir,
		watcher: time.Second, corraldArgs: []string{"--pending-import-timeout", "8s"}})
	pairClusters(t, a, b)
	a.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "r1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 16}}, "nics": []any{}, "os_type": "mover", "pnode": "node1"})
	sums := a.fillRandom("node1", "r1")
	cds, err := os.ReadFile(a.domainSecretPath())
	if err != nil {
		t.Fatal(err)
	}
	secretA := secret.Secret(strings.TrimSpace(string(cds)))

	nothingLeft := func(what string) {
		t.Helper()
		if rows, _ := b.luxi.QueryInstances(t.Context(), nil, []string{"name"}, false); len(rows) != 0 {
			t.Errorf("%s: the destination has instances %v", what, rows)
		}
		if dirs, _ := filepath.Glob(filepath.Join(b.dir, "node*", "storage", "file", "*")); len(dirs) != 0 {
			t.Errorf("%s: disk directories left on the destination: %v", what, dirs)
		}
		for _, c := range []*cluster{a, b} {
			if keys := c.transferKeys(); len(keys) != 0 {
				t.Errorf("%s: transfer keys left: %v", what, keys)
			}
		}
		if st := a.instanceField("r1", "status"); st != "running" {
			t.Errorf("%s: the source instance is %v, want running", what, st)
		}
		if got := a.diskSums("node1", "r1"); strings.Join(got, " ") != strings.Join(sums, " ") {
			t.Errorf("%s: the source disks changed", what)
		}
	}

	// Another domain secret on the destination: the move tool fails at
	// the destination's handshake check and gives the source key back.
	if out, err := b.corral("cluster", "renew-crypto", "--new-cluster-domain-secret", "--force"); err != nil {
		t.Fatalf("renew-crypto: %v\n%s", err, out)
	}
	out, err := a.corral(append(append([]string{"instance", "move"}, moveArgs(t, a, b)...), rapiURL(t, a), rapiURL(t, b), "r1")...)
	if err == nil || !strings.Contains(out, "domain secret") {
		t.Errorf("move with another domain secret: %v\n%s", err, out)
	}
	nothingLeft("wrong domain secret")
	f := filepath.Join(t.TempDir(), "cds")
	if err := os.WriteFile(f, cds, 0o400); err != nil {
		t.Fatal(err)
	}
	if out, err := b.corral("cluster", "renew-crypto", "--cluster-domain-secret", f, "--force"); err != nil {
		t.Fatalf("renew-crypto --cluster-domain-secret: %v\n%s", err, out)
	}

	prep := func() (handshake any, keyName any, ca string) {
		res := a.mustSucceed(map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "r1", "mode": "remote"})
		m, _ := res[0].(map[string]any)
		ca, _ = m["x509_ca"].(string)
		return m["handshake"], m["x509_key_name"], ca
	}
	release := func(keyName any) {
		a.mustSucceed(map[string]any{"OP_ID": "OP_BACKUP_CLEANUP", "instance_name": "r1", "x509_key_name": keyName})
	}
	importOp := func(hs any, ca string) map[string]any {
		return map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "r1", "mode": "remote-import",
			"disk_template": "file", "disks": []any{map[string]any{"size": 16}}, "nics": []any{}, "os_type": "mover",
			"source_handshake": hs, "source_x509_ca": ca, "source_instance_name": "r1", "start": false}
	}

	// A tampered certificate and an expired one are refused before
	// anything is created.
	hs, key, ca := prep()
	i := strings.Index(ca, "-----BEGIN CERTIFICATE-----\n") + len("-----BEGIN CERTIFICATE-----\n") + 70
	tampered := ca[:i] + string(ca[i]^1) + ca[i+1:]
	if msg := b.mustFail("wrong_input", importOp(hs, tampered)); !strings.Contains(msg, "certificate") {
		t.Errorf("tampered certificate: %s", msg)
	}
	old, _, err := pki.NewTransferCert("node1", time.Hour, time.Now().Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := pki.SignX509(secretA, old)
	if msg := b.mustFail("wrong_input", importOp(hs, expired)); !strings.Contains(msg, "expired") {
		t.Errorf("expired certificate: %s", msg)
	}
	release(key)
	nothingLeft("refused certificates")

	// A wrong magic: the destination listens; the source is told another
	// magic (signed with the shared secret, so only the stream check can
	// catch it). Both jobs fail and clean up.
	hs, key, ca = prep()
	id := b.submitOne(importOp(hs, ca))
	disks, dstCA := b.remoteImportEntry(id)
	host, port, _, err := pki.CheckDiskInfo(secretA, 0, disks[0])
	if err != nil {
		t.Fatal(err)
	}
	bad := pki.SignDiskInfo(secretA, 0, host, port, "wrongmagic01", pki.NewSalt())
	_, st, res := a.submit(map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "r1", "mode": "remote",
		"target_node": []any{bad}, "x509_key_name": key, "destination_x509_ca": dstCA})
	if st != "error" {
		t.Errorf("export with a wrong magic ended %s: %v", st, res)
	}
	if st, res := b.waitJob(id, time.Minute); st != "error" || !strings.Contains(fmt.Sprint(res), "magic") {
		t.Errorf("import with a wrong magic ended %s: %v", st, res)
	}
	nothingLeft("wrong magic")

	// A truncated stream: a sender with the source's real transfer key
	// sends part of the disk and stops.
	hs, key, ca = prep()
	id = b.submitOne(importOp(hs, ca))
	disks, dstCA = b.remoteImportEntry(id)
	host, port, magic, err := pki.CheckDiskInfo(secretA, 0, disks[0])
	if err != nil {
		t.Fatal(err)
	}
	keyName, _ := pki.CheckKeyName(secretA, key)
	cert, err := tls.LoadX509KeyPair(filepath.Join(a.dir, "node1", "crypto", keyName, "cert"), filepath.Join(a.dir, "node1", "crypto", keyName, "key"))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := pki.LoadSignedX509(secretA, dstCA, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = impexp.Send(t.Context(), impexp.Config{Cert: cert, Peer: peer, Magic: magic, Compress: impexp.None},
		net.JoinHostPort(host, strconv.Itoa(port)), &failingReader{left: 4 << 20})
	if err == nil {
		t.Error("a truncated send succeeded")
	}
	if st, res := b.waitJob(id, time.Minute); st != "error" || !strings.Contains(fmt.Sprint(res), "truncated") {
		t.Errorf("import of a truncated stream ended %s: %v", st, res)
	}
	release(key)
	nothingLeft("truncated stream")

	// A source that never comes: the watcher removes the waiting import,
	// and the job's revert the instance.
	hs, key, ca = prep()
	id = b.submitOne(importOp(hs, ca))
	b.remoteImportEntry(id)
	if st, res := b.waitJob(id, time.Minute); st != "error" || !strings.Contains(fmt.Sprint(res), "aborted") {
		t.Errorf("an import nobody sends to ended %s: %v", st, res)
	}
	if log := b.logSince("corrald", 0); !strings.Contains(log, "removed an import that received nothing") {
		t.Error("the watcher did not log the removal")
	}
	if out, err := b.corral("job", "list", "--no-headers", "--separator", " ", "-o", "id,summary"); err != nil ||
		len(jobsNamed(t, out, "CLUSTER_ABORT_PENDING_IMPORTS")) == 0 {
		t.Errorf("no job of the pending-import-sweep reconciler aborted the import: %v\n%s", err, out)
	}
	release(key)
	nothingLeft("source never came")
}

// failingReader gives zeros, then fails: a source disk that breaks.
type failingReader struct{ left int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errors.New("disk read error")
	}
	n := min(len(p), r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

var _ io.Reader = (*failingReader)(nil)

// remoteImportEntry waits for a remote-import job's log entry and returns
// its signed disk destinations and certificate.
func (c *cluster) remoteImportEntry(id int64) ([]any, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		rows, err := c.luxi.QueryJobs(ctx, []int64{id}, []string{"status", "oplog"})
		if err != nil {
			c.t.Fatal(err)
		}
		if st := rows[0][0]; st == "error" || st == "success" || st == "canceled" {
			c.t.Fatalf("job %d ended %v before announcing its listeners", id, st)
		}
		b, _ := json.Marshal(rows[0][1])
		var ops [][][]any
		_ = json.Unmarshal(b, &ops)
		for _, op := range ops {
			for _, e := range op {
				if len(e) == 4 && e[2] == "remote-import" {
					m, _ := e[3].(map[string]any)
					disks, _ := m["disks"].([]any)
					ca, _ := m["x509_ca"].(string)
					return disks, ca
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("job %d announced no listeners", id)
	return nil, ""
}

// pairClusters pairs b with a through a pairing token.
func pairClusters(t *testing.T, a, b *cluster) {
	t.Helper()
	out, err := a.corral("cluster", "pair", "create", "--rapi-url", rapiURL(t, a))
	if err != nil {
		t.Fatalf("pair create: %v\n%s", err, out)
	}
	var token string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "corral-pair-1.") {
			token = l
		}
	}
	if token == "" {
		t.Fatalf("no token in:\n%s", out)
	}
	out, err = b.corral("cluster", "pair", "join", "--force", "--rapi-url", rapiURL(t, b), token)
	if err != nil {
		t.Fatalf("pair join: %v\n%s", err, out)
	}
	sa, _ := os.ReadFile(a.domainSecretPath())
	sb, _ := os.ReadFile(b.domainSecretPath())
	if len(sa) == 0 || string(sa) != string(sb) {
		t.Fatal("pairing did not give the destination the source's domain secret")
	}
	// The token works once.
	if out, err := b.corral("cluster", "pair", "join", "--force", "--rapi-url", rapiURL(t, b), token); err == nil || !strings.Contains(out, "no open invitation") {
		t.Errorf("a used token was accepted again: %v\n%s", err, out)
	}
}
