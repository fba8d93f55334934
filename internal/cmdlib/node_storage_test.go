package cmdlib

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// storageDouble answers StorageList per node: a unit named after the
// node, with sizes from the node's name length, or the error of a node in
// failing. It records the arguments each node got.
type storageDouble struct {
	*nodeDouble
	mu      sync.Mutex
	failing map[string]bool
	args    map[string]nodeapi.StorageListArgs
}

func (d *storageDouble) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	if method != nodeapi.StorageList {
		return d.nodeDouble.Call(ctx, node, method, opID, args, reply)
	}
	d.mu.Lock()
	d.args[node.Name] = args.(nodeapi.StorageListArgs)
	fail := d.failing[node.Name]
	d.mu.Unlock()
	if fail {
		return ecode.ExecErrorf("statvfs /srv/%s: no such file or directory", node.Name)
	}
	units := []nodeapi.StorageUnit{{Name: "/srv/" + node.Name, SizeMiB: 1000 + int64(len(node.Name)), FreeMiB: 400, UsedMiB: 7}}
	b, _ := json.Marshal(units)
	return json.Unmarshal(b, reply)
}

func storageEnv(t *testing.T) (*env, *storageDouble) {
	t.Helper()
	d := &storageDouble{nodeDouble: newNodeDouble(), failing: map[string]bool{}, args: map[string]nodeapi.StorageListArgs{}}
	e := openEnvRPC(t, filepath.Join(t.TempDir(), "s.db"), d)
	tx := e.cfg.Begin()
	group := e.cfg.Nodes()[0].Group
	tx.PutNode(&config.Node{Meta: config.Meta{Name: "n10"}, PrimaryIP: "127.0.0.4", Group: group, VMCapable: true})
	tx.PutNode(&config.Node{Meta: config.Meta{Name: "n2"}, PrimaryIP: "127.0.0.3", Group: group, VMCapable: true})
	tx.PutNode(&config.Node{Meta: config.Meta{Name: "n3"}, PrimaryIP: "127.0.0.5", Group: group, Offline: true})
	if err := e.cfg.Commit(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	return e, d
}

func TestNodeQueryStorage(t *testing.T) {
	e, d := storageEnv(t)
	defer e.close()
	all := []any{"node", "type", "name", "size", "used", "free", "allocatable"}
	// Every online node, in Ganeti's NiceSort order (n2 before n10), the
	// offline n3 left out; values in output_fields order.
	st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "storage_type": "file", "output_fields": all})
	want := `[[["n1","file","/srv/n1",1002,7,400,true],["n2","file","/srv/n2",1002,7,400,true],["n10","file","/srv/n10",1003,7,400,true]]]`
	if st != "success" || out != want {
		t.Fatalf("all nodes: %s %s\nwant %s", st, out, want)
	}
	if a := d.args["n2"]; a.Type != "file" || !a.Used || a.Dir != "" {
		t.Errorf("n2 was asked %+v", a)
	}
	if _, asked := d.args["n3"]; asked {
		t.Error("the offline node was asked")
	}
	// Without "used" the nodes do not walk their directories; the default
	// type is that of the first enabled template (file).
	st, out = runJSON(t, e, map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{"n10", "n1"}, "output_fields": []any{"free", "name"}})
	if want := `[[[400,"/srv/n1"],[400,"/srv/n10"]]]`; st != "success" || out != want {
		t.Fatalf("two nodes: %s %s, want %s", st, out, want)
	}
	if d.args["n10"].Used {
		t.Error("used was asked for without the field")
	}
	// The name filters the units.
	st, out = runJSON(t, e, map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "name": "/srv/n2", "output_fields": []any{"node"}})
	if want := `[[["n2"]]]`; st != "success" || out != want {
		t.Fatalf("by name: %s %s, want %s", st, out, want)
	}
	// A node that fails is a warning in the job log, not a failure.
	d.failing["n2"] = true
	raw, _ := json.Marshal(map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "output_fields": []any{"node"}})
	id, err := e.q.Submit(t.Context(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	st, res := e.wait(t, id)
	if b, _ := json.Marshal(res); st != "success" || string(b) != `[[["n1"],["n10"]]]` {
		t.Fatalf("with n2 failing: %s %s", st, b)
	}
	rows, err := e.q.Query(t.Context(), []int64{id}, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(rows); !strings.Contains(string(b), "Can't get storage data from node n2: statvfs /srv/n2") {
		t.Errorf("no warning for n2 in the job log: %s", b)
	}
}

func TestNodeQueryStorageRefusals(t *testing.T) {
	e, _ := storageEnv(t)
	defer e.close()
	cases := []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"storage_type": "file", "output_fields": []any{"name", "bogus", "size", "x"}}, "Unknown output fields selected: bogus,x"},
		{map[string]any{"storage_type": "lvm-vg", "output_fields": []any{"name"}}, "No disk template of storage type 'lvm-vg' is enabled in this cluster. Enabled disk templates are: file,diskless (LVM storage is not available on Corral's nodes: they have no device-mapper"},
		{map[string]any{"storage_type": "lvm-pv", "output_fields": []any{"name"}}, "No disk template of storage type 'lvm-vg' is enabled"},
		{map[string]any{"storage_type": "sharedfile", "output_fields": []any{"name"}}, "No disk template of storage type 'sharedfile' is enabled in this cluster"},
		{map[string]any{"storage_type": "diskless", "output_fields": []any{"name"}}, "Storage reporting for storage type 'diskless' is not supported"},
		{map[string]any{"storage_type": "nfs", "output_fields": []any{"name"}}, "Parameter 'OP_NODE_QUERY_STORAGE.storage_type' fails validation"},
		{map[string]any{"nodes": []any{"n1", "nosuch"}, "output_fields": []any{"name"}}, "Node 'nosuch' not known"},
	}
	for _, c := range cases {
		c.op["OP_ID"] = "OP_NODE_QUERY_STORAGE"
		if st, out := runJSON(t, e, c.op); st != "error" || !strings.Contains(out, c.want) {
			t.Errorf("%v: %s %s, want an error with %q", c.op, st, out, c.want)
		}
	}
	// The default type comes from the first enabled template: diskless
	// reports no storage. With sharedfile enabled, its directory is asked.
	tx := e.cfg.Begin()
	cl := e.cfg.Cluster()
	cl.EnabledDiskTemplates = []string{"diskless", "sharedfile"}
	cl.SharedFileStorageDir = "/mnt/shared"
	tx.PutCluster(cl)
	if err := e.cfg.Commit(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	if st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "output_fields": []any{"name"}}); st != "error" ||
		!strings.Contains(out, "Storage reporting for storage type 'diskless' is not supported. Please use the --storage-type option") {
		t.Errorf("default diskless: %s %s", st, out)
	}
	if st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "storage_type": "sharedfile", "nodes": []any{"n1"}, "output_fields": []any{"type"}}); st != "success" || out != `[[["sharedfile"]]]` {
		t.Errorf("sharedfile: %s %s", st, out)
	}
}

func TestNodeStorageModifyAndRepairRefused(t *testing.T) {
	e, d := storageEnv(t)
	defer e.close()
	cases := []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "storage_type": "file", "changes": map[string]any{}}, `"Storage units of type 'file' can not be modified","wrong_input"`},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "storage_type": "sharedfile", "changes": map[string]any{"allocatable": false}}, "Storage units of type 'sharedfile' can not be modified"},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "storage_type": "lvm-pv", "changes": map[string]any{"size": 1, "allocatable": false, "free": 2}},
			`The following fields can not be modified for storage units of type 'lvm-pv': ['free', 'size']`},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "storage_type": "lvm-pv", "changes": map[string]any{"allocatable": false}}, "No disk template of storage type 'lvm-vg' is enabled in this cluster. Enabled disk templates are: file,diskless (LVM storage is not available on Corral's nodes: they have no device-mapper"},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "storage_type": "btrfs", "changes": map[string]any{}}, "Parameter 'OP_NODE_MODIFY_STORAGE.storage_type' fails validation"},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": "nosuch", "storage_type": "file", "changes": map[string]any{}}, "Node 'nosuch' not known"},
		{map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_uuid": "0000-not-n2", "storage_type": "lvm-pv", "changes": map[string]any{}}, `does not match the expected uuid '0000-not-n2'`},
		{map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "storage_type": "file"}, `"Storage units of type 'file' can not be repaired","wrong_input"`},
		{map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "storage_type": "lvm-pv"}, "Storage units of type 'lvm-pv' can not be repaired"},
		{map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "storage_type": "lvm-vg", "ignore_consistency": true}, "No disk template of storage type 'lvm-vg' is enabled in this cluster. Enabled disk templates are: file,diskless (LVM storage is not available"},
	}
	for _, c := range cases {
		if _, ok := c.op["node_name"]; !ok {
			c.op["node_name"] = "n2"
		}
		c.op["name"] = "/srv/n2"
		if st, out := runJSON(t, e, c.op); st != "error" || !strings.Contains(out, c.want) {
			t.Errorf("%v: %s %s, want an error with %q", c.op, st, out, c.want)
		}
	}
	if len(d.args) != 0 {
		t.Errorf("refused requests called nodes: %v", d.args)
	}
}
