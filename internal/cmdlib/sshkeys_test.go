package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/sshkeys"
)

// sshNode is one node's SSH state in sshDouble.
type sshNode struct {
	key, staged string   // public keys of the pair in place and the staged one
	pubFile     string   // the public-key file; "" when absent
	authorized  []string // the cluster's block of authorized_keys
	dropped     []string // keys removed outside the block
}

// sshDouble adds the SSH RPCs to nodeDouble, keeping each node's files in
// memory, and checks on every write of authorized_keys that the master's
// key in place stays trusted on that node.
type sshDouble struct {
	*nodeDouble
	mu         sync.Mutex
	nodes      map[string]*sshNode // by node name
	master     string
	violations []string
	noKeys     map[string]bool // nodes that fail to make a key
}

func newSSHDouble() *sshDouble {
	return &sshDouble{nodeDouble: newNodeDouble(), nodes: map[string]*sshNode{}, master: "n1", noKeys: map[string]bool{}}
}

func (d *sshDouble) node(name string) *sshNode {
	if d.nodes[name] == nil {
		d.nodes[name] = &sshNode{}
	}
	return d.nodes[name]
}

func (d *sshDouble) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	d.mu.Lock()
	out, handled, err := d.ssh(node.Name, method, args)
	d.mu.Unlock()
	if !handled {
		return d.nodeDouble.Call(ctx, node, method, opID, args, reply)
	}
	d.nodeDouble.mu.Lock()
	d.nodeDouble.calls = append(d.nodeDouble.calls, node.Name+" "+method+" "+opID)
	d.nodeDouble.mu.Unlock()
	if err != nil {
		return err
	}
	if reply != nil && out != nil {
		b, _ := json.Marshal(out)
		return json.Unmarshal(b, reply)
	}
	return nil
}

func (d *sshDouble) ssh(name, method string, args any) (any, bool, error) {
	n := d.node(name)
	switch method {
	case nodeapi.SSHKeyEnsure:
		a := args.(nodeapi.SSHKeyArgs)
		if d.noKeys[name] {
			return nil, true, fmt.Errorf("no space left on device")
		}
		if a.Stage {
			p, err := sshkeys.Generate(a.Type, a.Bits, "root@"+name)
			if err != nil {
				return nil, true, err
			}
			n.staged = p.Public
			return nodeapi.SSHKeyReply{Managed: true, PublicKey: p.Public, Created: true}, true, nil
		}
		if n.key != "" {
			return nodeapi.SSHKeyReply{Managed: true, PublicKey: n.key}, true, nil
		}
		p, err := sshkeys.Generate(a.Type, a.Bits, "root@"+name)
		if err != nil {
			return nil, true, err
		}
		n.key = p.Public
		return nodeapi.SSHKeyReply{Managed: true, PublicKey: n.key, Created: true}, true, nil
	case nodeapi.SSHKeyCommit:
		if name == d.master && n.staged != "" {
			// The master switches pairs: every node must trust the new
			// one already.
			for other, o := range d.nodes {
				if len(o.authorized) > 0 && !slices.Contains(o.authorized, n.staged) {
					d.violations = append(d.violations, other+" does not trust the master's new key yet")
				}
			}
		}
		if n.staged != "" {
			n.key, n.staged = n.staged, ""
		}
		return nodeapi.SSHKeyReply{Managed: true, PublicKey: n.key}, true, nil
	case nodeapi.SSHFilesRead:
		return nodeapi.SSHFilesReply{Managed: true, PubKeys: n.pubFile, Authorized: n.authorized}, true, nil
	case nodeapi.SSHFilesWrite:
		a := args.(nodeapi.SSHFilesWriteArgs)
		if a.PubKeys != nil {
			n.pubFile = *a.PubKeys
		}
		n.dropped = append(n.dropped, a.Drop...)
		if a.Authorized != nil {
			n.authorized = slices.Clone(*a.Authorized)
			if mk := d.node(d.master).key; mk != "" && !slices.Contains(n.authorized, mk) && len(n.authorized) > 0 {
				d.violations = append(d.violations, name+" lost the master's key")
			}
		}
		return nodeapi.SSHFilesReply{Managed: true}, true, nil
	}
	return nil, false, nil
}

// state checks every node's files: the public-key file holds exactly the
// keys of want potential candidates, authorized_keys exactly those of
// trusted ones.
func (d *sshDouble) check(t *testing.T, e *env, potential, trusted []string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var wantAuth []string
	want := sshkeys.PubKeys{}
	for _, name := range potential {
		n, _ := e.cfg.Node(name)
		want[n.UUID] = []string{d.node(name).key}
	}
	for _, name := range trusted {
		wantAuth = append(wantAuth, d.node(name).key)
	}
	for _, n := range e.cfg.Nodes() {
		if n.Offline {
			continue
		}
		s := d.node(n.Name)
		if s.key == "" {
			t.Errorf("%s has no key", n.Name)
		}
		if !slices.Equal(sorted(s.authorized), sorted(wantAuth)) {
			t.Errorf("%s trusts %d keys %v, want %v", n.Name, len(s.authorized), s.authorized, wantAuth)
		}
		if slices.Contains(potential, n.Name) {
			if s.pubFile != want.String() {
				t.Errorf("%s public-key file:\n%s\nwant:\n%s", n.Name, s.pubFile, want.String())
			}
		} else if s.pubFile != "" {
			t.Errorf("%s is no potential candidate but holds the public-key file", n.Name)
		}
	}
	if len(d.violations) > 0 {
		t.Errorf("the master lost access: %v", d.violations)
	}
}

func sorted(l []string) []string { return slices.Sorted(slices.Values(l)) }

func TestSSHKeysFollowNodeRoles(t *testing.T) {
	d := newSSHDouble()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), d.nodeDouble, true)
	defer e.close()
	e.proc.RPC = d
	ok := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
	}
	setParams := func(node string, kv ...any) map[string]any {
		op := map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "force": true}
		for i := 0; i < len(kv); i += 2 {
			op[kv[i].(string)] = kv[i+1]
		}
		return op
	}
	ok(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	ok(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n3", "primary_ip": "127.0.0.4", "master_capable": false})
	t.Run("add", func(t *testing.T) { d.check(t, e, []string{"n1", "n2"}, []string{"n1", "n2"}) })
	// A node that cannot make its key is refused before it enters the
	// configuration.
	d.mu.Lock()
	d.noKeys["n9"] = true
	d.mu.Unlock()
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n9", "primary_ip": "127.0.0.9"}); st != "error" {
		t.Fatal("a node without a key was added")
	}
	if _, found := e.cfg.Node("n9"); found {
		t.Fatal("the refused node is in the configuration")
	}
	if k, err := sshkeys.ParsePublic(d.node("n1").key); err != nil || k.Algo != "ssh-rsa" {
		t.Fatalf("master key %q (%v): want the default rsa", d.node("n1").key, err)
	}

	ok(setParams("n2", "master_candidate", false))
	t.Run("demote", func(t *testing.T) { d.check(t, e, []string{"n1", "n2"}, []string{"n1"}) })
	ok(setParams("n2", "master_candidate", true))
	t.Run("promote", func(t *testing.T) { d.check(t, e, []string{"n1", "n2"}, []string{"n1", "n2"}) })
	ok(setParams("n2", "offline", true))
	t.Run("offline", func(t *testing.T) { d.check(t, e, []string{"n1", "n2"}, []string{"n1"}) })
	ok(setParams("n2", "offline", false))
	ok(setParams("n2", "master_candidate", true))
	t.Run("online again", func(t *testing.T) { d.check(t, e, []string{"n1", "n2"}, []string{"n1", "n2"}) })

	old := map[string]string{}
	for _, n := range []string{"n1", "n2", "n3"} {
		old[n] = d.node(n).key
	}
	ok(map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "renew_ssh_keys": true, "ssh_key_type": "ed25519"})
	t.Run("renew", func(t *testing.T) {
		d.check(t, e, []string{"n1", "n2"}, []string{"n1", "n2"})
		for n, k := range old {
			if d.node(n).key == k {
				t.Errorf("%s kept its old key", n)
			}
			if pk, _ := sshkeys.ParsePublic(d.node(n).key); pk == nil || pk.Algo != "ssh-ed25519" {
				t.Errorf("%s has key %q, want ed25519", n, d.node(n).key)
			}
		}
		if typ, _ := e.cfg.Cluster().SSHKeySpec(); typ != "ed25519" {
			t.Errorf("cluster ssh_key_type %s after renewing to ed25519", typ)
		}
	})

	ok(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "master_capability_rapi_modifiable": true})
	t.Run("rapi modifiable", func(t *testing.T) { d.check(t, e, []string{"n1", "n2", "n3"}, []string{"n1", "n2"}) })

	ok(map[string]any{"OP_ID": "OP_NODE_REMOVE", "node_name": "n2"})
	t.Run("remove", func(t *testing.T) {
		d.check(t, e, []string{"n1", "n3"}, []string{"n1"})
		if s := d.node("n2"); s.pubFile != "" || len(s.authorized) != 0 {
			t.Errorf("the removed node keeps cluster files: %+v", s)
		}
	})

	ok(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "modify_ssh_setup": false})
	before := d.count(nodeapi.SSHFilesWrite) + d.count(nodeapi.SSHKeyEnsure)
	ok(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n4", "primary_ip": "127.0.0.5"})
	if after := d.count(nodeapi.SSHFilesWrite) + d.count(nodeapi.SSHKeyEnsure); after != before {
		t.Errorf("modify_ssh_setup off, yet %d SSH calls", after-before)
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "renew_ssh_keys": true}); st != "error" {
		t.Error("renewing SSH keys with modify_ssh_setup off succeeded")
	}
}

func TestSSHUpgradeRetiresSharedKey(t *testing.T) {
	d := newSSHDouble()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), d.nodeDouble, true)
	defer e.close()
	e.proc.RPC = d
	// n1 and n2 share one pair, trusted outside any cluster block.
	shared, err := sshkeys.Generate("rsa", 2048, "root@shared")
	if err != nil {
		t.Fatal(err)
	}
	d.node("n1").key, d.node("n2").key = shared.Public, shared.Public
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("add: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "renew_ssh_keys": true, "upgrade_ssh": true}); st != "success" {
		t.Fatalf("upgrade: %s %v", st, res)
	}
	if d.node("n1").key == shared.Public || d.node("n2").key == shared.Public || d.node("n1").key == d.node("n2").key {
		t.Fatalf("nodes still share a key: %q %q", d.node("n1").key, d.node("n2").key)
	}
	d.check(t, e, []string{"n1", "n2"}, []string{"n1", "n2"})
	// The shared key sat outside the cluster block: every node must have
	// been told to drop it.
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range []string{"n1", "n2"} {
		if !slices.ContainsFunc(d.node(n).dropped, func(k string) bool { return sshkeys.SameKey(k, shared.Public) }) {
			t.Errorf("%s was not told to drop the shared key (dropped %v)", n, d.node(n).dropped)
		}
	}
}
