package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/etcdstore"
	"github.com/corral/corral/internal/storecfg"
	"github.com/corral/corral/internal/storecfg/backend"
)

// TestEtcdMembersFollowCandidates runs a dev cluster whose etcd members
// Corral manages: promoting a node to master candidate adds a voting
// member run by its node daemon, through which the store works; demoting
// it removes the member, and the cluster keeps its quorum.
func TestEtcdMembersFollowCandidates(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 2, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, ManagedEtcd: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	md := bootstrap.Layout{StateDir: c.dir}.MasterDir()
	rec := c.storeRecord()
	if rec.Managed == nil || rec.Managed.ClientPort != etcdproc.DefaultClientPort {
		t.Fatalf("store record %+v: want managed members", rec)
	}
	admin := openEtcdAdmin(t, ctx, md, rec)
	members := func() []etcdproc.MemberInfo {
		t.Helper()
		ms, err := admin.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	if ms := members(); len(ms) != 1 || ms[0].Name != "m0" {
		t.Fatalf("members at start %+v, want m0 alone", ms)
	}

	// node2 became a candidate when it was added, before any member was
	// managed for it; verify says so, and demoting it touches no member.
	if out, _ := c.corral("cluster", "verify"); !strings.Contains(out, "master candidate node2 runs no etcd member") {
		t.Errorf("verify does not report the candidate without a member:\n%s", out)
	}
	// setCandidate runs the modification and returns its job log.
	setCandidate := func(node string, on bool) string {
		t.Helper()
		op := map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "master_candidate": on}
		id, status, res := c.submit(op)
		if status != "success" {
			t.Fatalf("job %d (%v) ended %s: %v", id, op, status, res)
		}
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"oplog"})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows[0])
	}
	setCandidate("node2", false)
	if ms := members(); len(ms) != 1 {
		t.Fatalf("members after demoting a node without one: %+v", ms)
	}

	// Promotion: a learner first, started by node2's daemon, then a voter.
	log := setCandidate("node2", true)
	for _, want := range []string{"Added etcd member node2", "as a learner", "Started etcd member node2", "etcd member node2 is a voting member"} {
		if !strings.Contains(log, want) {
			t.Errorf("promotion log lacks %q:\n%s", want, log)
		}
	}
	ms := members()
	var m2 *etcdproc.MemberInfo
	for i := range ms {
		if ms[i].Name == "node2" {
			m2 = &ms[i]
		}
	}
	node2IP := c.st.IPs[1]
	wantClient := "https://" + node2IP + ":2379"
	if len(ms) != 2 || m2 == nil || m2.Learner || len(m2.ClientURLs) != 1 || m2.ClientURLs[0] != wantClient {
		t.Fatalf("members after promoting node2 %+v: want m0 and a voting node2 at %s", ms, wantClient)
	}
	memberDir := filepath.Join(bootstrap.Layout{StateDir: c.dir}.EtcdDir(), "member-node2")
	pid := etcdPIDOf(t, memberDir)
	if pid == 0 {
		t.Fatalf("no etcd process serves %s", memberDir)
	}
	etcdUser, err := bootstrap.Lookup(bootstrap.EtcdUser)
	if err != nil {
		t.Fatal(err)
	}
	if uid := procUID(t, pid); uid != etcdUser.UID {
		t.Fatalf("node2's member (pid %d) runs as uid %d, want %s", pid, uid, bootstrap.EtcdUser)
	}
	waitFor(t, 30*time.Second, "both members healthy", func() bool {
		hs, err := admin.Health(ctx)
		if err != nil || len(hs) != 2 {
			return false
		}
		for _, h := range hs {
			if !h.Healthy {
				return false
			}
		}
		return true
	})
	// The store works through the new member alone, and with two voters
	// every write needs it: a job that writes proves it votes.
	via := rec
	via.Endpoints = []string{wantClient}
	st, err := backend.OpenConfig(ctx, md, via, backend.Options{})
	if err != nil {
		t.Fatalf("opening the store through node2's member: %v", err)
	}
	defer st.Close()
	if _, err := st.Txn(ctx, nil, []store.Op{store.Put("e2e-etcdmembers-probe", []byte("x"))}, nil); err != nil {
		t.Fatalf("write through node2's member: %v", err)
	}
	if kv, err := admin.Get(ctx, "e2e-etcdmembers-probe"); err != nil || kv == nil || string(kv.Value) != "x" {
		t.Fatalf("write through node2's member read back through m0: %+v, %v", kv, err)
	}
	c.mustSucceed(createOp("em1", "node2", 8))
	if out, err := c.corral("cluster", "verify"); err != nil || strings.Contains(out, "node2") {
		t.Errorf("verify after the promotion (%v):\n%s", err, out)
	}

	// Demotion: the member goes, its process and data with it, and the
	// one member left is a quorum.
	log = setCandidate("node2", false)
	if !strings.Contains(log, "Removed etcd member node2") || !strings.Contains(log, "Stopped etcd member node2") {
		t.Errorf("demotion log:\n%s", log)
	}
	if ms := members(); len(ms) != 1 || ms[0].Name != "m0" {
		t.Fatalf("members after demoting node2 %+v, want m0 alone", ms)
	}
	if pid := etcdPIDOf(t, memberDir); pid != 0 {
		t.Fatalf("node2's member still runs (pid %d)", pid)
	}
	if _, err := os.Stat(memberDir); !os.IsNotExist(err) {
		t.Fatalf("node2's member directory is still there: %v", err)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "em1"})
	// node3 is still a candidate without a member (a warning); no error.
	setCandidate("node3", false)
	if out, err := c.corral("cluster", "verify"); err != nil || strings.Contains(out, "E:") {
		t.Errorf("verify at the end (%v):\n%s", err, out)
	}
}

// openEtcdAdmin opens the cluster's store with corrald's identity (root
// reads it), for its membership API.
func openEtcdAdmin(t *testing.T, ctx context.Context, md string, rec storecfg.Config) *etcdstore.Store {
	t.Helper()
	st, err := backend.OpenConfig(ctx, md, rec, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	es, ok := st.(*etcdstore.Store)
	if !ok {
		t.Fatalf("store is a %T, want etcd", st)
	}
	return es
}

// etcdPIDOf returns the etcd process whose data directory is dir/data, or 0.
func etcdPIDOf(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) != "etcd" || !strings.Contains(string(b), "\x00--data-dir="+dir+"/data\x00") {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err != nil || strings.Contains(string(st), ") Z ") {
			continue
		}
		var pid int
		for _, r := range e.Name() {
			pid = pid*10 + int(r-'0')
		}
		return pid
	}
	return 0
}
