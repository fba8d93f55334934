package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/fake"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// fakeNodes is two (or more) node daemons reduced to their fake
// hypervisors: the migration RPCs drive real fake-hypervisor migrations,
// over TLS with certificates the master signs.
type fakeNodes struct {
	mu   sync.Mutex
	hv   map[string]*fake.Hypervisor // by node name
	keys map[string][]byte           // node name + instance uuid
	dead map[string]bool             // nodes that answer nothing
	// mounts is what each node has mounted at the shared directory.
	mounts map[string]string
}

func newFakeNodes(t *testing.T, names ...string) *fakeNodes {
	f := &fakeNodes{hv: map[string]*fake.Hypervisor{}, keys: map[string][]byte{}, dead: map[string]bool{}}
	for _, n := range names {
		h, err := fake.New(t.TempDir(), hypervisor.NodeResources{MemoryTotalMiB: 4096, MemoryFreeMiB: 4096, CPUs: 4})
		if err != nil {
			t.Fatal(err)
		}
		f.hv[n] = h
	}
	return f
}

func hvSpecOf(in nodeapi.InstanceSpec) hypervisor.InstanceSpec {
	return hypervisor.InstanceSpec{Name: in.Name, UUID: in.UUID, MemoryMiB: in.MemoryMiB, VCPUs: in.VCPUs, HVParams: in.HVParams}
}

func (f *fakeNodes) tls(node, uuid, cert string, ca *pki.CA) hypervisor.MigrationTLS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return hypervisor.MigrationTLS{CAPEM: ca.CertPEM(), CertPEM: []byte(cert), KeyPEM: f.keys[node+uuid]}
}

func (f *fakeNodes) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	f.mu.Lock()
	h, dead := f.hv[node.Name], f.dead[node.Name]
	f.mu.Unlock()
	if dead || h == nil {
		return fmt.Errorf("node %s does not answer", node.Name)
	}
	out, err := f.call(ctx, h, node, method, args)
	if err != nil || reply == nil || out == nil {
		return err
	}
	b, _ := json.Marshal(out)
	return json.Unmarshal(b, reply)
}

var testMigrationCA *pki.CA

func (f *fakeNodes) call(ctx context.Context, h *fake.Hypervisor, node *config.Node, method string, args any) (any, error) {
	switch method {
	case nodeapi.NodeInfo:
		res, _ := h.NodeInfo(ctx)
		return nodeapi.NodeInfoReply{Name: node.Name, Version: Version, MemoryTotalMiB: res.MemoryTotalMiB, MemoryFreeMiB: res.MemoryFreeMiB, CPUs: 4, DiskTotalMiB: 10240, DiskFreeMiB: 10240}, nil
	case nodeapi.InstanceList:
		l, err := h.List(ctx)
		out := []nodeapi.RunningInstance{}
		for _, r := range l {
			out = append(out, nodeapi.RunningInstance{Name: r.Name, UUID: r.UUID, State: string(r.State), MemoryMiB: r.MemoryMiB})
		}
		return out, err
	case nodeapi.InstanceStart:
		return nil, h.Start(ctx, hvSpecOf(args.(nodeapi.InstanceArgs).Instance))
	case nodeapi.InstanceShutdown:
		return nil, h.Stop(ctx, args.(nodeapi.ShutdownArgs).Instance.Name, time.Second, false)
	case nodeapi.MigrationCSR:
		keyPEM, key, err := pki.NewKeyPair()
		if err != nil {
			return nil, err
		}
		csr, err := pki.NewCSR(key, node.Name)
		f.mu.Lock()
		f.keys[node.Name+args.(nodeapi.MigrationCSRArgs).InstanceUUID] = keyPEM
		f.mu.Unlock()
		return nodeapi.MigrationCSRReply{CSR: string(csr)}, err
	case nodeapi.MigrationAccept:
		a := args.(nodeapi.MigrationAcceptArgs)
		spec := hvSpecOf(a.Instance)
		spec.Incoming = true
		if err := h.Start(ctx, spec); err != nil {
			return nil, err
		}
		return nil, h.AcceptMigration(ctx, spec.Name, hypervisor.MigrationIncoming{Address: a.Address, Port: a.Port,
			TLS: f.tls(node.Name, spec.UUID, a.CertPEM, testMigrationCA), Postcopy: a.Postcopy})
	case nodeapi.MigrationStart:
		a := args.(nodeapi.MigrationStartArgs)
		return nil, h.StartMigration(ctx, a.Instance.Name, hypervisor.MigrationOutgoing{Address: a.Address, Port: a.Port,
			TLSHostname: a.TLSHostname, TLS: f.tls(node.Name, a.Instance.UUID, a.CertPEM, testMigrationCA), Live: a.Live,
			BandwidthMiB: a.BandwidthMiB, DowntimeMS: a.DowntimeMS})
	case nodeapi.MigrationStatus:
		return h.MigrationStatus(ctx, args.(nodeapi.InstanceArgs).Instance.Name)
	case nodeapi.MigrationCancel:
		return nil, h.CancelMigration(ctx, args.(nodeapi.InstanceArgs).Instance.Name)
	case nodeapi.MigrationFinish:
		return nil, h.FinishMigration(ctx, args.(nodeapi.InstanceArgs).Instance.Name)
	case nodeapi.MigrationDrop:
		return nil, h.Stop(ctx, args.(nodeapi.InstanceArgs).Instance.Name, 0, true)
	case nodeapi.SharedDirProbe:
		a := args.(nodeapi.SharedDirProbeArgs)
		f.mu.Lock()
		p := filepath.Join(f.mounts[node.Name], a.Name)
		f.mu.Unlock()
		switch a.Op {
		case nodeapi.ProbeWrite:
			return nil, os.WriteFile(p, []byte(a.Content), 0o600)
		case nodeapi.ProbeRemove:
			return nil, os.Remove(p)
		}
		b, err := os.ReadFile(p)
		return nodeapi.SharedDirProbeReply{Found: err == nil, Content: string(b)}, nil
	}
	return nil, fmt.Errorf("fake nodes: unexpected call %s", method)
}

// testCerts signs with a test CA, as corrald does with the cluster's.
type testCerts struct{ ca *pki.CA }

func (c testCerts) SignNodeCert(csrPEM []byte, role pki.Role, name string, ips []net.IP) ([]byte, error) {
	return c.ca.SignCSR(csrPEM, role, name, ips, time.Hour)
}

func (testCerts) RenewMasterCert(context.Context) (string, error) { return "", fmt.Errorf("not here") }

func freeTCPPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// migrationEnv is a cluster of n1 and n2 (127.0.0.1 both, distinct
// daemons) with one running sharedfile instance "web1" on n1; bandwidthMiB
// sets how long its 64 MiB take to move.
func migrationEnv(t *testing.T, bandwidthMiB int) (*env, *fakeNodes, *config.Instance) {
	t.Helper()
	var err error
	if testMigrationCA == nil {
		if testMigrationCA, err = pki.NewCA("c1", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	nodes := newFakeNodes(t, "n1", "n2")
	e := openEnv(t, filepath.Join(t.TempDir(), "db"), newNodeDouble(), true)
	e.proc.RPC = nodes
	e.proc.Certs = testCerts{testMigrationCA}
	tx := e.cfg.Begin()
	c := e.cfg.Cluster()
	c.EnabledDiskTemplates = append(c.EnabledDiskTemplates, config.DTSharedFile)
	c.SharedFileStorageDir = "/srv/shared"
	c.HVParams["fake"] = config.Params{"migration_port": fmt.Sprint(freeTCPPort(t)), "migration_bandwidth": fmt.Sprint(bandwidthMiB)}
	tx.PutCluster(c)
	n1, _ := e.cfg.Node("n1")
	n1.PrimaryIP = "127.0.0.1"
	tx.PutNode(n1)
	n2 := &config.Node{Meta: config.Meta{Name: "n2"}, PrimaryIP: "127.0.0.1", Group: n1.Group, VMCapable: true, MasterCapable: true}
	tx.PutNode(n2)
	inst := &config.Instance{Meta: config.Meta{Name: "web1"}, PrimaryNode: n1.UUID, OS: "tiny+default", Hypervisor: "fake",
		BEParams: config.Params{"maxmem": "64", "minmem": "64"}, AdminState: config.AdminUp, DiskTemplate: config.DTSharedFile,
		Disks: []config.Disk{{UUID: config.NewUUID(), SizeMiB: 100, Mode: "rw"}}}
	tx.PutInstance(inst)
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	inst, _ = e.cfg.Instance("web1")
	if err := nodes.hv["n1"].Start(context.Background(), hvSpecOf(e.proc.Spec(inst))); err != nil {
		t.Fatal(err)
	}
	return e, nodes, inst
}

func runsOn(t *testing.T, nodes *fakeNodes, node, name string) hypervisor.State {
	t.Helper()
	ri, err := nodes.hv[node].Info(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if ri == nil {
		return ""
	}
	return ri.State
}

func primaryName(t *testing.T, e *env, name string) string {
	inst, _ := e.cfg.Instance(name)
	n, _ := e.cfg.Node(inst.PrimaryNode)
	return n.Name
}

func jobLog(t *testing.T, e *env, id int64) string {
	rows, err := e.q.Query(context.Background(), []int64{id}, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

func TestMigrateBetweenTwoFakeNodesAndBack(t *testing.T) {
	e, nodes, _ := migrationEnv(t, 1024)
	defer e.close()
	id := e.submitOp(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "target_node": "n2"})
	if st, res := e.wait(t, id); st != "success" {
		t.Fatalf("migrate: %s %v\n%s", st, res, jobLog(t, e, id))
	}
	if p := primaryName(t, e, "web1"); p != "n2" {
		t.Fatalf("primary after migrate is %s", p)
	}
	if s := runsOn(t, nodes, "n2", "web1"); s != hypervisor.StateRunning {
		t.Fatalf("on n2 the instance is %q", s)
	}
	if s := runsOn(t, nodes, "n1", "web1"); s != "" {
		t.Fatalf("on n1 the instance is still %q", s)
	}
	if l := jobLog(t, e, id); !strings.Contains(l, "Migration completed in") || !strings.Contains(l, "downtime") {
		t.Fatalf("job log lacks the migration figures: %s", l)
	}
	// Back, with the allocator choosing (n1 is the only other node).
	id = e.submitOp(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "mode": "non-live"})
	if st, res := e.wait(t, id); st != "success" {
		t.Fatalf("migrate back: %s %v\n%s", st, res, jobLog(t, e, id))
	}
	if p := primaryName(t, e, "web1"); p != "n1" || runsOn(t, nodes, "n1", "web1") != hypervisor.StateRunning || runsOn(t, nodes, "n2", "web1") != "" {
		t.Fatalf("after migrating back: primary %s, n1 %q, n2 %q", p, runsOn(t, nodes, "n1", "web1"), runsOn(t, nodes, "n2", "web1"))
	}
}

func TestMigrateRefusals(t *testing.T) {
	e, nodes, inst := migrationEnv(t, 1024)
	defer e.close()
	for _, c := range []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"target_node": "n1"}, "already on node n1"},
		{map[string]any{"mode": "live", "live": true}, "Only one of"},
		{map[string]any{"mode": "fast"}, "Invalid migration mode"},
		{map[string]any{"iallocator": "other"}, "not found in the iallocator search path"},
	} {
		op := map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1"}
		for k, v := range c.op {
			op[k] = v
		}
		if st, res := e.run(t, op); st != "error" || !strings.Contains(resText(res), c.want) {
			t.Errorf("%v: %s %v, want an error with %q", c.op, st, res, c.want)
		}
	}
	// A stopped instance migrates only as a failover.
	if err := nodes.hv["n1"].Stop(context.Background(), "web1", 0, true); err != nil {
		t.Fatal(err)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1"}); st != "error" || !strings.Contains(resText(res), "not running") {
		t.Fatalf("migrate of a stopped instance: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "allow_failover": true}); st != "success" {
		t.Fatalf("migrate with allow_failover: %s %v", st, res)
	}
	if p := primaryName(t, e, "web1"); p != "n2" {
		t.Fatalf("primary %s after the fallback failover", p)
	}
	// A file instance has its disks on one node.
	inst, _ = e.cfg.Instance(inst.UUID)
	inst.DiskTemplate = config.DTFile
	setInstance(t, e, inst)
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1"}); st != "error" || !strings.Contains(resText(res), "does not allow migrations") {
		t.Fatalf("migrate of a file instance: %s %v", st, res)
	}
}

// Cancelling the job while memory is copied leaves the source running and
// removes the destination.
func TestMigrateCancelLeavesTheSourceRunning(t *testing.T) {
	e, nodes, _ := migrationEnv(t, 4) // 64 MiB at 4 MiB/s: 16 s
	defer e.close()
	id := e.submitOp(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "target_node": "n2"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := nodes.hv["n1"].MigrationStatus(context.Background(), "web1")
		if err == nil && st.Status == hypervisor.MigrationActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the migration did not start: %+v %v\n%s", st, err, jobLog(t, e, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, msg, err := e.q.Cancel(context.Background(), id, true); err != nil || !ok {
		t.Fatalf("cancel: %v %s %v", ok, msg, err)
	}
	if st, _ := e.wait(t, id); st != "canceled" && st != "error" {
		t.Fatalf("job ended %s", st)
	}
	if s := runsOn(t, nodes, "n1", "web1"); s != hypervisor.StateRunning {
		t.Fatalf("source is %q after the cancel", s)
	}
	if s := runsOn(t, nodes, "n2", "web1"); s != "" {
		t.Fatalf("destination still has the instance (%q)", s)
	}
	if p := primaryName(t, e, "web1"); p != "n1" {
		t.Fatalf("primary %s", p)
	}
}

// After a crash in the middle (the destination took the guest over, the
// configuration still says the source), cleanup finds where the instance
// runs and records it there.
func TestMigrateCleanupAfterACrash(t *testing.T) {
	e, nodes, inst := migrationEnv(t, 1024)
	defer e.close()
	ctx := context.Background()
	// The state a master crash right after qemu's completion leaves: the
	// destination runs, the source is paused.
	spec := hvSpecOf(e.proc.Spec(inst))
	if err := nodes.hv["n2"].Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := nodes.hv["n1"].SetState("web1", hypervisor.StatePaused); err != nil {
		t.Fatal(err)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "cleanup": true}); st != "success" {
		t.Fatalf("cleanup: %s %v", st, res)
	}
	if p := primaryName(t, e, "web1"); p != "n2" {
		t.Fatalf("cleanup left the primary on %s", p)
	}
	if s := runsOn(t, nodes, "n1", "web1"); s != "" {
		t.Fatalf("cleanup left the paused source (%q)", s)
	}
	// The other crash: the destination never got it. Cleanup keeps the
	// source and removes the waiting destination.
	if err := nodes.hv["n1"].Start(ctx, func() hypervisor.InstanceSpec { s := spec; s.Incoming = true; return s }()); err != nil {
		t.Fatal(err)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "cleanup": true}); st != "success" {
		t.Fatalf("second cleanup: %s %v", st, res)
	}
	if p := primaryName(t, e, "web1"); p != "n2" || runsOn(t, nodes, "n1", "web1") != "" {
		t.Fatalf("after the second cleanup: primary %s, n1 %q", p, runsOn(t, nodes, "n1", "web1"))
	}
	// Running on both is for a human to sort out.
	if err := nodes.hv["n1"].Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "cleanup": true}); st != "error" || !strings.Contains(resText(res), "several nodes") {
		t.Fatalf("cleanup with two running copies: %s %v", st, res)
	}
}

func TestFailover(t *testing.T) {
	e, nodes, _ := migrationEnv(t, 1024)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1"}); st != "success" {
		t.Fatalf("failover: %s %v", st, res)
	}
	if p := primaryName(t, e, "web1"); p != "n2" || runsOn(t, nodes, "n2", "web1") != hypervisor.StateRunning || runsOn(t, nodes, "n1", "web1") != "" {
		t.Fatalf("after failover: primary %s, n1 %q, n2 %q", p, runsOn(t, nodes, "n1", "web1"), runsOn(t, nodes, "n2", "web1"))
	}
	// n2 dies: without ignore_consistency the failover stops, with it the
	// instance comes up on n1.
	nodes.mu.Lock()
	nodes.dead["n2"] = true
	nodes.mu.Unlock()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "target_node": "n1"}); st != "error" || !strings.Contains(resText(res), "ignore_consistency") {
		t.Fatalf("failover from a dead node: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "target_node": "n1", "ignore_consistency": true}); st != "success" {
		t.Fatalf("failover with ignore_consistency: %s %v", st, res)
	}
	if p := primaryName(t, e, "web1"); p != "n1" || runsOn(t, nodes, "n1", "web1") != hypervisor.StateRunning {
		t.Fatalf("after the forced failover: primary %s, n1 %q", p, runsOn(t, nodes, "n1", "web1"))
	}
}

func resText(res []any) string {
	b, _ := json.Marshal(res)
	return string(b)
}

// Cluster verify finds a node that does not see the shared directory's
// files.
func TestVerifySharedDirectory(t *testing.T) {
	e, nodes, _ := migrationEnv(t, 1024)
	defer e.close()
	shared := t.TempDir()
	nodes.mounts = map[string]string{"n1": shared, "n2": shared}
	verify := func() string {
		st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_VERIFY"})
		if st != "success" {
			t.Fatalf("verify: %s %v", st, res)
		}
		return resText(res)
	}
	if out := verify(); strings.Contains(out, "shared directory") {
		t.Fatalf("verify with one shared directory complains: %s", out)
	}
	if l, _ := os.ReadDir(shared); len(l) != 0 {
		t.Fatalf("verify left %d probe(s) behind", len(l))
	}
	nodes.mu.Lock()
	nodes.mounts["n2"] = t.TempDir() // n2 lost its mount
	nodes.mu.Unlock()
	if out := verify(); !strings.Contains(out, "node n2: does not see the file node n1 wrote in the shared directory") {
		t.Fatalf("verify does not notice the missing mount: %s", out)
	}
}
