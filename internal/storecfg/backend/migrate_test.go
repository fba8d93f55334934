package backend

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
)

// The tests that need etcd share one plain member, each under a prefix of
// its own; the mTLS test starts members of its own.
var shared struct {
	once    sync.Once
	cluster *etcdproc.Cluster
	dir     string
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func sharedEtcd(t *testing.T) []string {
	t.Helper()
	bin := etcdtest.Require(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "etcd"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.cluster, shared.err = etcdproc.Start(ctx, etcdproc.Config{Binary: bin, Dir: shared.dir, ExitWithParent: true})
	})
	if shared.err != nil {
		t.Fatalf("shared etcd: %v", shared.err)
	}
	return shared.cluster.Endpoints()
}

var prefixes atomic.Int64

func newPrefix() string { return fmt.Sprintf("/migrate-test/%d/", prefixes.Add(1)) }

// newSource makes a master directory whose bbolt store holds a cluster
// named c1 and n more keys, some of them large, and returns it with every
// key and value it holds.
func newSource(t *testing.T, n int, extra func(st store.Store)) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, storecfg.FileBolt), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := confdb.Bootstrap(ctx, st, &config.Cluster{Meta: config.Meta{Name: "c1"}, ClusterName: "c1"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		var ops []store.Op
		for j := i; j < min(i+100, n); j++ {
			v := []byte(fmt.Sprintf("value %d", j))
			if j%500 == 7 {
				v = bytes.Repeat([]byte{byte(j)}, 200<<10) // several of these overflow one batch
			}
			ops = append(ops, store.Put(fmt.Sprintf("/jobs/%06d", j), v))
		}
		if _, err := st.Txn(ctx, nil, ops, nil); err != nil {
			t.Fatal(err)
		}
	}
	if extra != nil {
		extra(st)
	}
	return dir, dump(t, st)
}

// dump reads every key of a store.
func dump(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	kvs, _, err := st.Range(context.Background(), "", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = string(kv.Value)
	}
	return out
}

func TestMigrate(t *testing.T) {
	endpoints := sharedEtcd(t)
	ctx := context.Background()
	var leasedKey string
	dir, want := newSource(t, 2500, func(st store.Store) {
		lease, err := st.Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		leasedKey = "/lock/master"
		if _, err := st.Txn(ctx, nil, []store.Op{store.PutWithLease(leasedKey, []byte("me"), lease)}, nil); err != nil {
			t.Fatal(err)
		}
	})
	delete(want, leasedKey)
	prefix := newPrefix()
	var out bytes.Buffer
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	res, err := Migrate(ctx, MigrateOptions{
		MasterDir: dir, Target: storecfg.Config{Endpoints: endpoints, Prefix: prefix},
		Out: &out, ProgressEvery: 1000, Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatalf("Migrate: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	if res.Source != res.Target || res.Source.Keys != len(want) || len(res.Source.SHA256) != 64 {
		t.Fatalf("summaries %+v and %+v; want equal, %d keys", res.Source, res.Target, len(want))
	}
	if !reflect.DeepEqual(res.Leased, []string{leasedKey}) {
		t.Fatalf("leased keys %v, want [%s]", res.Leased, leasedKey)
	}
	for _, line := range []string{
		"Verify: bbolt " + res.Source.String(), "Verify: etcd  " + res.Target.String(),
		"Verified", "Not copied (attached to a lease", leasedKey,
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}

	if n := strings.Count(out.String(), fmt.Sprintf("/%d keys (", len(want)+1)); n != 2 {
		t.Errorf("%d progress lines for %d keys every 1000, want 2", n, len(want)+1)
	}

	// The record names etcd, the bbolt file is renamed, and opening the
	// cluster's store now reaches etcd with the same content.
	wantBackup := filepath.Join(dir, storecfg.FileBolt) + ".pre-etcd-20260304T050607Z"
	if res.Backup != wantBackup {
		t.Errorf("backup %s, want %s", res.Backup, wantBackup)
	}
	if _, err := os.Stat(filepath.Join(dir, storecfg.FileBolt)); !os.IsNotExist(err) {
		t.Errorf("config.db still in place: %v", err)
	}
	if _, err := os.Stat(res.Backup); err != nil {
		t.Errorf("backup: %v", err)
	}
	cfg, err := storecfg.Load(dir)
	if err != nil || cfg.Backend != storecfg.BackendEtcd || cfg.Prefix != prefix || !reflect.DeepEqual(cfg.Endpoints, endpoints) {
		t.Fatalf("record after migration: %+v, %v", cfg, err)
	}
	st, _, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := dump(t, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("etcd holds %d keys, want %d (the bbolt store's unleased keys)", len(got), len(want))
	}
	kv, err := st.Get(ctx, "/jobs/000001")
	if err != nil || kv == nil || kv.Lease != 0 || kv.Version != 1 {
		t.Fatalf("copied key: %+v, %v; want version 1 without lease", kv, err)
	}
	db, err := confdb.Open(ctx, st, nil)
	if err != nil || db.Cluster().ClusterName != "c1" {
		t.Fatalf("configuration on etcd: %v", err)
	}

	// A second run finds the cluster on etcd already.
	if _, err := Migrate(ctx, MigrateOptions{MasterDir: dir, Target: storecfg.Config{Endpoints: endpoints, Prefix: newPrefix()}}); !errors.Is(err, ErrNotBolt) {
		t.Fatalf("second migration: %v, want ErrNotBolt", err)
	}
}

func TestMigrateRefuses(t *testing.T) {
	endpoints := sharedEtcd(t)
	ctx := context.Background()
	dir, _ := newSource(t, 10, nil)
	unchanged := func(t *testing.T) {
		t.Helper()
		if _, err := os.Stat(storecfg.Path(dir)); !os.IsNotExist(err) {
			t.Fatalf("store.json written by a refused migration: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, storecfg.FileBolt)); err != nil {
			t.Fatalf("config.db gone after a refused migration: %v", err)
		}
	}

	t.Run("non-empty prefix", func(t *testing.T) {
		prefix := newPrefix()
		other, err := OpenConfig(ctx, dir, storecfg.Config{Backend: storecfg.BackendEtcd, Endpoints: endpoints, Prefix: prefix}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Txn(ctx, nil, []store.Op{store.Put("/someone/else", []byte("x"))}, nil); err != nil {
			t.Fatal(err)
		}
		other.Close()
		_, err = Migrate(ctx, MigrateOptions{MasterDir: dir, Target: storecfg.Config{Endpoints: endpoints, Prefix: prefix}})
		if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), prefix+"/someone/else") {
			t.Fatalf("migration into a used prefix: %v", err)
		}
		unchanged(t)
	})
	t.Run("store in use", func(t *testing.T) {
		held, err := boltstore.Open(filepath.Join(dir, storecfg.FileBolt), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		_, err = Migrate(ctx, MigrateOptions{MasterDir: dir, Target: storecfg.Config{Endpoints: endpoints, Prefix: newPrefix()}, BoltOpenTimeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "corrald") {
			t.Fatalf("migration of a locked store: %v", err)
		}
		unchanged(t)
	})
	t.Run("bad target", func(t *testing.T) {
		for _, target := range []storecfg.Config{
			{Endpoints: endpoints, Prefix: "no-slash"},
			{Backend: storecfg.BackendBolt},
			{Prefix: "/x/"},
		} {
			if _, err := Migrate(ctx, MigrateOptions{MasterDir: dir, Target: target}); err == nil {
				t.Errorf("migration to %+v succeeded", target)
			}
		}
		unchanged(t)
	})
}

// TestMigrateTLS moves a store into three members that demand client
// certificates from the cluster CA, with the default file names in the
// master directory, as `corral cluster migrate-store` sets them up.
func TestMigrateTLS(t *testing.T) {
	ctx := context.Background()
	dir, want := newSource(t, 50, nil)
	ca, err := pki.NewCA("c1", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, storecfg.FileClusterCA), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	issue := func(certPath, keyPath, name string, role pki.Role, ips []net.IP) {
		keyPEM, key, err := pki.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: role, IPs: ips, PublicKey: key.Public()})
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WriteKeyPair(certPath, keyPath, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
	}
	issue(filepath.Join(dir, storecfg.FileEtcdClientCert), filepath.Join(dir, storecfg.FileEtcdClientKey), "corrald", pki.RoleMaster, nil)
	member := etcdproc.TLSFiles{CertFile: filepath.Join(dir, "member.pem"), KeyFile: filepath.Join(dir, "member.key"), CAFile: filepath.Join(dir, storecfg.FileClusterCA)}
	issue(member.CertFile, member.KeyFile, "etcd-member", pki.RoleMasterCandidate, []net.IP{net.IPv4(127, 0, 0, 1)})
	c := etcdtest.Start(t, etcdproc.Config{Members: 3, ClientTLS: &member, PeerTLS: &member})

	res, err := Migrate(ctx, MigrateOptions{MasterDir: dir, Target: storecfg.Config{Endpoints: c.Endpoints()}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := res.Config
	if cfg.Prefix != storecfg.DefaultPrefix("c1") || cfg.CertFile != storecfg.FileEtcdClientCert || cfg.KeyFile != storecfg.FileEtcdClientKey || cfg.CAFile != storecfg.FileClusterCA {
		t.Fatalf("record %+v: want the default prefix and file names", cfg)
	}
	st, _, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := dump(t, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("etcd holds %d keys, want %d", len(got), len(want))
	}
}

// TestTLSConfigRole checks that corrald takes only a member (or master)
// certificate for an etcd member, not a node's from the same CA.
func TestTLSConfigRole(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf := func(role pki.Role) (certPEM, keyPEM []byte, cert *x509.Certificate) {
		keyPEM, key, err := pki.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err = ca.Issue(pki.IssueRequest{CommonName: "x", Role: role, PublicKey: key.Public()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return certPEM, keyPEM, c.Leaf
	}
	rec := storecfg.Config{Backend: storecfg.BackendEtcd, Endpoints: []string{"https://127.0.0.1:1"}, Prefix: "/x/",
		CertFile: "c.pem", KeyFile: "c.key", CAFile: "ca.pem"}
	if _, err := TLSConfig(dir, rec); err == nil || !strings.Contains(err.Error(), "c.pem") {
		t.Fatalf("TLSConfig without the client certificate: %v", err)
	}
	certPEM, keyPEM, _ := leaf(pki.RoleEtcdClient)
	if err := pki.WriteKeyPair(filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key"), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 || cfg.InsecureSkipVerify || cfg.RootCAs == nil {
		t.Fatalf("config %+v", cfg)
	}
	for _, tc := range []struct {
		role pki.Role
		ok   bool
	}{{pki.RoleEtcdMember, true}, {pki.RoleMasterCandidate, true}, {pki.RoleMaster, false}, {pki.RoleEtcdClient, false}, {pki.RoleNode, false}, {pki.RoleRAPI, false}, {pki.RoleAdmin, false}} {
		_, _, cert := leaf(tc.role)
		err := cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}})
		if (err == nil) != tc.ok {
			t.Errorf("member certificate with role %s: %v, want ok=%v", tc.role, err, tc.ok)
		}
	}
	plain := storecfg.Config{Backend: storecfg.BackendEtcd, Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x/"}
	if cfg, err := TLSConfig(dir, plain); err != nil || cfg != nil {
		t.Fatalf("plain endpoints: %v, %v; want no TLS", cfg, err)
	}
}
