package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/sshkeys"
)

// sshView is what one node holds on disk.
type sshView struct {
	key        string   // public key of its id_<type> pair
	pubFile    string   // ssh_pub_keys ("" when absent)
	authorized []string // the cluster block of authorized_keys
}

// TestSSHKeysPerNode runs three node daemons, each with its own SSH
// directory, and checks the key files after add, demote, promote, offline,
// renew and remove: authorized_keys trusts exactly the master and the
// master candidates, the public-key file is on the potential candidates
// only, and a non-candidate's key is never trusted anywhere.
func TestSSHKeysPerNode(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}}) // node1 and two more
	nodes := []string{"node1", "node2", "node3"}
	keyType := "rsa"
	var outsider string // node3's key once it is not master capable
	view := func(name string) sshView {
		t.Helper()
		dir := filepath.Join(c.dir, name)
		priv := filepath.Join(dir, "ssh", sshkeys.FileName(keyType))
		fi, err := os.Stat(priv)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: private key %s: %v %v", name, priv, fi, err)
		}
		pub, err := os.ReadFile(priv + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		v := sshView{key: strings.TrimSpace(string(pub))}
		if b, err := os.ReadFile(filepath.Join(dir, "ssh_pub_keys")); err == nil {
			v.pubFile = string(b)
			if fi, _ := os.Stat(filepath.Join(dir, "ssh_pub_keys")); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: ssh_pub_keys mode %v", name, fi.Mode())
			}
		}
		auth, _ := os.ReadFile(filepath.Join(dir, "ssh", "authorized_keys"))
		v.authorized = sshkeys.Block(string(auth))
		return v
	}
	// expect checks every node against the roles: potential candidates
	// hold the public-key file, every node trusts exactly trusted's keys.
	expect := func(step string, potential, trusted []string, skip ...string) map[string]sshView {
		t.Helper()
		views := map[string]sshView{}
		for _, n := range nodes {
			views[n] = view(n)
		}
		var want []string
		for _, n := range trusted {
			want = append(want, views[n].key)
		}
		for _, n := range nodes {
			if slices.Contains(skip, n) {
				continue
			}
			v := views[n]
			if !slices.Equal(slices.Sorted(slices.Values(v.authorized)), slices.Sorted(slices.Values(want))) {
				t.Errorf("%s: %s trusts %v, want the keys of %v", step, n, v.authorized, trusted)
			}
			if outsider != "" && slices.Contains(v.authorized, outsider) {
				t.Errorf("%s: %s trusts the non-candidate node3", step, n)
			}
			switch {
			case slices.Contains(potential, n):
				for _, p := range potential {
					if !strings.Contains(v.pubFile, views[p].key) {
						t.Errorf("%s: %s's public-key file lacks %s's key", step, n, p)
					}
				}
				if outsider != "" && strings.Contains(v.pubFile, outsider) {
					t.Errorf("%s: %s's public-key file lists the non-candidate node3", step, n)
				}
			case v.pubFile != "":
				t.Errorf("%s: %s is no potential candidate but holds the public-key file", step, n)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		return views
	}
	views := expect("add", nodes, nodes)
	if keygen, err := exec.LookPath("ssh-keygen"); err == nil {
		for _, n := range nodes {
			out, err := exec.Command(keygen, "-l", "-f", filepath.Join(c.dir, n, "ssh", "id_rsa")).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "2048") || !strings.Contains(string(out), "(RSA)") {
				t.Fatalf("ssh-keygen -l on %s's key: %v: %s", n, err, out)
			}
		}
	}
	if views["node1"].key == views["node2"].key || views["node2"].key == views["node3"].key {
		t.Fatal("nodes share a key")
	}

	// Over RAPI, master capability is not to be changed while the
	// cluster switch is off (its default).
	if code, body := rapiPost(t, c, "/2/nodes/node3/modify", `{"master_capable":false}`); code != 403 ||
		!strings.Contains(body, "master_capability_rapi_modifiable") {
		t.Fatalf("RAPI master_capable change: %d %s", code, body)
	}
	expect("refused over RAPI", nodes, nodes)

	set := func(node string, kv ...any) {
		t.Helper()
		op := map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "force": true}
		for i := 0; i < len(kv); i += 2 {
			op[kv[i].(string)] = kv[i+1]
		}
		c.mustSucceed(op)
	}
	set("node3", "master_capable", false)
	outsider = views["node3"].key
	expect("not master capable", []string{"node1", "node2"}, []string{"node1", "node2"})
	set("node2", "master_candidate", false)
	expect("demote", []string{"node1", "node2"}, []string{"node1"})
	set("node2", "master_candidate", true)
	expect("promote", []string{"node1", "node2"}, []string{"node1", "node2"})
	set("node2", "offline", true)
	// The offline node is not touched; the others stop trusting it.
	expect("offline", []string{"node1", "node2"}, []string{"node1"}, "node2")
	set("node2", "offline", false)
	set("node2", "master_candidate", true)
	before := expect("online again", []string{"node1", "node2"}, []string{"node1", "node2"})

	if out, err := c.corral("cluster", "renew-crypto", "--new-ssh-keys", "--ssh-key-type", "ed25519", "--force"); err != nil {
		t.Fatalf("renew-crypto --new-ssh-keys: %v\n%s", err, out)
	}
	keyType = "ed25519"
	outsider = view("node3").key
	after := expect("renew", []string{"node1", "node2"}, []string{"node1", "node2"})
	for _, n := range nodes {
		if k, err := sshkeys.ParsePublic(after[n].key); err != nil || k.Algo != "ssh-ed25519" || after[n].key == before[n].key {
			t.Fatalf("%s after renew: %q (%v), before %q", n, after[n].key, err, before[n].key)
		}
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_NODE_REMOVE", "node_name": "node3"})
	v3 := view("node3")
	if len(v3.authorized) != 0 || v3.pubFile != "" {
		t.Fatalf("the removed node3 keeps cluster keys: %+v", v3)
	}
	nodes = nodes[:2]
	expect("remove", []string{"node1", "node2"}, []string{"node1", "node2"})
}

// rapiPost sends an authenticated POST to the dev cluster's corral-rapi.
func rapiPost(t *testing.T, c *cluster, path, body string) (int, string) {
	t.Helper()
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest("POST", env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(env.User, env.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
