package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/coe"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// nodeDouble stands in for corral-node (the real one is exercised by the
// end-to-end tests): it records calls and can block a method.
type nodeDouble struct {
	mu      sync.Mutex
	calls   []string // "node method opID"
	block   map[string]chan struct{}
	entered chan string
	running map[string]bool
	fail    map[string]error // method -> the error it answers
	// called, if set, runs after each call is recorded.
	called func(method string)
	// withArgs, if set, runs after each call is recorded, with its args.
	withArgs func(method string, args any)
	// replies holds the answer of methods the double does not model.
	replies map[string]any
}

func newNodeDouble() *nodeDouble {
	return &nodeDouble{block: map[string]chan struct{}{}, entered: make(chan string, 16), running: map[string]bool{}}
}

func (n *nodeDouble) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	n.mu.Lock()
	n.calls = append(n.calls, node.Name+" "+method+" "+opID)
	ch := n.block[method]
	ferr := n.fail[method]
	called, withArgs := n.called, n.withArgs
	n.mu.Unlock()
	if called != nil {
		called(method)
	}
	if withArgs != nil {
		withArgs(method, args)
	}
	if ferr != nil {
		return ferr
	}
	if ch != nil {
		n.entered <- method
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n.mu.Lock()
	out := n.replies[method]
	n.mu.Unlock()
	switch method {
	case nodeapi.NodeInfo:
		out = nodeapi.NodeInfoReply{Name: node.Name, Version: Version, MemoryTotalMiB: 4096, MemoryFreeMiB: 4096, CPUs: 4, DiskTotalMiB: 10240, DiskFreeMiB: 10240}
	case nodeapi.Version:
		out = nodeapi.VersionReply{Version: Version}
	case nodeapi.X509CertCreate:
		certPEM, _, err := pki.NewTransferCert(node.Name, time.Hour, time.Now())
		if err != nil {
			return err
		}
		out = nodeapi.X509CertCreateReply{Name: "x509-1-abc", CertPEM: string(certPEM)}
	case nodeapi.OSDiagnose:
		out = []nodeapi.OSInfo{{Name: "tiny", Valid: true, Variants: []string{"default"}, Parameters: [][2]string{{"marker", "m"}}}}
	case nodeapi.InstanceStart:
		n.mu.Lock()
		n.running[args.(nodeapi.InstanceArgs).Instance.UUID] = true
		n.mu.Unlock()
	case nodeapi.InstanceShutdown:
		n.mu.Lock()
		delete(n.running, args.(nodeapi.ShutdownArgs).Instance.UUID)
		n.mu.Unlock()
	case nodeapi.InstanceList:
		var l []nodeapi.RunningInstance
		n.mu.Lock()
		for u := range n.running {
			l = append(l, nodeapi.RunningInstance{UUID: u})
		}
		n.mu.Unlock()
		out = l
	}
	if reply != nil && out != nil {
		b, _ := json.Marshal(out)
		return json.Unmarshal(b, reply)
	}
	return nil
}

func (n *nodeDouble) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, s := range n.calls {
		if strings.Contains(s, " "+method+" ") {
			c++
		}
	}
	return c
}

type env struct {
	st   store.Store
	cfg  *confdb.DB
	q    *jobqueue.Queue
	node *nodeDouble
	path string
	proc *Processor
}

func openEnv(t *testing.T, path string, node *nodeDouble, fresh bool) *env {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return openEnvOn(t, st, path, node, fresh)
}

// openEnvOn is openEnv on an open store (a wrapper, for fault injection).
func openEnvOn(t *testing.T, st store.Store, path string, node *nodeDouble, fresh bool) *env {
	t.Helper()
	ctx := context.Background()
	var err error
	var cfg *confdb.DB
	if fresh {
		c := &config.Cluster{Meta: config.Meta{Name: "c1"}, ClusterName: "c1", RPCPort: 1811,
			EnabledHypervisors: []string{"fake", "kvm"}, HVParams: map[string]config.Params{"fake": {"migration_mode": "live"}, "kvm": {"kernel_path": ""}},
			BEParams: config.DefaultBEParams(), NICParams: config.DefaultNICParams(), OSParams: map[string]config.Params{},
			EnabledDiskTemplates: []string{"file", "diskless"}, MACPrefix: "aa:00:00", CandidatePoolSize: 10,
			MaxRunningJobs: 20, JobQueueSize: 5000}
		g := &config.NodeGroup{Meta: config.Meta{Name: "default"}}
		m := &config.Node{Meta: config.Meta{Name: "n1"}, PrimaryIP: "127.0.0.2", MasterCandidate: true, MasterCapable: true, VMCapable: true}
		if cfg, err = confdb.Bootstrap(ctx, st, c, g, m); err != nil {
			t.Fatal(err)
		}
	} else if cfg, err = confdb.Open(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	proc := NewProcessor(cfg, node, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: newEngine(t, proc), Summary: opcodes.Default().Summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &env{st: st, cfg: cfg, q: q, node: node, path: path, proc: proc}
}

func (e *env) close() {
	e.q.Stop()
	e.st.Close()
}

func (e *env) run(t *testing.T, op map[string]any) (string, []any) {
	t.Helper()
	raw, _ := json.Marshal(op)
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	return e.wait(t, id)
}

func (e *env) wait(t *testing.T, id int64) (string, []any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		rows, err := e.q.Query(ctx, []int64{id}, []string{"status", "opresult"})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := rows[0][0].(string)
		if st == "success" || st == "error" || st == "canceled" {
			res, _ := rows[0][1].([]any)
			return st, res
		}
		_, _, _, err = e.q.WaitForChange(ctx, id, []string{"status"}, []any{st}, -1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
	}
}

func create(name string, extra map[string]any) map[string]any {
	op := map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
		"disks": []any{map[string]any{"size": 100}}, "nics": []any{map[string]any{}}, "os_type": "tiny+default", "hypervisor": "fake"}
	for k, v := range extra {
		op[k] = v
	}
	return op
}

func TestCreateValidationChangesNothing(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("ok1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if st, res := e.run(t, create("ok2", map[string]any{"hypervisor": "kvm", "hvparams": map[string]any{"cpu_mask": "0:all", "vhost_net": "no"}, "beparams": map[string]any{"vcpus": 2}})); st != "success" {
		t.Fatalf("create with a parameter the cluster's stored hvparams lack: %s %v", st, res)
	}
	cases := []struct {
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{create("ok1", nil), ecode.Exists, "already in the cluster"},
		{create("bad_name!", nil), ecode.Inval, "Invalid instance name"},
		{create("x1", map[string]any{"disk_template": "plain"}), ecode.Inval, "not supported"},
		{create("x2", map[string]any{"hypervisor": "xen"}), ecode.State, "not enabled"},
		{create("x3", map[string]any{"hvparams": map[string]any{"nosuch": 1}}), ecode.Inval, "Unknown hypervisor parameter"},
		// The fake hypervisor has its own parameters, not kvm's.
		{create("x3b", map[string]any{"hvparams": map[string]any{"kernel_path": "/boot/vmlinuz"}}), ecode.Inval, "Unknown hypervisor parameter 'kernel_path' for fake"},
		{create("x4", map[string]any{"beparams": map[string]any{"maxmem": -1}}), ecode.Inval, "must be a positive integer, got -1"},
		{create("x5", map[string]any{"pnode": "ghost"}), ecode.NoEnt, "not known"},
		{create("x6", map[string]any{"disks": []any{map[string]any{"size": 1 << 30}}}), ecode.NoRes, "Can't find a node"},
		{create("x7", map[string]any{"os_type": "tiny"}), ecode.Inval, "must include a variant"},
		{create("x8", map[string]any{"osparams": map[string]any{"nope": "1"}}), ecode.Inval, "has no parameter"},
		{create("x9", map[string]any{"nics": []any{map[string]any{"mac": "zz"}}}), ecode.Inval, "invalid MAC"},
		{create("x10", map[string]any{"nics": []any{map[string]any{"mode": "routed"}}}), ecode.Inval, "Routed nic mode requires an ip address"},
		{create("x11", map[string]any{"mode": "clone"}), ecode.Inval, "Invalid instance creation mode 'clone'"},
		{create("x12", map[string]any{"mode": "remote-import"}), ecode.Inval, "source_instance_name"},
		{create("x13", map[string]any{"mode": "remote-import", "source_instance_name": "x"}), ecode.Environ, "domain secret"},
		// Parameters the hypervisor's table checks, the cluster's stored
		// hvparams lacking them (a cluster older than the parameter).
		{create("x14", map[string]any{"hypervisor": "kvm", "hvparams": map[string]any{"cpu_mask": "2-1"}}), ecode.Inval, "Invalid CPU ID range definition"},
		{create("x15", map[string]any{"hypervisor": "kvm", "hvparams": map[string]any{"user_shutdown": true}}), ecode.Inval, "enabled_user_shutdown"},
		{create("x16", map[string]any{"hypervisor": "kvm", "hvparams": map[string]any{"vnc_x509_verify": "yes"}}), ecode.Inval, "vnc_x509_path must be defined"},
		{create("x17", map[string]any{"hypervisor": "kvm", "hvparams": map[string]any{"cpu_mask": "0:1:0"}, "beparams": map[string]any{"vcpus": 2}}), ecode.Inval, "Number of vCPUs [2] does not match the CPU mask [0:1:0]"},
	}
	serial := e.cfg.Serial()
	for _, c := range cases {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), string(c.class)) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: got %s %s, want error %s containing %q", c.op["instance_name"], st, b, c.class, c.msg)
		}
	}
	if got := len(e.cfg.Instances()); got != 2 {
		t.Fatalf("failed creates left %d instances", got-2)
	}
	if e.cfg.Serial() != serial {
		t.Fatal("cluster object changed")
	}
}

// TestResumeAfterRestart stops the queue while a create waits in its OS
// install step, then opens a new queue on the same store: the op resumes at
// that step with the same plan (same uuid, same MAC), and the disk step
// committed before the stop does not run again.
func TestResumeAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	node := newNodeDouble()
	node.block[nodeapi.OSCreate] = make(chan struct{})
	e := openEnv(t, path, node, true)
	raw, _ := json.Marshal(create("web1", nil))
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-node.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("create never reached the OS step")
	}
	inst, ok := e.cfg.Instance("web1")
	if !ok {
		t.Fatal("reserve step did not commit the instance")
	}
	e.close()

	node2 := newNodeDouble()
	e2 := openEnv(t, path, node2, false)
	defer e2.close()
	st, res := e2.wait(t, id)
	if st != "success" {
		t.Fatalf("resumed job: %s %v", st, res)
	}
	if node2.count(nodeapi.DiskCreate) != 0 {
		t.Fatalf("disk step ran again after resume: %v", node2.calls)
	}
	if node2.count(nodeapi.OSCreate) != 1 || node2.count(nodeapi.InstanceStart) != 1 {
		t.Fatalf("resume did not run the remaining steps once: %v", node2.calls)
	}
	after, _ := e2.cfg.Instance("web1")
	if after.UUID != inst.UUID || after.NICs[0].MAC != inst.NICs[0].MAC || after.AdminState != config.AdminUp {
		t.Fatalf("plan changed across the restart: before %+v after %+v", inst, after)
	}
	for _, c := range node2.calls {
		if strings.Contains(c, nodeapi.OSCreate) && !strings.Contains(c, fmt.Sprintf("job/%d/op/0/step/2/", id)) {
			t.Fatalf("OS step carries the wrong operation id: %s", c)
		}
	}
}

func TestNodeFlags(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	n2, _ := e.cfg.Node("n2")
	if !n2.MasterCandidate || !n2.VMCapable {
		t.Fatalf("new node flags: %+v", n2)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "offline": true})
	if st != "success" {
		t.Fatalf("offline: %s %v", st, res)
	}
	n2, _ = e.cfg.Node("n2")
	if !n2.Offline || n2.MasterCandidate {
		t.Fatalf("offline must demote: %+v", n2)
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "offline": true}); st != "error" {
		t.Fatal("the master was allowed offline")
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_NODE_REMOVE", "node_name": "n1"}); st != "error" {
		t.Fatal("the master was removed")
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_NODE_REMOVE", "node_name": "n2"}); st != "success" {
		t.Fatal("node remove failed")
	}
}

func TestInterruptibleDelayKill(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	raw, _ := json.Marshal(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 30, "interruptible": true})
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		rows, _ := e.q.Query(ctx, []int64{id}, []string{"status"})
		if rows[0][0] == "running" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("job never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := e.q.Cancel(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	// e.wait gives up after 20 s, well before the 30 s delay would end:
	// only an interrupted delay is canceled in time.
	if st, _ := e.wait(t, id); st != "canceled" {
		t.Fatalf("status %s, want canceled", st)
	}
}

// newEngine runs proc's units. Node calls go through proc.RPC as it is at
// the time of the call, so a test may swap the node double after start.
func newEngine(t *testing.T, proc *Processor) *engine.Processor {
	t.Helper()
	reg := engine.NewRegistry(opcodes.Default())
	proc.Register(reg)
	// The table is corrald's whole one: the bare-metal and COE units
	// complete it.
	baremetal.Register(reg, &baremetal.Deps{Cfg: proc.Cfg})
	coe.Register(reg, &coe.Deps{Cfg: proc.Cfg})
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	return engine.NewProcessor(proc.Cfg, locking.New(), rpcVia{proc}, reg, proc.Log)
}

// rpcVia calls the nodes through a Processor's current RPC.
type rpcVia struct{ p *Processor }

func (r rpcVia) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	return r.p.RPC.Call(ctx, node, method, opID, args, reply)
}
