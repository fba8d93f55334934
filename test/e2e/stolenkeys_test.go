package e2e

import (
	"bytes"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rpc"
	"github.com/corral/corral/internal/storecfg"
)

// TestStolenKeysCannotDriveNodes is the attack of a local user who can read
// one daemon's key: the etcd member's (user corral-etcd) may not call a
// node daemon at all, and the master's certificate without the CA key may
// call at the node's epoch but can neither raise the epoch (fencing the real
// master out) nor learn it from a refusal. Every key file of a running
// cluster on etcd has the owner and mode docs/SECURITY.md lists, and each
// certificate carries its narrowest role.
func TestStolenKeysCannotDriveNodes(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, Store: storecfg.BackendEtcd})
	dir := c.st.StateDir
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caPEM := read("master/ca.pem")
	epochFile := filepath.Join(dir, "node1", "rpc", "epoch")
	epochBefore, err := os.ReadFile(epochFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(c.st.IPs[0], strconv.Itoa(c.st.RPCPort))
	call := func(certPath, keyPath, epoch string) (int, string, error) {
		t.Helper()
		cfg, err := pki.ClientTLSConfig(read(certPath), read(keyPath), caPEM, "node1", pki.NodeDaemonRoles()...)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+rpc.PathPrefix+nodeapi.Version, strings.NewReader("{}"))
		req.Header.Set(rpc.HeaderEpoch, epoch)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	// The etcd member's certificate: refused in the TLS handshake, whatever
	// the epoch.
	for _, e := range []string{"0", "99999999"} {
		if code, body, err := call("etcd/pki/member.pem", "etcd/pki/member.key", e); err == nil {
			t.Fatalf("etcd member certificate, epoch %s: answered %d %s", e, code, body)
		}
	}
	// The master's certificate alone cannot raise the epoch, and is not
	// told the node's.
	cur := strings.TrimSpace(string(epochBefore))
	for _, e := range []string{"99999999", "0"} {
		code, body, err := call("master/master.pem", "master/master.key", e)
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK || strings.Contains(body, cur) {
			t.Fatalf("master certificate without grant, epoch %s: %d %s (node epoch %s)", e, code, body, cur)
		}
	}
	if after, _ := os.ReadFile(epochFile); !bytes.Equal(after, epochBefore) {
		t.Fatalf("node epoch moved from %q to %q", epochBefore, after)
	}
	// The real master still drives the node.
	c.mustSucceed(createOp("k1", "", 8))

	// The master's restart raises the epoch with its grant, and the node
	// follows.
	c.killDaemon("corrald")
	c.restartCorrald()
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "k1"})
	if after, _ := os.ReadFile(epochFile); bytes.Equal(after, epochBefore) {
		t.Fatalf("node epoch still %q after a new master", after)
	}

	auditKeyFiles(t, dir)
	for p, want := range map[string]pki.Role{
		"etcd/pki/member.pem":    pki.RoleEtcdMember,
		"master/etcd-client.pem": pki.RoleEtcdClient,
		"master/master.pem":      pki.RoleMaster,
		"node1/node.pem":         pki.RoleNode,
		"rapi/rapi.crt":          pki.RoleRAPI,
	} {
		certs, err := pki.ParseCertificatesPEM(read(p))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := pki.RoleOf(certs[0]); got != want {
			t.Errorf("%s has role %q, want %q", p, got, want)
		}
	}
}

// keyFiles are the private keys and secrets of a dev cluster on etcd, with
// the owner and mode each must have (docs/SECURITY.md). Any other file
// holding a private key fails the audit, so a new one must be added here
// and to the docs.
var keyFiles = map[string]struct {
	owner string
	mode  fs.FileMode
}{
	"master/ca.key":                {"corral-master", 0o400},
	"master/master.key":            {"corral-master", 0o600},
	"master/etcd-client.key":       {"corral-master", 0o600},
	"master/cluster-domain-secret": {"corral-master", 0o400},
	"etcd/pki/member.key":          {"corral-etcd", 0o600},
	"node1/node.key":               {"root", 0o600},
	"rapi/rapi.key":                {"corral-rapi", 0o600},
	"rapi/users":                   {"corral-rapi", 0o600},
	"rapi.env":                     {"root", 0o600},
}

// auditKeyFiles walks dir for files that hold a private key and checks
// each against keyFiles; it also checks each listed file exists.
func auditKeyFiles(t *testing.T, dir string) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		want, listed := keyFiles[rel]
		if !listed {
			if strings.HasPrefix(rel, "etcd/m") || strings.HasPrefix(rel, "logs/") {
				return nil // etcd's data and the daemons' logs
			}
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte("PRIVATE KEY")) {
				t.Errorf("%s holds a private key the audit does not know", rel)
			}
			return nil
		}
		seen[rel] = true
		fi, err := d.Info()
		if err != nil {
			return err
		}
		owner := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid))
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		if owner != want.owner || fi.Mode().Perm() != want.mode {
			t.Errorf("%s: %s %o, want %s %o", rel, owner, fi.Mode().Perm(), want.owner, want.mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range keyFiles {
		if !seen[rel] {
			t.Errorf("%s missing", rel)
		}
	}
}
