package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/storecfg"
)

// TestEtcdDevCluster runs a dev cluster on three etcd members: an instance
// lifecycle, a few hundred jobs with corrald killed by SIGKILL while they
// run (the crash loop's invariants checked across the restart), then the
// loss of one etcd member, which the cluster must not notice.
func TestEtcdDevCluster(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 3})
	ctx := context.Background()

	cfg := c.storeRecord()
	if cfg.Backend != storecfg.BackendEtcd || cfg.Prefix != storecfg.DefaultPrefix("dev.corral") || !reflect.DeepEqual(cfg.Endpoints, c.st.EtcdEndpoints) || len(cfg.Endpoints) != 3 {
		t.Fatalf("store record %+v, dev cluster's members %v", cfg, c.st.EtcdEndpoints)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "master", storecfg.FileBolt)); !os.IsNotExist(err) {
		t.Fatalf("a bbolt store is still in use: %v", err)
	}
	etcdUser, err := bootstrap.Lookup(bootstrap.EtcdUser)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		p := c.proc(devcluster.EtcdMemberName(n))
		if uid := procUID(t, p.PID); uid != etcdUser.UID {
			t.Fatalf("%s (pid %d) runs as uid %d, want %s (%d)", p.Name, p.PID, uid, bootstrap.EtcdUser, etcdUser.UID)
		}
	}

	// An instance's life, on the fake hypervisor.
	c.mustSucceed(createOp("e1", "", 8))
	c.mustSucceed(createOp("e2", "node2", 8))
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "e1"})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "e1"})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "e1"})
	if files := c.diskFiles("node2", fmt.Sprint(c.instanceField("e2", "uuid"))); len(files) != 1 {
		t.Fatalf("e2 has disk files %v, want one", files)
	}

	// A few hundred jobs; corrald dies with SIGKILL while they run.
	l := &crashLoop{t: t, c: c, seed: 1, socket: c.st.Socket, nodes: slices.Clone(c.st.Nodes),
		jobs: map[int64]ackedJob{}, final: map[int64]string{}, wasRunning: map[int64]int{}}
	ids := append(c.submitDelays(300, 0), c.submitDelays(20, 0.5)...)
	ids = append(ids, c.submitOne(createOp("e3", "", 8)))
	for _, id := range ids {
		l.ack(id, 0, "job "+strconv.FormatInt(id, 10))
	}
	// Kill once some jobs have finished and others have not.
	waitFor(t, time.Minute, "the first jobs to finish", func() bool {
		rows, err := queryJobs(ctx, c.luxi, ids[:50], []string{"status"})
		return err == nil && rows[49] != nil && rows[49][0] == "success"
	})
	pre := l.snapshot(1)
	c.killCorrald()
	l.gen.Add(1)
	off := l.logSize()
	l.restart(1, off)
	l.check(1, pre, off)
	if !l.drain() {
		return
	}
	c.waitJobs(ids, time.Minute)
	l.compareFinal(ctx, "after the restart")
	if id := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}); id <= slices.Max(ids) {
		t.Fatalf("new job id %d is not above %d", id, slices.Max(ids))
	}
	if st := c.instanceField("e3", "status"); st != "running" {
		t.Fatalf("e3, created across the restart, is %v", st)
	}

	// One etcd member dies: two of three are a quorum, and corrald's
	// client moves to them. A write on its way to the dead member when it
	// died is retried by the store, which learns from the write's marker
	// whether it applied, so not one submission is refused.
	c.killEtcdMember(1)
	probe, err := c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}})
	if err != nil {
		t.Fatalf("submission refused with one of three etcd members down: %v", err)
	}
	ids = append(c.submitDelays(50, 0), probe)
	c.waitJobs(ids, time.Minute)
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "e2"})
	c.mustSucceed(createOp("e4", "", 8))
	// cluster verify names the dead member; the other two still lead.
	if out, _ := c.corral("cluster", "verify"); !strings.Contains(out, "is unhealthy") || strings.Contains(out, "no quorum") {
		t.Errorf("verify with one of three etcd members down:\n%s", out)
	}
	c.restartEtcdMember(1)
	waitFor(t, 30*time.Second, "verify to find every etcd member healthy", func() bool {
		out, _ := c.corral("cluster", "verify")
		return !strings.Contains(out, "etcd member")
	})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "e4"})
	rows, err := c.luxi.QueryInstances(ctx, nil, []string{"name", "admin_state"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]any{{"e2", "down"}, {"e3", "up"}}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("instances %v, want %v", rows, want)
	}
}

// TestMigrateStoreToEtcd moves a bbolt cluster with instances and finished
// jobs to etcd: refused while corrald runs, then done with the cluster
// stopped; after corrald's restart on etcd every job (with its log), every
// instance and every serial number is as before.
func TestMigrateStoreToEtcd(t *testing.T) {
	requireEtcd(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	ctx := context.Background()
	c.mustSucceed(createOp("m1", "", 8))
	c.mustSucceed(createOp("m2", "node2", 8))
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "m2"})
	c.waitJobs(c.submitDelays(40, 0), time.Minute)

	jobFields := []string{"id", "status", "summary", "opstatus", "opresult", "oplog", "received_ts", "end_ts"}
	instFields := []string{"name", "uuid", "admin_state", "status", "pnode", "serial_no", "disk.sizes", "nic.macs"}
	all, err := c.luxi.QueryJobs(ctx, nil, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range all {
		id, _ := r[0].(float64)
		ids = append(ids, int64(id))
	}
	jobsBefore, err := queryJobs(ctx, c.luxi, ids, jobFields)
	if err != nil {
		t.Fatal(err)
	}
	instBefore, err := c.luxi.QueryInstances(ctx, nil, instFields, false)
	if err != nil {
		t.Fatal(err)
	}
	l := &crashLoop{t: t, c: c}
	serialsBefore := l.serials(ctx)

	// Members of the cluster CA, as an operator would run them.
	ec := etcdtest.Start(t, etcdproc.Config{ClientTLS: clusterCAMember(t, c.dir)})
	ctx2, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	migrate := func() (string, error) {
		cmd := exec.CommandContext(ctx2, filepath.Join(binDir, "corral"), "cluster", "migrate-store", "--etcd-endpoints", strings.Join(ec.Endpoints(), ","))
		cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+c.st.Socket)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := migrate(); err == nil || !strings.Contains(out, "stop the cluster first") {
		t.Fatalf("migration while corrald runs: %v\n%s", err, out)
	}
	c.stopCorrald()
	out, err := migrate()
	if err != nil {
		t.Fatalf("migrate-store: %v\n%s", err, out)
	}
	t.Logf("migrate-store:\n%s", out)
	m := regexp.MustCompile(`(?m)^Verify: bbolt (\d+ keys, \d+ bytes, sha256 [0-9a-f]{64})\nVerify: etcd  (.*)$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no matching verification summaries in the output: %q", m)
	}
	cfg := c.storeRecord()
	if cfg.Backend != storecfg.BackendEtcd || !reflect.DeepEqual(cfg.Endpoints, ec.Endpoints()) || cfg.Prefix != storecfg.DefaultPrefix("dev.corral") {
		t.Fatalf("store record after the migration: %+v", cfg)
	}
	if backups, _ := filepath.Glob(filepath.Join(c.dir, "master", storecfg.FileBolt+".pre-etcd-*")); len(backups) != 1 {
		t.Fatalf("bbolt backups %v, want one", backups)
	}

	c.restartCorrald()
	if b, _ := os.ReadFile(c.proc("corrald").Log); !strings.Contains(string(b), "backend=etcd") {
		t.Fatal("corrald did not log opening the etcd store")
	}
	jobsAfter, err := queryJobs(ctx, c.luxi, ids, jobFields)
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobsBefore {
		if a, b := toJSON(jobsBefore[i]), toJSON(jobsAfter[i]); a != b {
			t.Errorf("job %d changed in the move:\nbefore %safter  %s", ids[i], a, b)
		}
	}
	if instAfter, err := c.luxi.QueryInstances(ctx, nil, instFields, false); err != nil || toJSON(instAfter) != toJSON(instBefore) {
		t.Fatalf("instances changed in the move (%v):\nbefore %safter  %s", err, toJSON(instBefore), toJSON(instAfter))
	}
	serialsAfter := l.serials(ctx)
	for obj, before := range serialsBefore {
		if after, ok := serialsAfter[obj]; !ok || after < before {
			t.Errorf("serial_no of %s went from %v to %v (present: %v)", obj, before, after, ok)
		}
	}

	// The cluster works on etcd: ids continue, instances change.
	if id := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}); id <= slices.Max(ids) {
		t.Fatalf("new job id %d is not above %d", id, slices.Max(ids))
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "m2"})
	c.mustSucceed(createOp("m3", "", 8))
	if out, err := c.corral("cluster", "migrate-store", "--etcd-endpoints", ec.Endpoints()[0]); err == nil || !strings.Contains(out, "etcd already") {
		t.Fatalf("second migration: %v\n%s", err, out)
	}
}

// TestClusterInitEtcdLocal creates a cluster on etcd without endpoints:
// Corral starts one local member as corral-etcd and writes its unit; the
// cluster runs on it, and cluster destroy takes the member along.
func TestClusterInitEtcdLocal(t *testing.T) {
	requireEtcd(t)
	h := newHandCluster(t, "e")
	dir, corral, l := h.dir, h.corral, h.l
	// Whatever happens, no member outlives the test.
	defer func() {
		for _, pid := range etcdPIDs(l) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if out, err := corral("cluster", "init", "--store", "etcd", "--etcd-ca", "/x", "c0"); err == nil || !strings.Contains(out, "need --etcd-endpoints") {
		t.Fatalf("init with a CA but no endpoints: %v\n%s", err, out)
	}
	out, err := corral(h.initArgs("etcd.cluster", "--store", "etcd")...)
	if err != nil {
		t.Fatalf("init --store etcd: %v\n%s", err, out)
	}
	pids := etcdPIDs(l)
	if len(pids) != 1 {
		t.Fatalf("etcd members running for %s: %v, want one", dir, pids)
	}
	acct, _ := bootstrap.Lookup(bootstrap.EtcdUser)
	if uid := procUID(t, pids[0]); uid != acct.UID {
		t.Fatalf("the local member runs as uid %d, want %s", uid, bootstrap.EtcdUser)
	}
	if b, err := os.ReadFile(filepath.Join(l.EtcdDir(), bootstrap.EtcdUnitName)); err != nil || !strings.Contains(string(b), "User="+bootstrap.EtcdUser) {
		t.Fatalf("unit: %v\n%s", err, b)
	}
	cfg, err := storecfg.Load(l.MasterDir())
	if err != nil || cfg.Backend != storecfg.BackendEtcd || !strings.HasPrefix(cfg.Endpoints[0], "https://"+h.ip+":") {
		t.Fatalf("store record %+v, %v", cfg, err)
	}
	if out, err := corral("cluster", "init", "--store", "etcd", "etcd.cluster"); err == nil || !strings.Contains(out, "already initialised") {
		t.Fatalf("second init: %v\n%s", err, out)
	}

	h.startNode()
	h.startMaster()
	if out, err := corral("cluster", "verify"); err != nil {
		t.Fatalf("verify: %v\n%s\n%s", err, out, h.log("corrald.log"))
	}
	if out, err := corral("cluster", "destroy", "--yes-do-it"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if pids := etcdPIDs(l); len(pids) != 0 {
		t.Fatalf("etcd members still run after destroy: %v", pids)
	}
	if _, err := os.Stat(l.EtcdDir()); !os.IsNotExist(err) {
		t.Fatalf("etcd directory left after destroy: %v", err)
	}
}

// submitOne submits a one-op job without waiting for it.
func (c *cluster) submitOne(op map[string]any) int64 {
	c.t.Helper()
	id, err := c.luxi.SubmitJob(context.Background(), []any{op})
	if err != nil {
		c.t.Fatalf("submit %v: %v", op, err)
	}
	return id
}

// clusterCAMember issues an etcd member certificate from the cluster's CA
// (root reads its key) for loopback, as an operator running etcd for a
// Corral cluster does.
func clusterCAMember(t *testing.T, stateDir string) *etcdproc.TLSFiles {
	t.Helper()
	md := bootstrap.Layout{StateDir: stateDir}.MasterDir()
	ca, err := pki.LoadCA(filepath.Join(md, "ca.pem"), filepath.Join(md, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &etcdproc.TLSFiles{CertFile: filepath.Join(dir, "m.pem"), KeyFile: filepath.Join(dir, "m.key"), CAFile: filepath.Join(dir, "ca.pem")}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "etcd", Role: pki.RoleMasterCandidate, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{bootstrap.EtcdClientHostname}, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteKeyPair(f.CertFile, f.KeyFile, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.CAFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// etcdPIDs lists the etcd processes whose data lives under l's etcd
// directory.
func etcdPIDs(l bootstrap.Layout) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && filepath.Base(args[0]) == "etcd" && strings.Contains(string(b), "\x00--data-dir="+l.EtcdDir()+"/") {
			out = append(out, pid)
		}
	}
	return out
}
