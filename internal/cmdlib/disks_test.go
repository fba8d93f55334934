package cmdlib

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store/boltstore"
)

// diskNode adds disk files to the node double: created, listed, grown and
// removed as corral-node would, keyed by "<instance uuid>/<disk uuid>".
type diskNode struct {
	*nodeDouble
	mu     sync.Mutex
	files  map[string]int64 // size in MiB
	serial string           // serial socket reported for running instances
}

func newDiskNode() *diskNode {
	return &diskNode{nodeDouble: newNodeDouble(), files: map[string]int64{}, serial: "/run/corral/node/kvm/0123abcd/serial.sock"}
}

func diskKey(inst string, d nodeapi.DiskSpec) string { return inst + "/" + d.UUID }

func (n *diskNode) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	var out any
	n.mu.Lock()
	switch method {
	case nodeapi.DiskCreate:
		a := args.(nodeapi.DiskArgs)
		n.files[diskKey(a.InstanceUUID, a.Disk)] = a.Disk.SizeMiB
	case nodeapi.DiskRemove:
		a := args.(nodeapi.DiskArgs)
		delete(n.files, diskKey(a.InstanceUUID, a.Disk))
	case nodeapi.DiskList:
		l := []nodeapi.FoundDisk{}
		for k, size := range n.files {
			inst, disk, _ := strings.Cut(k, "/")
			l = append(l, nodeapi.FoundDisk{Path: "/srv/file/" + k + ".raw", InstanceUUID: inst, DiskUUID: disk, SizeMiB: size})
		}
		out = l
	case nodeapi.DiskGrow:
		a := args.(nodeapi.DiskGrowArgs)
		n.files[diskKey(a.InstanceUUID, a.Disk)] = a.NewSizeMiB
		out = nodeapi.DiskGrowReply{Path: "/srv/file/" + diskKey(a.InstanceUUID, a.Disk) + ".raw", SizeMiB: a.NewSizeMiB}
	}
	n.mu.Unlock()
	if out == nil {
		if err := n.nodeDouble.Call(ctx, node, method, opID, args, reply); err != nil {
			return err
		}
		if method == nodeapi.InstanceList {
			for i := range *reply.(*[]nodeapi.RunningInstance) {
				(*reply.(*[]nodeapi.RunningInstance))[i].SerialSocket = n.serial
			}
		}
		return nil
	}
	n.mu.Lock()
	n.calls = append(n.calls, node.Name+" "+method+" "+opID)
	n.mu.Unlock()
	b, _ := json.Marshal(out)
	return json.Unmarshal(b, reply)
}

func (n *diskNode) size(inst *config.Instance, i int) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.files[inst.UUID+"/"+inst.Disks[i].UUID]
}

func (n *diskNode) setSize(inst *config.Instance, i int, size int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if size < 0 {
		delete(n.files, inst.UUID+"/"+inst.Disks[i].UUID)
		return
	}
	n.files[inst.UUID+"/"+inst.Disks[i].UUID] = size
}

// diskEnv is a cluster with one instance "web1" (file, one 100 MiB disk,
// fake hypervisor, running).
func diskEnv(t *testing.T) (*env, *diskNode, *config.Instance) {
	t.Helper()
	node := newDiskNode()
	e := openEnvRPC(t, filepath.Join(t.TempDir(), "s.db"), node)
	if st, res := e.run(t, create("web1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("web1")
	return e, node, inst
}

// openEnvRPC is openEnv's fresh cluster with another node double.
func openEnvRPC(t *testing.T, path string, rpc NodeRPC) *env {
	t.Helper()
	// openEnv bootstraps the store; the processor is then rebuilt over rpc.
	e := openEnv(t, path, newNodeDouble(), true)
	e.close()
	ctx := context.Background()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := confdb.Open(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc := NewProcessor(cfg, rpc, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: newEngine(t, proc), Summary: opcodes.Default().Summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &env{st: st, cfg: cfg, q: q, path: path}
}

// runJSON runs op and returns its status and its result as JSON.
func runJSON(t *testing.T, e *env, op map[string]any) (string, string) {
	t.Helper()
	st, res := e.run(t, op)
	b, _ := json.Marshal(res)
	return st, string(b)
}

// runPlain runs op and returns its results as plain JSON values.
func runPlain(t *testing.T, e *env, op map[string]any) (string, []any) {
	t.Helper()
	st, res := e.run(t, op)
	b, _ := json.Marshal(res)
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return st, out
}

func setInstance(t *testing.T, e *env, inst *config.Instance) {
	t.Helper()
	tx := e.cfg.Begin()
	tx.PutInstance(inst)
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

func TestActivateDisks(t *testing.T) {
	e, node, inst := diskEnv(t)
	defer e.close()
	act := map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "web1"}

	st, res := runPlain(t, e, act)
	want := []any{[]any{[]any{"n1", "disk/0", "/srv/file/" + inst.UUID + "/" + inst.Disks[0].UUID + ".raw"}}}
	if st != "success" || !reflect.DeepEqual(res, want) {
		t.Fatalf("activate: %s %#v, want %#v", st, res, want)
	}

	node.setSize(inst, 0, 50)
	if st, out := runJSON(t, e, act); st != "error" || !strings.Contains(out, "50 MiB") {
		t.Fatalf("activate of a short disk: %s %s", st, out)
	}
	act["ignore_size"] = true
	if st, out := runJSON(t, e, act); st != "success" {
		t.Fatalf("activate with ignore_size: %s %s", st, out)
	}
	node.setSize(inst, 0, -1)
	if st, out := runJSON(t, e, act); st != "error" || !strings.Contains(out, "disk/0 of instance web1 is missing") {
		t.Fatalf("activate of a missing disk: %s %s", st, out)
	}
	if st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "ghost"}); st != "error" || !strings.Contains(out, string(ecode.NoEnt)) {
		t.Fatalf("activate of an unknown instance: %s %s", st, out)
	}
}

func TestDeactivateDisks(t *testing.T) {
	e, node, _ := diskEnv(t)
	defer e.close()
	deact := map[string]any{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "web1"}
	if st, out := runJSON(t, e, deact); st != "error" || !strings.Contains(out, "cannot shutdown disks") || !strings.Contains(out, string(ecode.State)) {
		t.Fatalf("deactivate of a running instance: %s %s", st, out)
	}
	before := len(node.calls)
	deact["force"] = true
	if st, out := runJSON(t, e, deact); st != "success" {
		t.Fatalf("forced deactivate: %s %s", st, out)
	}
	for _, c := range node.calls[before:] {
		if !strings.Contains(c, nodeapi.InstanceList) {
			t.Fatalf("forced deactivate of file disks called a node: %s", c)
		}
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}); st != "success" {
		t.Fatal("shutdown failed")
	}
	delete(deact, "force")
	if st, out := runJSON(t, e, deact); st != "success" {
		t.Fatalf("deactivate of a stopped instance: %s %s", st, out)
	}
}

func TestGrowDisk(t *testing.T) {
	e, node, inst := diskEnv(t)
	defer e.close()
	grow := func(extra map[string]any) map[string]any {
		op := map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 0, "amount": 50}
		for k, v := range extra {
			op[k] = v
		}
		return op
	}
	steps := []struct {
		name  string
		op    map[string]any
		class ecode.Class // "" for success
		msg   string
		size  int64 // disk size after the op, in the config and on the node
	}{
		{name: "increment", op: grow(nil), size: 150},
		{name: "absolute", op: grow(map[string]any{"amount": 400, "absolute": true}), size: 400},
		{name: "absolute same size", op: grow(map[string]any{"amount": 400, "absolute": true}), size: 400},
		{name: "shrink", op: grow(map[string]any{"amount": 100, "absolute": true}), class: ecode.State, msg: "smaller than current", size: 400},
		{name: "negative", op: grow(map[string]any{"amount": -1}), class: ecode.Inval, msg: "negative", size: 400},
		{name: "bad index", op: grow(map[string]any{"disk": 3}), class: ecode.Inval, msg: "Invalid disk index", size: 400},
		{name: "no room", op: grow(map[string]any{"amount": 20000}), class: ecode.NoRes, msg: "Not enough disk space", size: 400},
	}
	for _, s := range steps {
		st, out := runJSON(t, e, s.op)
		if s.class == "" && st != "success" {
			t.Fatalf("%s: %s %s", s.name, st, out)
		}
		if s.class != "" && (st != "error" || !strings.Contains(out, string(s.class)) || !strings.Contains(out, s.msg)) {
			t.Fatalf("%s: %s %s, want error %s %q", s.name, st, out, s.class, s.msg)
		}
		got, _ := e.cfg.Instance("web1")
		if got.Disks[0].SizeMiB != s.size || node.size(inst, 0) != s.size {
			t.Fatalf("%s: config %d MiB, node %d MiB, want %d", s.name, got.Disks[0].SizeMiB, node.size(inst, 0), s.size)
		}
	}
	if n := node.count(nodeapi.DiskGrow); n != 2 {
		t.Fatalf("%d grow calls, want 2 (no call for a no-op or a refusal)", n)
	}

	// A running kvm instance is refused: qemu would not see the new size.
	kvm, _ := e.cfg.Instance("web1")
	kvm.Hypervisor = "kvm"
	setInstance(t, e, kvm)
	if st, out := runJSON(t, e, grow(nil)); st != "error" || !strings.Contains(out, "shut it down first") {
		t.Fatalf("grow of a running kvm instance: %s %s", st, out)
	}
}

func TestConsole(t *testing.T) {
	e, node, _ := diskEnv(t)
	defer e.close()
	cons := map[string]any{"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": "web1"}
	st, res := runPlain(t, e, cons)
	want := map[string]any{"instance": "web1", "kind": "msg", "message": "Console not available for fake hypervisor"}
	if st != "success" || len(res) != 1 || !reflect.DeepEqual(res[0], want) {
		t.Fatalf("fake console: %s %#v", st, res)
	}

	kvm, _ := e.cfg.Instance("web1")
	kvm.Hypervisor = "kvm"
	setInstance(t, e, kvm)
	st, res = runPlain(t, e, cons)
	want = map[string]any{"instance": "web1", "kind": "ssh", "host": "n1", "user": "root",
		"command": []any{"socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:" + node.serial}}
	if st != "success" || len(res) != 1 || !reflect.DeepEqual(res[0], want) {
		t.Fatalf("kvm console: %s %#v", st, res)
	}

	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}); st != "success" {
		t.Fatal("shutdown failed")
	}
	if st, out := runJSON(t, e, cons); st != "error" || !strings.Contains(out, "is not running (state ADMIN_down)") {
		t.Fatalf("console of a stopped instance: %s %s", st, out)
	}
}

func TestConsoleDict(t *testing.T) {
	node := &config.Node{Meta: config.Meta{Name: "n1"}}
	inst := func(hv string, port int) *config.Instance {
		return &config.Instance{Meta: config.Meta{Name: "vm1"}, Hypervisor: hv, NetworkPort: port}
	}
	cases := []struct {
		name   string
		inst   *config.Instance
		hv     map[string]string
		socket string
		want   map[string]any
	}{
		{"fake", inst("fake", 0), nil, "", map[string]any{"instance": "vm1", "kind": "msg", "message": "Console not available for fake hypervisor"}},
		{"kvm serial", inst("kvm", 0), map[string]string{"serial_console": "true"}, "/r/s.sock",
			map[string]any{"instance": "vm1", "kind": "ssh", "host": "n1", "user": "root", "command": []string{"socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/r/s.sock"}}},
		{"kvm vnc any address", inst("kvm", 5901), map[string]string{"serial_console": "false", "vnc_bind_address": "0.0.0.0"}, "",
			map[string]any{"instance": "vm1", "kind": "vnc", "host": "n1", "port": 5901, "display": 1}},
		{"kvm vnc address", inst("kvm", 5905), map[string]string{"serial_console": "false", "vnc_bind_address": "192.0.2.7"}, "",
			map[string]any{"instance": "vm1", "kind": "vnc", "host": "192.0.2.7", "port": 5905, "display": 5}},
		{"kvm spice", inst("kvm", 11002), map[string]string{"serial_console": "false", "spice_bind": "192.0.2.8"}, "",
			map[string]any{"instance": "vm1", "kind": "spice", "host": "192.0.2.8", "port": 11002}},
		{"kvm nothing", inst("kvm", 0), map[string]string{"serial_console": "false"}, "/r/s.sock",
			map[string]any{"instance": "vm1", "kind": "msg", "message": "No serial shell for instance vm1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := consoleDict(c.inst, node, c.hv, c.socket); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}
